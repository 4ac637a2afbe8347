"""PTX for clients whose CUDA driver is older than the daemon's toolchain: the choice (images.py),
the service, both transports, and the client, which keeps the PTX in its disk cache as its image.

The fake backend reports nvJitLink 12.8 and declares `.version 8.7`, as the NVPTX backend does."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

import despina
from despina import remote
from despina.compiler.options import CompileOptions
from despina.proto import service_pb2 as pb
from despina.runtime import cache, driver, kernels
from despina.server import images
from despina.server.core import CompileRequest, CompileService
from despina.server.errors import FailedPrecondition, InvalidArgument

from .conftest import Daemon, unique, with_service
from .kernels import vector_add, vector_add_ir
from .test_grpc import status_of, stub

PTX = ".version 8.7\n.target {target}\n.address_size 64\n\n.visible .entry k()\n{{\n{body}\n\tret;\n}}\n"
OPTIONS = CompileOptions()
has_nvjitlink = images.nvjitlink_release() is not None


def ptx(target: str = "sm_90", body: str = "") -> str:
    return PTX.format(target=target, body=body)


# ---- the choice ---------------------------------------------------------------------------------


def test_driver_to_isa_table() -> None:
    """The brief's table, and the PTX ISA release history (as cuda-bindings records it, when installed)."""
    for release, isa in {"12.0": "8.0", "12.1": "8.1", "12.2": "8.2", "12.3": "8.3", "12.4": "8.4", "12.5": "8.5",
                         "12.6": "8.5", "12.7": "8.6", "12.8": "8.7", "12.9": "8.8", "13.0": "9.0", "11.8": "7.8"}.items():
        major, minor = map(int, release.split("."))
        got = images.driver_isa(major * 1000 + minor * 10)
        assert got is not None and images.show(got) == isa, release
    assert images.driver_isa(10020) is None and images.driver_isa(99000) == images.DRIVER_ISA[0][1]
    try:
        from cuda.bindings.utils import get_minimal_required_cuda_ver_from_ptx_ver as first_cuda
    except ImportError:
        return
    for first, isa in images.DRIVER_ISA:
        assert first_cuda(images.show(isa)) == first


def test_cubin_when_the_driver_is_new_enough_or_unknown() -> None:
    for driver_version in (0, 12080, 12090, 13000):
        assert images.choose(ptx(), driver_version, (12, 8)).format == "cubin"
    assert images.choose(ptx(), 12060, None).format == "cubin"  # no toolchain version: nothing to compare


def test_ptx_lowered_to_what_the_driver_knows() -> None:
    for driver_version, version in ((12060, "8.5"), (12000, "8.0"), (12070, "8.6"), (11080, "7.8")):
        image = images.choose(ptx(), driver_version, (12, 8))
        assert (image.format, image.lowered) == ("ptx", True)
        assert image.ptx == ptx().replace(".version 8.7", f".version {version}")
    same = images.choose(ptx().replace("8.7", "8.4"), 12060, (12, 8))
    assert same.format == "ptx" and not same.lowered and ".version 8.4" in same.ptx
    assert images.choose(ptx(), 12080, (13, 5)).version == (8, 7)  # a 13.x toolchain, a 12.8 driver


def test_too_old_is_a_clear_error() -> None:
    cases = [
        (ptx("sm_90a"), 11080, ["11.8", "7.8", "ISA 8.0", ".target sm_90a", "nvJitLink 12.8", "CUDA 12.0"]),
        (ptx("sm_90"), 11000, ["11.0", "7.0", "ISA 7.8", ".target sm_90", "CUDA 11.8"]),
        (ptx("sm_90", "\tst.async.b32 [%rd1], %r1, [%rd2];"), 12000, ["12.0", "8.0", "ISA 8.1", "st.async"]),
        (ptx("sm_90a"), 10020, ["10.2", "no PTX ISA"]),
        ("", 12000, ["no PTX"]),
    ]
    for text, driver_version, words in cases:
        with pytest.raises(FailedPrecondition) as info:
            images.choose(text, driver_version, (12, 8))
        for word in words:
            assert word in info.value.message, (word, info.value.message)
    assert images.choose(ptx("sm_90a", "\twgmma.fence.sync.aligned;"), 12000, (12, 8)).version == (8, 0)


# ---- the service --------------------------------------------------------------------------------


