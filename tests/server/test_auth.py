"""Bearer tokens: one Authorization header, the right token, on both transports."""

from __future__ import annotations

import grpc
import httpx
import pytest

from despina.proto import service_pb2 as pb
from despina.server.auth import check_headers
from despina.server.errors import Unauthenticated

from .conftest import Daemon
from .test_grpc import (
    TOKEN,
    guarded,  # noqa: F401  (fixture)
    status_of,
    stub,
)


def test_one_header_with_the_token_passes_and_anything_else_is_refused() -> None:
    check_headers([f"Bearer {TOKEN}"], TOKEN)
    check_headers([], None)
    check_headers(["Bearer a", "Bearer b"], None)  # no token configured: headers are not read
    with pytest.raises(Unauthenticated, match="2 Authorization headers; send exactly one"):
        check_headers([f"Bearer {TOKEN}", "Bearer wrong"], TOKEN)
    with pytest.raises(Unauthenticated, match="2 Authorization headers"):
        check_headers(["Bearer wrong", f"Bearer {TOKEN}"], TOKEN)  # whichever comes last
    with pytest.raises(Unauthenticated, match="not valid"):
        check_headers(["Bearer wrong"], TOKEN)


def test_duplicate_authorization_headers_are_refused_over_http_and_grpc(guarded: Daemon) -> None:  # noqa: F811
    good, bad = ("authorization", f"Bearer {TOKEN}"), ("authorization", "Bearer wrong")
    for headers in ([bad, good], [good, bad]):
        r = httpx.get(guarded.http + "/v1/kernels", headers=headers)
        assert r.status_code == 401 and "send exactly one" in r.json()["error"]["message"]
        code, message = status_of(lambda h=headers: stub(guarded).Stats(pb.StatsRequest(), metadata=tuple(h)))
        assert code == grpc.StatusCode.UNAUTHENTICATED and "send exactly one" in message
    assert httpx.get(guarded.http + "/v1/kernels", headers=[good]).status_code == 200
    assert stub(guarded).Stats(pb.StatsRequest(), metadata=(good,)) is not None
