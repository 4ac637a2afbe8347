"""Tenants: a token file naming several shows each tenant only the kernels it compiled or was answered
with (listings, metadata, stages, line maps, deletion, the viewer), while a Compile is answered by
content whoever compiled first. A real `despina serve` with Redis, over HTTP and gRPC."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest

from despina.proto import service_pb2 as pb
from despina.server.tenancy import Owners

from .conftest import Daemon, RedisProcess, unique
from .kernels import vector_add_ir
from .test_grpc import status_of, stub

A, B = "team-a-token-0123456789", "team-b-token-9876543210"


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, shared_redis: RedisProcess) -> Iterator[Daemon]:
    work = tmp_path_factory.mktemp("tenants")
    tokens = work / "tokens"
    tokens.write_text(f"team-a {A}\nteam-b {B}\n")
    d = Daemon(work, shared_redis.url, extra=("--token-file", str(tokens)))
    yield d
    d.stop()


def client(d: Daemon, token: str) -> httpx.Client:
    return httpx.Client(base_url=d.http, timeout=30, headers={"Authorization": f"Bearer {token}"})


def compile_(http: httpx.Client, ir: bytes) -> str:
    r = http.post("/v1/compile", json={"ir": base64.b64encode(ir).decode()})
    assert r.status_code == 200, r.text
    return str(r.json()["key"])


def test_each_tenant_sees_its_own_kernels(shared: Daemon) -> None:
    ir_a, ir_b = vector_add_ir(salt=unique()), vector_add_ir(salt=unique())
    with client(shared, A) as a, client(shared, B) as b:
        key_a, key_b = compile_(a, ir_a), compile_(b, ir_b)
        listed_a = {k["key"] for k in a.get("/v1/kernels", params={"limit": 10_000}).json()}
        assert key_a in listed_a and key_b not in listed_a
        for path in (f"/v1/kernels/{key_b}", f"/v1/kernels/{key_b}/ptx", f"/v1/kernels/{key_b}/lines"):
            r = a.get(path)
            assert r.status_code == 404 and r.json()["error"]["code"] == "NOT_FOUND", path
        assert a.delete(f"/v1/kernels/{key_b}").status_code == 404
        assert b.get(f"/v1/kernels/{key_b}/ptx").status_code == 200
        # By content: team-b compiles team-a's kernel, is answered from the cache, and owns it from then on.
        assert b.get(f"/v1/kernels/{key_a}").status_code == 404
        assert compile_(b, ir_a) == key_a and b.get(f"/v1/kernels/{key_a}").status_code == 200
        assert b.delete(f"/v1/kernels/{key_b}").status_code == 200
    code, _ = status_of(lambda: stub(shared).GetArtifact(pb.GetArtifactRequest(key=key_b, stage="ptx"),
                                                          metadata=(("authorization", f"Bearer {A}"),)))
    assert code == grpc.StatusCode.NOT_FOUND
    got = stub(shared).GetArtifact(pb.GetArtifactRequest(key=key_a, stage="ptx"), metadata=(("authorization", f"Bearer {A}"),))
    assert got.data
    assert httpx.get(shared.http + "/metrics", timeout=10).status_code == 200  # open paths list no kernel


def test_the_viewer_shows_the_signed_in_tenants_kernels(shared: Daemon) -> None:
    with client(shared, A) as a, client(shared, B) as b:
        key_a, key_b = compile_(a, vector_add_ir(salt=unique())), compile_(b, vector_add_ir(salt=unique()))
    with httpx.Client(base_url=shared.http, timeout=30) as browser:
        r = browser.post("/ui/login", data={"token": A, "next": "/ui"}, follow_redirects=False)
        assert r.status_code == 303 and A not in r.headers["set-cookie"]
        page = browser.get("/ui").text
        assert key_a[:16] in page and key_b[:16] not in page
        assert browser.get(f"/ui/kernels/{key_b}").status_code == 404
        assert browser.get(f"/ui/kernels/{key_a}").status_code == 200


def test_owners_persist_on_disk(tmp_path: Path) -> None:
    async def main() -> None:
        key = "ab" * 32
        await Owners(str(tmp_path), None, 60).add(key, "team-a")
        again = Owners(str(tmp_path), None, 60)  # a restarted daemon
        assert await again.of(key) == {"team-a"}
        await again.forget(key)
        assert await Owners(str(tmp_path), None, 60).of(key) == set()

    asyncio.run(main())
