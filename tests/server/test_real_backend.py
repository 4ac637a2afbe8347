"""The daemon's core with the real NVPTX backend (llvmlite + nvJitLink; no GPU needed)."""

from __future__ import annotations

import asyncio

import pytest

from despina.server.config import ServiceConfig
from despina.server.core import CompileRequest, CompileService
from despina.server.errors import InvalidArgument

from .kernels import vector_add_ir

pytest.importorskip("llvmlite")


def test_vector_add_compiles_to_a_cubin() -> None:
    async def main() -> None:
        service = CompileService(ServiceConfig(workers=1))
        await service.start()
        try:
            r = await service.compile(CompileRequest(vector_add_ir(256), target="sm_90", num_warps=4))
            assert r.tier == "compiled" and r.cubin.startswith(b"\x7fELF")
            assert ".entry add_kernel" in r.ptx and r.metadata["name"] == "add_kernel"
            assert {"ir", "gpuir", "llir", "ptx", "cubin"} <= set(service.memory.get(r.key).stages)
            with pytest.raises(InvalidArgument, match="unsupported target"):
                await service.compile(CompileRequest(vector_add_ir(256), target="sm_70"))
        finally:
            await service.close()

    asyncio.run(main())
