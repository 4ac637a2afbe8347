"""The daemon's core with the real NVPTX backend (llvmlite + nvJitLink; no GPU needed)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from despina.compiler.options import CompileOptions
from despina.server import images
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
            r = await service.compile(CompileRequest(vector_add_ir(256), target="sm_90", options=CompileOptions(num_warps=4)))
            assert r.tier == "compiled" and r.cubin.startswith(b"\x7fELF")
            assert ".entry add_kernel" in r.ptx and r.metadata["name"] == "add_kernel"
            assert {"ir", "gpuir", "llir", "ptx", "cubin"} <= set(service.memory.get(r.key).stages)
            with pytest.raises(InvalidArgument, match="unsupported target"):
                await service.compile(CompileRequest(vector_add_ir(256), target="sm_70"))
        finally:
            await service.close()

    asyncio.run(main())


def test_old_driver_gets_ptx_its_driver_can_jit(tmp_path: Path) -> None:
    """The backend's PTX, lowered for a driver older than this nvJitLink, passes nvJitLink's check at
    the lowered version; the disk tier keeps the kernel for the next daemon."""
    toolchain = images.nvjitlink_release()
    if toolchain is None:
        pytest.skip("needs nvJitLink")
    old = 12060 if toolchain >= (12, 8) else 12000  # older than the toolchain, new enough for sm_90

    async def main(expect: str) -> None:
        service = CompileService(ServiceConfig(workers=1, disk_dir=str(tmp_path)))
        await service.start()
        try:
            req = CompileRequest(vector_add_ir(128), target="sm_90", driver_version=old)
            r = await service.compile(req)
            isa = images.driver_isa(old)
            assert isa is not None
            assert r.tier == expect and r.image_format == "ptx" and r.cubin == b""
            assert f".version {images.show(isa)}" in r.ptx and images.check_with_nvjitlink(r.ptx) is None
            current = toolchain[0] * 1000 + toolchain[1] * 10
            cubin = await service.compile(CompileRequest(vector_add_ir(128), target="sm_90", driver_version=current))
            assert cubin.image_format == "cubin" and cubin.cubin.startswith(b"\x7fELF") and cubin.key == r.key
        finally:
            await service.close()

    asyncio.run(main("compiled"))
    asyncio.run(main("disk"))
