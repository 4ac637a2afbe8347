"""Bearer tokens: one Authorization header, the right token, on both transports."""

from __future__ import annotations

from pathlib import Path

import grpc
import httpx
import pytest

from despina.proto import service_pb2 as pb
from despina.server.auth import Tokens
from despina.server.errors import Unauthenticated

from .conftest import Daemon
from .test_grpc import (
    TOKEN,
    guarded,  # noqa: F401  (fixture)
    status_of,
    stub,
)


def test_one_header_with_a_token_gives_its_tenant_and_anything_else_is_refused() -> None:
    tokens = Tokens.one(TOKEN)
    assert tokens.tenant_of([f"Bearer {TOKEN}"]) == "default"
    with pytest.raises(Unauthenticated, match="2 Authorization headers; send exactly one"):
        tokens.tenant_of([f"Bearer {TOKEN}", "Bearer wrong"])
    with pytest.raises(Unauthenticated, match="2 Authorization headers"):
        tokens.tenant_of(["Bearer wrong", f"Bearer {TOKEN}"])  # whichever comes last
    with pytest.raises(Unauthenticated, match="not valid"):
        tokens.tenant_of(["Bearer wrong"])
    with pytest.raises(Unauthenticated, match="needs 'Authorization: Bearer <token>'"):
        tokens.tenant_of([])


def test_a_token_file_names_tenants(tmp_path: Path) -> None:
    f = tmp_path / "tokens"
    f.write_text("# team tokens\nteam-a aaaa1111\n\nteam-b bbbb2222\ncccc3333\n")
    tokens = Tokens.load(str(f))
    assert tokens.tenants == {"team-a", "team-b", "default"}
    assert [tokens.tenant(f"Bearer {t}") for t in ("aaaa1111", "bbbb2222", "cccc3333")] == ["team-a", "team-b", "default"]
    for text, problem in (("a b c\n", "line 1: expected TOKEN or TENANT TOKEN"), ("x\nx\n", "line 2: this token is on"),
                          ("bad/name tok\n", "line 1: expected"), ("\n# only\n", "is empty")):
        f.write_text(text)
        with pytest.raises(ValueError, match=problem):
            Tokens.load(str(f))


def test_duplicate_authorization_headers_are_refused_over_http_and_grpc(guarded: Daemon) -> None:  # noqa: F811
    good, bad = ("authorization", f"Bearer {TOKEN}"), ("authorization", "Bearer wrong")
    for headers in ([bad, good], [good, bad]):
        r = httpx.get(guarded.http + "/v1/kernels", headers=headers)
        assert r.status_code == 401 and "send exactly one" in r.json()["error"]["message"]
        code, message = status_of(lambda h=headers: stub(guarded).Stats(pb.StatsRequest(), metadata=tuple(h)))
        assert code == grpc.StatusCode.UNAUTHENTICATED and "send exactly one" in message
    assert httpx.get(guarded.http + "/v1/kernels", headers=[good]).status_code == 200
    assert stub(guarded).Stats(pb.StatsRequest(), metadata=(good,)) is not None
