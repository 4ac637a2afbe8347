"""Several daemons on one Redis: shared cache, single-flight, Redis failures, corrupt entries."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from despina.proto import service_pb2 as pb
from despina.server.cache.redis_tier import name

from .conftest import TESTS, Daemon, RedisProcess, unique
from .kernels import vector_add_ir
from .test_grpc import stub


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, shared_redis: RedisProcess) -> Iterator[tuple[Daemon, Daemon]]:
    workdir = tmp_path_factory.mktemp("pair")
    a = Daemon(workdir, shared_redis.url, workers=1)
    b = Daemon(workdir, shared_redis.url, workers=1)
    yield a, b
    a.stop()
    b.stop()


def client_process(server: str, salt: str) -> dict[str, Any]:
    env = dict(os.environ, DESPINA_SERVER=server, DESPINA_SERVER_REQUIRED="1", PYTHONPATH=str(TESTS))
    out = subprocess.run([sys.executable, "-m", "server.client_process", salt], env=env, capture_output=True,
                         text=True, timeout=60, cwd=TESTS)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_second_client_process_is_answered_from_redis(pair: tuple[Daemon, Daemon]) -> None:
    a, b = pair
    salt = unique()
    first = client_process(a.grpc, salt)
    second = client_process(b.http, salt)
    assert (first["tier"], second["tier"]) == ("compiled", "redis")
    assert first["key"] == second["key"] and first["cubin"] == second["cubin"] > 0


def test_32_clients_two_daemons_one_compilation(pair: tuple[Daemon, Daemon]) -> None:
    a, b = pair
    before = sum(d.metric("despina_compiles_total") for d in pair)
    ir = vector_add_ir(salt=unique(), fake_sleep=0.5)

    def over_grpc(_: int) -> str:
        return pb.Tier.Name(stub(a).Compile(pb.CompileRequest(ir=ir), timeout=60).tier).lower()

    def over_http(_: int) -> str:
        r = httpx.post(b.http + "/v1/compile", json={"ir": base64.b64encode(ir).decode()}, timeout=60)
        r.raise_for_status()
        return str(r.json()["tier"])

    with ThreadPoolExecutor(32) as pool:
        futures = [pool.submit(over_grpc if i % 2 else over_http, i) for i in range(32)]
        tiers = [f.result() for f in futures]
    assert sum(d.metric("despina_compiles_total") for d in pair) - before == 1
    assert 1 <= tiers.count("compiled") <= 16  # the requests that one daemon coalesced onto its compilation
    assert set(tiers) <= {"compiled", "redis", "memory"}


def test_corrupt_entry_detected_discarded_recompiled(pair: tuple[Daemon, Daemon], shared_redis: RedisProcess) -> None:
    a, b = pair
    ir = vector_add_ir(salt=unique())
    key = stub(a).Compile(pb.CompileRequest(ir=ir)).key
    entry_name = name("kernel", key)
    r = shared_redis.client()
    blob = bytearray(r.get(entry_name))
    blob[len(blob) // 2] ^= 0x40
    r.set(entry_name, bytes(blob))
    corrupt_before = b.metric("despina_cache_corrupt_total")
    reply = stub(b).Compile(pb.CompileRequest(ir=ir))
    assert reply.tier == pb.COMPILED and reply.key == key
    assert b.metric("despina_cache_corrupt_total") == corrupt_before + 1
    assert r.get(entry_name) != bytes(blob)
    assert stub(a).Compile(pb.CompileRequest(ir=ir)).cubin == reply.cubin


def test_redis_killed_mid_run(tmp_path: Path) -> None:
    redis_server = RedisProcess(tmp_path)
    redis_server.start()
    d = Daemon(tmp_path, redis_server.url, workers=1)
    try:
        s = stub(d)
        warm = vector_add_ir(salt=unique())
        assert s.Compile(pb.CompileRequest(ir=warm)).tier == pb.COMPILED
        redis_server.stop()
        tiers = [s.Compile(pb.CompileRequest(ir=vector_add_ir(salt=unique())), timeout=30).tier for _ in range(5)]
        assert tiers == [pb.COMPILED] * 5
        assert s.Compile(pb.CompileRequest(ir=warm)).tier == pb.MEMORY
        assert d.metric("despina_redis_errors_total") >= 1 and d.metric("despina_redis_up") == 0
        assert not s.Stats(pb.StatsRequest()).redis_connected

        redis_server.start()  # same port: the daemon reconnects by itself
        fresh = vector_add_ir(salt=unique())
        deadline_tries = 40
        key = ""
        for _ in range(deadline_tries):
            key = s.Compile(pb.CompileRequest(ir=fresh)).key
            if redis_server.client().exists(name("kernel", key)):
                break
            fresh = vector_add_ir(salt=unique())
            __import__("time").sleep(0.1)
        assert redis_server.client().exists(name("kernel", key))
        assert d.metric("despina_redis_up") == 1
    except grpc.RpcError as e:
        raise AssertionError(f"{e.code()}: {e.details()}\n{d.log.read_text()[-2000:]}") from None
    finally:
        d.stop()
        redis_server.stop()


def test_a_timeout_on_one_daemon_is_the_same_status_on_the_other(tmp_path: Path, shared_redis: RedisProcess) -> None:
    """Daemon A's compile runs past its time-out while B's client waits on A's lease: B's client gets
    DEADLINE_EXCEEDED too (from A's record, MAC'd with the cluster secret), not INVALID_ARGUMENT."""
    secret = tmp_path / "secret"
    secret.write_bytes(b"x" * 32)
    extra = ("--compile-timeout", "1", "--cluster-secret-file", str(secret))
    a, b = (Daemon(tmp_path, shared_redis.url, extra=extra) for _ in range(2))
    try:
        ir = vector_add_ir(salt=unique(), fake_sleep=30)
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(lambda: stub(a).Compile(pb.CompileRequest(ir=ir), timeout=30))
            deadline = time.monotonic() + 20
            while a.metric("despina_compiles_in_flight") == 0 and time.monotonic() < deadline:
                time.sleep(0.02)
            second = pool.submit(lambda: stub(b).Compile(pb.CompileRequest(ir=ir), timeout=30))
            codes = [f.exception(30).code() for f in (first, second)]  # type: ignore[union-attr]
        assert codes == [grpc.StatusCode.DEADLINE_EXCEEDED] * 2
        assert b.metric("despina_compiles_total") == 0  # B waited on A's lease and took its answer
    finally:
        a.stop()
        b.stop()