def test_service_answers_cubin_or_ptx_from_one_entry() -> None:
    ir = vector_add_ir(salt=unique())

    async def body(service: CompileService) -> None:
        cubin = await service.compile(CompileRequest(ir, driver_version=12080))
        old = await service.compile(CompileRequest(ir, driver_version=12060))
        none = await service.compile(CompileRequest(ir))
        newer = await service.compile(CompileRequest(ir, driver_version=13000))
        assert [r.tier for r in (cubin, old, none, newer)] == ["compiled", "memory", "memory", "memory"]
        assert {r.key for r in (cubin, old, none, newer)} == {cubin.key}  # one cached kernel
        assert [r.image_format for r in (cubin, old, none, newer)] == ["cubin", "ptx", "cubin", "cubin"]
        assert cubin.cubin and cubin.digest == hashlib.sha256(cubin.cubin).hexdigest()
        assert old.cubin == b"" and old.digest == hashlib.sha256(old.ptx.encode()).hexdigest()
        assert ".version 8.5" in old.ptx and ".version 8.7" in cubin.ptx
        assert old.metadata["image_format"] == "ptx" and old.metadata["ptx_version"] == "8.5"
        assert "image_format" not in cubin.metadata
        with pytest.raises(FailedPrecondition, match="11.0"):
            await service.compile(CompileRequest(ir, driver_version=11000))
        with pytest.raises(InvalidArgument, match="driver_version"):
            await service.compile(CompileRequest(ir, driver_version=10**7))
        m = service.metrics
        assert (m.value("despina_images_total", format="ptx"), m.value("despina_images_total", format="cubin")) == (1, 3)
        assert m.value("despina_errors_total", code="FAILED_PRECONDITION") == 1

    with_service(body)


def test_toolchain_from_the_entry() -> None:
    """The cubin's own nvJitLink (the backend's metadata) decides, not a fixed number."""
    ir = vector_add_ir(salt=unique(), fake_nvjitlink="13.0")

    async def body(service: CompileService) -> list[str]:
        return [(await service.compile(CompileRequest(ir, driver_version=v))).image_format for v in (12090, 13000)]

    assert with_service(body) == ["ptx", "cubin"]


def test_a_cubin_assembled_by_ptxas_is_as_new_as_that_ptxas() -> None:
    """A kernel using setmaxnreg is assembled by ptxas (a whole program), whose release decides, not nvJitLink's."""
    ir = vector_add_ir(salt=unique(), fake_nvjitlink="12.8", fake_ptxas="13.0.88")

    async def body(service: CompileService) -> list[str]:
        return [(await service.compile(CompileRequest(ir, driver_version=v))).image_format for v in (12090, 13000)]

    assert with_service(body) == ["ptx", "cubin"]


@pytest.mark.skipif(not has_nvjitlink, reason="needs nvJitLink (cuda-bindings) to check lowered PTX")
def test_lowered_ptx_checked_with_nvjitlink() -> None:
    """An instruction the static table does not know (fence.proxy.tensormap: ISA 8.3) is caught by
    linking the lowered PTX; a driver that knows it gets the PTX."""
    ir = vector_add_ir(salt=unique(), fake_ptx="\tfence.proxy.tensormap::generic.release.gpu;")

    async def body(service: CompileService) -> None:
        with pytest.raises(FailedPrecondition, match=r"12\.0 .*PTX ISA 8\.0.*8\.3"):
            await service.compile(CompileRequest(ir, driver_version=12000))
        r = await service.compile(CompileRequest(ir, driver_version=12040))
        assert r.image_format == "ptx" and ".version 8.4" in r.ptx

    with_service(body)


# ---- over the wire, and the client --------------------------------------------------------------


