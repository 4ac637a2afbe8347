"""The Redis tier and the single-flight lease, in-process against a real redis-server."""

from __future__ import annotations

import asyncio
import time

from despina.server.cache.entry import Entry, pack
from despina.server.cache.redis_tier import name
from despina.server.config import ServiceConfig
from despina.server.core import CompileRequest, CompileService

from .conftest import FAKE_COMPILER, RedisProcess, unique
from .kernels import vector_add_ir


def service(url: str, **config: object) -> CompileService:
    return CompileService(ServiceConfig(compiler=FAKE_COMPILER, workers=1, redis_url=url, **config))


def test_entries_have_a_ttl_and_one_blob(shared_redis: RedisProcess) -> None:
    async def main() -> str:
        s = service(shared_redis.url, redis_ttl_s=3600)
        await s.start()
        try:
            return (await s.compile(CompileRequest(vector_add_ir(salt=unique())))).key
        finally:
            await s.close()

    key = asyncio.run(main())
    r = shared_redis.client()
    assert r.type(name("kernel", key)) == b"string"
    assert 3500_000 < r.pttl(name("kernel", key)) <= 3600_000
    assert r.get(name("lease", key)) is None


def test_two_services_one_compilation(shared_redis: RedisProcess) -> None:
    req = CompileRequest(vector_add_ir(salt=unique(), fake_sleep=0.5))

    async def main() -> tuple[list[str], int]:
        a, b = service(shared_redis.url), service(shared_redis.url)
        await asyncio.gather(a.start(), b.start())
        try:
            results = await asyncio.gather(*(s.compile(req) for s in (a, b) * 8))
            return sorted({r.tier for r in results}), a.stats()["compiles"] + b.stats()["compiles"]
        finally:
            await asyncio.gather(a.close(), b.close())

    tiers, compiles = asyncio.run(main())
    assert compiles == 1
    assert tiers == ["compiled", "redis"]


def test_an_entry_stored_after_the_miss_is_not_compiled_again(shared_redis: RedisProcess) -> None:
    """B misses in Redis, then A compiles the kernel, stores it and lets its lease go while B checks the
    IR (under load, a while): B's lease must not be granted over the stored entry, which B then serves,
    instead of compiling the kernel a second time (benchmarks/cluster.py found 57 of 64 shared kernels
    compiled twice or more on 8 daemons)."""
    req = CompileRequest(vector_add_ir(salt=unique()))

    async def main() -> tuple[str, int]:
        a, b = service(shared_redis.url), service(shared_redis.url)
        await asyncio.gather(a.start(), b.start())
        check = b.intake.verify

        async def slow_check(ir: bytes) -> None:
            assert (await a.compile(req)).tier == "compiled"
            await check(ir)

        b.intake.verify = slow_check  # type: ignore[method-assign]
        try:
            return (await b.compile(req)).tier, a.stats()["compiles"] + b.stats()["compiles"]
        finally:
            await asyncio.gather(a.close(), b.close())

    assert asyncio.run(main()) == ("redis", 1)


def test_an_abandoned_lease_expires(shared_redis: RedisProcess) -> None:
    req = CompileRequest(vector_add_ir(salt=unique()))

    async def main() -> tuple[str, float]:
        s = service(shared_redis.url)
        await s.start()
        try:
            key = s.key_of(req)
            # A daemon that took the lease and died: nobody renews it.
            shared_redis.client().set(name("lease", key), "dead-daemon", px=600)
            start = time.monotonic()
            tier = (await s.compile(req)).tier
            return tier, time.monotonic() - start
        finally:
            await s.close()

    tier, waited = asyncio.run(main())
    assert tier == "compiled" and 0.4 < waited < 5


def test_misfiled_entry_is_rejected(shared_redis: RedisProcess) -> None:
    req = CompileRequest(vector_add_ir(salt=unique()))

    async def main() -> str:
        s = service(shared_redis.url)
        await s.start()
        try:
            key = s.key_of(req)
            # An intact entry for another key, written under this one (a torn or hostile write).
            other = Entry("f" * 64, {"cubin": b"\x7fELF", "ptx": b"//"}, {"name": "other"})
            shared_redis.client().set(name("kernel", key), pack(other))
            return (await s.compile(req)).tier
        finally:
            await s.close()

    assert asyncio.run(main()) == "compiled"
