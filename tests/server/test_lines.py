"""A cached kernel's line maps through the service (`get_lines`, GetArtifact stage "lines"): every
stage's map from the compile, the SASS's made with the SASS once and kept in every tier, none from a
backend that writes none, NotFound for an unknown key."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from despina.compiler.backends.nvptx import toolkit
from despina.compiler.ir.codec import encode
from despina.server.core import CompileRequest, CompileService
from despina.server.errors import InvalidArgument, NotFound

from .conftest import RedisProcess, with_service
from .kernels import vector_add_ir
from .test_stages import NVPTX, needs_backend

has_nvdisasm = toolkit.find_nvdisasm() is not None


def scale_ir(folder: Path) -> bytes:
    from frontend.scale_kernel import load_kernel, traced

    return encode(traced(load_kernel(folder)))


def lines_of_text(text: str, needle: str) -> set[str]:
    return {str(i) for i, line in enumerate(text.splitlines(), 1) if needle in line}


def test_the_maps_of_a_compiled_kernel(tmp_path: Path, shared_redis: RedisProcess) -> None:
    needs_backend()
    from frontend.scale_kernel import LOAD_LINE

    async def body(service: CompileService) -> None:
        r = await service.compile(CompileRequest(scale_ir(tmp_path / "k"), target="sm_90"))
        first, again = await asyncio.gather(service.get_lines(r.key), service.get_lines(r.key))
        assert first == again
        assert set(first["stages"]) == {"ir", "gpuir", "llir", "ptx"} | ({"sass"} if has_nvdisasm else set())
        ptx = (await service.get_artifact(r.key, "ptx")).decode()
        loads = lines_of_text(ptx, "ld.global")
        assert loads and {first["stages"]["ptx"][n] for n in loads} == {LOAD_LINE}
        assert json.loads(await service.get_artifact(r.key, "lines")) == first
        source = first["source"]
        assert source["file"] == str(tmp_path / "k" / "scale.py")
        assert "tl.load(" in source["text"][LOAD_LINE - source["first_line"]]
        other = await service.compile(CompileRequest(scale_ir(tmp_path / "another" / "checkout"), target="sm_90"))
        assert (other.key, other.tier, other.cubin) == (r.key, "memory", r.cubin)  # one kernel, one entry
        if has_nvdisasm:
            sass = (await service.get_artifact(r.key, "sass")).decode()
            ldg = lines_of_text(sass, "LDG.E")
            assert ldg and {first["stages"]["sass"][n] for n in ldg} == {LOAD_LINE}
            assert service.redis is not None
            kept = await service.redis.get(r.key)
            assert kept is not None and json.loads(kept.stages["lines"]) == first  # with the SASS, in every tier

    with_service(body, compiler=NVPTX, redis_url=shared_redis.url)


def test_a_backend_without_line_maps_gives_empty_ones_and_an_unknown_key_is_not_found() -> None:
    async def body(service: CompileService) -> None:
        r = await service.compile(CompileRequest(vector_add_ir(salt="lines")))
        assert await service.get_lines(r.key) == {"source": None, "stages": {}}
        with pytest.raises(NotFound, match="no kernel with key"):
            await service.get_lines("0" * 64)
        with pytest.raises(InvalidArgument, match="not a cache key"):
            await service.get_lines("nope")

    with_service(body)
