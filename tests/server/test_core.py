"""CompileService without a transport: tiers, single-flight, bad input, worker failures."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

import pytest

from despina.compiler.ir.codec import encode
from despina.compiler.options import CompileOptions
from despina.server import execute
from despina.server.cache.redis_tier import name as redis_name
from despina.server.core import CompileRequest, CompileService, ExecuteRequest
from despina.server.errors import (
    DeadlineExceeded,
    Internal,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    Unimplemented,
)
from despina.server.execute import Buffer

from .conftest import RedisProcess, unique, with_service
from .kernels import vector_add, vector_add_ir


def test_tiers_memory_redis_compiled(shared_redis: RedisProcess) -> None:
    req = CompileRequest(vector_add_ir(salt=unique()), target="sm_80", options=CompileOptions(num_warps=8))

    async def first(service: CompileService) -> list[str]:
        a = await service.compile(req)
        b = await service.compile(req)
        assert a.key == b.key and a.cubin == b.cubin and a.digest == b.digest
        assert a.metadata["name"] == "add_kernel" and a.metadata["num_warps"] == 8
        assert "sm_80" in a.ptx
        return [a.tier, b.tier]

    async def second(service: CompileService) -> str:
        return (await service.compile(req)).tier

    assert with_service(first, redis_url=shared_redis.url) == ["compiled", "memory"]
    assert with_service(second, redis_url=shared_redis.url) == "redis"


def test_single_flight_in_one_daemon() -> None:
    req = CompileRequest(vector_add_ir(salt=unique(), fake_sleep=0.3))

    async def body(service: CompileService) -> None:
        results = await asyncio.gather(*(service.compile(req) for _ in range(16)))
        assert len({r.digest for r in results}) == 1
        assert service.stats()["compiles"] == 1

    with_service(body)


def test_single_flight_survives_its_leader() -> None:
    """The first caller gives up (a gRPC deadline cancels its task): the others still get the kernel,
    from the one compile the leader started, and a later caller finds it cached."""
    req = CompileRequest(vector_add_ir(salt=unique(), fake_sleep=0.5))

    async def body(service: CompileService) -> None:
        leader = asyncio.ensure_future(service.compile(req))
        await asyncio.sleep(0.05)
        followers = [asyncio.ensure_future(service.compile(req)) for _ in range(15)]
        await asyncio.sleep(0.05)
        leader.cancel()
        results = await asyncio.gather(*followers)
        assert leader.cancelled()
        assert {r.tier for r in results} == {"compiled"} and len({r.digest for r in results}) == 1
        assert (await service.compile(req)).tier == "memory"
        assert service.stats()["compiles"] == 1 and service.metrics.value("despina_workers_replaced_total") == 0

    with_service(body)


def test_single_flight_stops_when_every_caller_left() -> None:
    """Nobody waits any more: the compile is stopped (its worker replaced), and the next caller
    starts a fresh one instead of inheriting the cancellation."""
    req = CompileRequest(vector_add_ir(salt=unique(), fake_sleep=0.5))

    async def body(service: CompileService) -> None:
        callers = [asyncio.ensure_future(service.compile(req)) for _ in range(4)]
        await asyncio.sleep(0.1)
        for c in callers:
            c.cancel()
        await asyncio.gather(*callers, return_exceptions=True)
        again = await service.compile(req)
        assert again.tier == "compiled"
        assert service.stats()["compiles"] == 1 and service.metrics.value("despina_workers_replaced_total") == 1

    with_service(body)


def test_one_kernel_from_two_checkouts_is_one_entry_in_every_tier(shared_redis: RedisProcess) -> None:
    salt = unique()
    home = CompileRequest(vector_add_ir(salt=salt, file="/home/ann/despina/k.py"), target="sm_80")
    ci = CompileRequest(vector_add_ir(salt=salt, file="/srv/ci/./checkout/k.py"), target="sm_80")
    assert home.ir != ci.ir

    async def first(service: CompileService) -> list[str]:
        a, b = await service.compile(home), await service.compile(ci)
        assert a.key == b.key and a.cubin == b.cubin
        return [a.tier, b.tier]

    async def second(service: CompileService) -> str:
        return (await service.compile(ci)).tier

    assert with_service(first, redis_url=shared_redis.url) == ["compiled", "memory"]
    assert with_service(second, redis_url=shared_redis.url) == "redis"


def test_bad_input_is_a_clear_error() -> None:
    good = vector_add_ir(salt=unique())
    bad = vector_add(salt=unique())
    bad.functions[0].body.ops[0].name = "no_such_op"

    async def body(service: CompileService) -> None:
        cases: list[tuple[CompileRequest, type[Exception], str]] = [
            (CompileRequest(good[: len(good) // 2]), InvalidArgument, "not a serialized"),
            (CompileRequest(encode(bad)), InvalidArgument, "failed verification"),
            (CompileRequest(b"\0" * (2 << 20)), ResourceExhausted, "at most"),
            (CompileRequest(good, target="x86"), InvalidArgument, "target"),
            (CompileRequest(good, options=CompileOptions(num_warps=3)), InvalidArgument, "num_warps=3 is not one of"),
            (CompileRequest(good, options=CompileOptions(num_ctas=2)), InvalidArgument, "num_ctas=2 is not supported"),
            (CompileRequest(vector_add_ir(salt=unique(), fake_fail=True)), InvalidArgument, "refuses"),
        ]
        for req, error, text in cases:
            with pytest.raises(error, match=text):
                await service.compile(req)
        assert (await service.compile(CompileRequest(good))).tier == "compiled"

    with_service(body, max_ir_bytes=1 << 20)


def test_worker_crash_and_timeout_cost_one_request() -> None:
    async def body(service: CompileService) -> None:
        with pytest.raises(Internal, match="crashed .*SIGKILL"):
            await service.compile(CompileRequest(vector_add_ir(salt=unique(), fake_crash=True)))
        with pytest.raises(DeadlineExceeded, match="longer than"):
            await service.compile(CompileRequest(vector_add_ir(salt=unique(), fake_sleep=5)))
        assert (await service.compile(CompileRequest(vector_add_ir(salt=unique())))).tier == "compiled"
        assert service.metrics.value("despina_workers_replaced_total") == 2

    with_service(body, compile_timeout_s=1.0)


def test_worker_memory_cap_is_resource_exhausted() -> None:
    """A kernel whose compile needs more memory than a worker may use is RESOURCE_EXHAUSTED naming the
    kernel; its worker is replaced and the next kernel compiles."""
    huge = CompileRequest(vector_add_ir(name="huge_kernel", salt=unique(), fake_alloc=str(2 << 30)))

    async def body(service: CompileService) -> None:
        with pytest.raises(ResourceExhausted, match="'huge_kernel'.*--worker-memory"):
            await service.compile(huge)
        assert (await service.compile(CompileRequest(vector_add_ir(salt=unique())))).tier == "compiled"
        assert service.metrics.value("despina_workers_replaced_total") == 1

    with_service(body, worker_memory_bytes=1 << 30)


def test_worker_killed_from_outside() -> None:
    async def body(service: CompileService) -> None:
        task = asyncio.ensure_future(service.compile(CompileRequest(vector_add_ir(salt=unique(), fake_sleep=3))))
        while not service.stats()["in_flight"]:
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)
        os.kill(service.pool.pids()[0], signal.SIGKILL)
        with pytest.raises(Internal, match="SIGKILL"):
            await task
        assert (await service.compile(CompileRequest(vector_add_ir(salt=unique())))).tier == "compiled"

    with_service(body)


def test_artifacts_and_listing() -> None:
    async def body(service: CompileService) -> None:
        r = await service.compile(CompileRequest(vector_add_ir(salt=unique())))
        assert await service.get_artifact(r.key, "cubin") == r.cubin
        assert b"add_kernel" in await service.get_artifact(r.key, "ir")
        with pytest.raises(NotFound):
            await service.get_artifact("0" * 64, "ptx")
        with pytest.raises(InvalidArgument):
            await service.get_artifact(r.key, "elf")
        assert (await service.kernels())[0]["key"] == r.key

    with_service(body)


@pytest.mark.skipif(execute.host_unavailable_reason() is None, reason="this host has an NVIDIA GPU")
def test_execute_without_gpu_is_unimplemented() -> None:
    async def body(service: CompileService) -> None:
        ok = tuple(Buffer(b"\0" * 4096, "fp32", (1024,)) for _ in range(3)) + (1024,)
        with pytest.raises(Unimplemented, match="GPU|cuda-bindings"):
            await service.execute(ExecuteRequest(CompileRequest(vector_add_ir()), grid=(1,), args=ok))
        big = (Buffer(b"\0" * (2 << 20), "fp32", (1 << 19,)),) + ok[1:]
        with pytest.raises(ResourceExhausted):
            await service.execute(ExecuteRequest(CompileRequest(vector_add_ir()), grid=(1,), args=big))

    with_service(body, max_request_bytes=1 << 20)


def test_redis_down_fails_open(tmp_path: Any) -> None:
    dead = RedisProcess(tmp_path)  # never started: nothing listens on its port

    async def body(service: CompileService) -> None:
        for _ in range(3):
            assert (await service.compile(CompileRequest(vector_add_ir(salt=unique())))).tier == "compiled"
        assert not service.stats()["redis_connected"]
        assert service.stats()["redis_errors"] >= 1

    with_service(body, redis_url=dead.url)


def test_corrupt_redis_entry_is_dropped_and_recompiled(shared_redis: RedisProcess) -> None:
    req = CompileRequest(vector_add_ir(salt=unique()))
    key = with_service(lambda s: s.compile(req), redis_url=shared_redis.url).key
    name = redis_name("kernel", key).encode()
    blob = bytearray(shared_redis.client().get(name))
    blob[-10] ^= 0xFF
    shared_redis.client().set(name, bytes(blob))

    async def body(service: CompileService) -> tuple[str, float]:
        tier = (await service.compile(req)).tier
        return tier, service.metrics.value("despina_cache_corrupt_total", tier="redis")

    assert with_service(body, redis_url=shared_redis.url) == ("compiled", 1.0)
    assert shared_redis.client().get(name) != bytes(blob)  # replaced by the recompiled entry
