"""The compile pool: workers killed while idle are replaced before a compile reaches them."""

from __future__ import annotations

import asyncio
import os
import signal

from despina.server.core import CompileRequest, CompileService
from despina.server.config import ServiceConfig

from .conftest import FAKE_COMPILER, unique
from .kernels import vector_add_ir


def test_workers_killed_while_idle_are_replaced_and_the_next_compiles_succeed() -> None:
    async def main() -> None:
        service = CompileService(ServiceConfig(compiler=FAKE_COMPILER, workers=2))
        await service.start()
        try:
            dead = service.pool.pids()
            for pid in dead:
                os.kill(pid, signal.SIGKILL)
            await asyncio.sleep(0.3)
            for _ in range(3):
                assert (await service.compile(CompileRequest(vector_add_ir(salt=unique())))).tier == "compiled"
            assert not set(dead) & set(service.pool.pids()) and len(service.pool.pids()) == 2
            assert service.metrics.value("despina_workers_replaced_total") == 2
        finally:
            await service.close()

    asyncio.run(main())