def test_grpc_and_http_wire(daemon: Daemon) -> None:
    ir = vector_add_ir(salt=unique())
    s = stub(daemon)
    r = s.Compile(pb.CompileRequest(ir=ir, target="sm_90", driver_version=12060), timeout=30)
    assert (r.tier, r.image_format, r.cubin) == (pb.COMPILED, pb.PTX, b"")
    assert ".version 8.5" in r.ptx and r.digest == hashlib.sha256(r.ptx.encode()).hexdigest()
    assert json.loads(r.metadata_json)["ptx_version"] == "8.5"
    r = s.Compile(pb.CompileRequest(ir=ir, target="sm_90", driver_version=12080), timeout=30)
    assert (r.tier, r.image_format) == (pb.MEMORY, pb.CUBIN) and r.cubin
    code, details = status_of(lambda: s.Compile(pb.CompileRequest(ir=ir, target="sm_90a", driver_version=11080)))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "11.8" in details and "8.0" in details

    body: dict[str, Any] = {"ir": base64.b64encode(ir).decode(), "target": "sm_90", "driver_version": 12000}
    reply = httpx.post(daemon.http + "/v1/compile", json=body, timeout=30).json()
    assert (reply["image_format"], reply["cubin"], reply["tier"]) == ("ptx", "", "memory")
    assert ".version 8.0" in reply["ptx"]
    reply = httpx.post(daemon.http + "/v1/compile", json=dict(body, driver_version=0), timeout=30).json()
    assert reply["image_format"] == "cubin" and reply["cubin"]
    r2 = httpx.post(daemon.http + "/v1/compile", json=dict(body, driver_version=10020), timeout=30)
    assert r2.status_code == 400 and r2.json()["error"]["code"] == "FAILED_PRECONDITION"
    assert httpx.post(daemon.http + "/v1/compile", json=dict(body, driver_version=-1), timeout=30).status_code == 422


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for name in ("DESPINA_SERVER", "DESPINA_TOKEN", "DESPINA_SERVER_REQUIRED", "DESPINA_SERVER_CA"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DESPINA_CACHE_DIR", str(tmp_path / "client-cache"))
    monkeypatch.setattr(kernels, "_MEMORY", {})
    yield
    despina.set_server(None)


@pytest.mark.parametrize("scheme", ["grpc", "http"])
def test_compile_remote_by_driver(daemon: Daemon, scheme: str, client: None) -> None:
    despina.set_server(daemon.grpc if scheme == "grpc" else daemon.http)
    module = vector_add(salt=unique())
    old = remote.compile_remote(module, CompileOptions(), target="sm_90", driver_version=12060)
    assert old.image_format == "ptx" and old.cubin == b"" and old.image == old.ptx.encode()
    assert ".version 8.5" in old.ptx and old.metadata["service"]["tier"] == "compiled"
    new = remote.compile_remote(module, CompileOptions(), target="sm_90", driver_version=13000)
    assert new.image_format == "cubin" and new.image == new.cubin != b""
    assert new.metadata["service"]["tier"] == "memory"  # the same cached kernel
    with pytest.raises(remote.RemoteError) as info:
        remote.compile_remote(module, CompileOptions(), target="sm_90a", driver_version=11080)
    assert info.value.code == "FAILED_PRECONDITION" and "11.8" in info.value.message


@pytest.mark.parametrize("scheme", ["grpc", "http"])
def test_runtime_keeps_the_ptx_image(daemon: Daemon, scheme: str, client: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """kernel[grid]'s compile path with a fake old driver: the daemon's PTX is the Binary's image, on
    disk under a key that names the driver, and found there again; a current driver gets a cubin."""
    despina.set_server(daemon.grpc if scheme == "grpc" else daemon.http)
    module = vector_add(salt=unique())
    monkeypatch.setattr(driver, "_VERSION", 12060)
    got = kernels.binary(module, OPTIONS, "sm_90")
    assert driver.is_ptx(got.cubin) and b".version 8.5" in got.cubin and got.metadata["image_format"] == "ptx"
    key = cache.cache_key(module, OPTIONS, "sm_90", driver_version=12060)
    assert cache.default_cache().get(key) == got
    monkeypatch.setattr(kernels, "_MEMORY", {})
    before = kernels.STATS["disk"]
    assert kernels.binary(module, OPTIONS, "sm_90") == got and kernels.STATS["disk"] == before + 1

    monkeypatch.setattr(driver, "_VERSION", 12080)
    current = kernels.binary(module, OPTIONS, "sm_90")
    assert not driver.is_ptx(current.cubin) and current.metadata["image_format"] == "cubin"
    assert cache.default_cache().get(cache.cache_key(module, OPTIONS, "sm_90", driver_version=12080)) == current


def test_compile_ahead_of_time_on_the_daemon(daemon: Daemon, client: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """despina.compile asks the daemon for a cubin for the target, whatever this host's driver; the stages
    it did not send come from the daemon on first access."""
    import despina.language as tl

    @despina.jit
    def scale(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

    monkeypatch.setattr(driver, "_VERSION", 12000)
    despina.set_server(daemon.grpc)
    k = despina.compile(scale, "*fp32:16,i32", {"BLOCK": 256}, target="sm_90")
    assert k.metadata["service"]["tier"] in ("compiled", "memory") and k.metadata["image_format"] == "cubin"
    assert k.cubin and "scale" in k.inspect_ptx() and "scale" in k.inspect_ir()
    assert k.tier == "daemon" and k.inspect_llvm() == "; fake LLVM IR for scale\n" and "llir" in k.asm
    with pytest.raises(RuntimeError, match=f"kernel 'scale': no 'sass' stage from the daemon at {daemon.grpc}: "
                                           "(FAILED_PRECONDITION|INTERNAL): .*nvdisasm"):
        k.inspect_sass()  # the fake backend's cubin is no ELF for nvdisasm, when the daemon has one
