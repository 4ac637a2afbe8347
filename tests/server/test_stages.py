"""Every stage through the daemon: SASS disassembled on the first request for it (once, however many
ask), kept in every tier, served over both transports; a clear FAILED_PRECONDITION on a daemon
without nvdisasm."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest

from despina import remote
from despina.compiler.backends.nvptx import toolkit
from despina.compiler.options import CompileOptions
from despina.proto import service_pb2 as pb
from despina.server import disassembly
from despina.server.cache import STAGES
from despina.server.core import CompileRequest, CompileService
from despina.server.errors import FailedPrecondition

from .conftest import Daemon, RedisProcess, unique, with_service
from .kernels import vector_add_ir
from .test_grpc import status_of, stub

NVPTX = "despina.compiler.backends.nvptx:compile_module"
has_nvdisasm = toolkit.find_nvdisasm() is not None


def needs_backend() -> None:
    pytest.importorskip("llvmlite")
    pytest.importorskip("cuda.bindings.nvjitlink")


@pytest.fixture(scope="module")
def nvptx_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """A daemon with the real NVPTX backend (and whatever nvdisasm this host has)."""
    needs_backend()
    d = Daemon(tmp_path_factory.mktemp("nvptx-daemon"), compiler=None)
    yield d
    d.stop()


@pytest.fixture(scope="module")
def blind_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """A daemon (fake backend) that finds no nvdisasm: DESPINA_NVDISASM="" does without."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DESPINA_NVDISASM", "")
        d = Daemon(tmp_path_factory.mktemp("blind-daemon"))
    yield d
    d.stop()


@pytest.mark.skipif(not has_nvdisasm, reason="nvdisasm is not installed (pip install nvidia-cuda-nvdisasm)")
def test_sass_is_disassembled_once_and_kept_in_every_tier(tmp_path: Path, shared_redis: RedisProcess,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    needs_backend()
    runs: list[int] = []
    real = disassembly.sass.disassemble_lines

    def counted(cubin: bytes, timeout_s: float = 120.0) -> tuple[str, list[tuple[int, str, int]]]:
        runs.append(len(cubin))
        return real(cubin, timeout_s)

    monkeypatch.setattr(disassembly.sass, "disassemble_lines", counted)

    async def body(service: CompileService) -> None:
        r = await service.compile(CompileRequest(vector_add_ir(256, salt=unique()), target="sm_90"))
        assert "sass" not in service.memory.get(r.key).stages  # a compile does not pay for nvdisasm
        first, second = await asyncio.gather(service.get_artifact(r.key, "sass"), service.get_artifact(r.key, "sass"))
        assert first == second and b"add_kernel" in first and b"LDG.E" in first and len(runs) == 1
        assert await service.get_artifact(r.key, "sass") == first and len(runs) == 1
        assert service.memory.get(r.key).stages["sass"] == first
        assert service.disk is not None and service.disk.get(r.key).stages["sass"] == first
        assert service.redis is not None and (await service.redis.get(r.key)).stages["sass"] == first

    with_service(body, compiler=NVPTX, disk_dir=str(tmp_path), redis_url=shared_redis.url)


def test_a_daemon_without_nvdisasm_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(disassembly.toolkit, "find_nvdisasm", lambda: None)

    async def body(service: CompileService) -> None:
        r = await service.compile(CompileRequest(vector_add_ir(salt=unique())))
        with pytest.raises(FailedPrecondition, match=r"no nvdisasm .*pip install nvidia-cuda-nvdisasm"):
            await service.get_artifact(r.key, "sass")
        for stage in set(STAGES) - {"sass"}:
            assert await service.get_artifact(r.key, stage)

    with_service(body)


@pytest.mark.skipif(not has_nvdisasm, reason="nvdisasm is not installed (pip install nvidia-cuda-nvdisasm)")
def test_both_transports_serve_the_sass(nvptx_daemon: Daemon) -> None:
    got = remote._client(nvptx_daemon.grpc).compile(vector_add_ir(256, salt=unique()), CompileOptions(), "sm_90", {}, 0)
    key = got.metadata["service"]["key"]
    over_http = httpx.get(f"{nvptx_daemon.http}/v1/kernels/{key}/sass", timeout=60)
    assert over_http.status_code == 200 and over_http.headers["content-type"].startswith("text/plain")
    assert ".text.add_kernel" in over_http.text
    over_grpc = stub(nvptx_daemon).GetArtifact(pb.GetArtifactRequest(key=key, stage="sass"), timeout=60)
    assert over_grpc.data == over_http.content
    info = httpx.get(f"{nvptx_daemon.http}/v1/kernels/{key}", timeout=10).json()
    assert info["sizes"]["sass"] == len(over_http.content)


def test_both_transports_serve_the_line_maps(nvptx_daemon: Daemon, tmp_path: Path) -> None:
    from .test_lines import scale_ir

    got = remote._client(nvptx_daemon.grpc).compile(scale_ir(tmp_path), CompileOptions(), "sm_90", {}, 0)
    key = got.metadata["service"]["key"]
    over_http = httpx.get(f"{nvptx_daemon.http}/v1/kernels/{key}/lines", timeout=60)
    assert over_http.status_code == 200 and over_http.headers["content-type"] == "application/json"
    table = over_http.json()
    assert {"ir", "gpuir", "llir", "ptx"} <= set(table["stages"]) and table["stages"]["ptx"]
    over_grpc = stub(nvptx_daemon).GetArtifact(pb.GetArtifactRequest(key=key, stage="lines"), timeout=60)
    assert json.loads(over_grpc.data) == table
    missing = httpx.get(f"{nvptx_daemon.http}/v1/kernels/{'0' * 64}/lines", timeout=10)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_FOUND"
    code, _ = status_of(lambda: stub(nvptx_daemon).GetArtifact(pb.GetArtifactRequest(key="0" * 64, stage="lines")))
    assert code == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize("scheme", ["grpc", "http"])
def test_the_client_fetches_each_stage(nvptx_daemon: Daemon, scheme: str) -> None:
    url = nvptx_daemon.grpc if scheme == "grpc" else nvptx_daemon.http
    got = remote._client(url).compile(vector_add_ir(128, salt=unique()), CompileOptions(), "sm_90", {}, 0)
    key = got.metadata["service"]["key"]
    assert remote.artifact(url, key, "cubin") == got.cubin
    assert remote.artifact(url, key, "ptx").decode() == got.ptx
    assert b"define ptx_kernel void @add_kernel" in remote.artifact(url, key, "llir")
    assert b"blocked<" in remote.artifact(url, key, "gpuir")
    with pytest.raises(remote.RemoteError) as info:
        remote.artifact(url, "0" * 64, "llir")
    assert info.value.code == "NOT_FOUND" and "no kernel with key" in info.value.message


def test_no_nvdisasm_over_both_transports(blind_daemon: Daemon) -> None:
    got = remote._client(blind_daemon.grpc).compile(vector_add_ir(salt=unique()), CompileOptions(), "sm_90", {}, 0)
    key = got.metadata["service"]["key"]
    reply = httpx.get(f"{blind_daemon.http}/v1/kernels/{key}/sass", timeout=10)
    error = reply.json()["error"]
    assert reply.status_code == 400 and error["code"] == "FAILED_PRECONDITION" and "no nvdisasm" in error["message"]
    code, details = status_of(lambda: stub(blind_daemon).GetArtifact(pb.GetArtifactRequest(key=key, stage="sass"),
                                                                     timeout=10))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "pip install nvidia-cuda-nvdisasm" in details
