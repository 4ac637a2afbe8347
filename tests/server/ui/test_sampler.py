"""The sampler: snapshots of a real service's counters, in a ring of bounded length."""

from __future__ import annotations

import asyncio

from despina.server.config import ServiceConfig
from despina.server.core import CompileRequest, CompileService
from despina.server.ui.sampler import Sampler
from despina.server.ui.stats import hit_ratios, latency_buckets

from ..conftest import FAKE_COMPILER, unique
from ..kernels import vector_add_ir


def test_snapshots_follow_the_counters_and_the_ring_stays_bounded() -> None:
    async def main() -> None:
        service = CompileService(ServiceConfig(compiler=FAKE_COMPILER, workers=1))
        await service.start()
        try:
            sampler = Sampler(service, interval_s=0.01, keep=3)
            sampler.sample()
            req = CompileRequest(vector_add_ir(salt=unique()))
            for _ in range(3):
                await service.compile(req)
            last = sampler.sample()
            assert last.answers == {"memory": 2, "disk": 0, "redis": 0, "compiled": 1} and last.compiles == 1
            assert hit_ratios(sampler.snapshots())["memory"] == [(last.t, 2 / 3)]
            assert sum(n for _, n in latency_buckets(service.metrics)) == 1
            running = asyncio.ensure_future(sampler.run())
            await asyncio.sleep(0.1)
            running.cancel()
            assert len(sampler.snapshots()) == 3 and sampler.snapshots()[-1].t > last.t
        finally:
            await service.close()

    asyncio.run(main())
