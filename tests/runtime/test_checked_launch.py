"""Kernels that print or assert, on the (fake) GPU: their launch waits for the stream, flushes stdout
and raises a failed device_assert from the launch that failed; other kernels launch as before."""

from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import despina
import despina.language as tl
from despina.compiler.errors import KernelRuntimeError
from despina.runtime import KernelFaultError, OutOfResourcesError, driver, kernels, launcher, libcuda, packing
from despina.runtime.cache import Binary
from despina.runtime.kernels import compile_binary as backend_compile
from despina.runtime.launcher import ASSERT_GLOBAL, ASSERT_RECORD, CheckedLaunch, assert_error

from .conftest import CudaArray, FakeCuda, FakeGPU, put

RECORD = 0xD000


@despina.jit
def copy(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))


@despina.jit(debug=True)
def checked(x_ptr, n, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    tl.device_assert(x >= 0, "x must be non-negative", mask=offs < n)


@dataclass
class FakeDriver:
    """The driver calls a checked launch makes: stream waits, flushes, and the `__despina_assert`
    record of one module (`record`: its six words), read and cleared."""

    record: list[int] = field(default_factory=lambda: [0] * 6)
    syncs: list[int] = field(default_factory=list)
    flushes: int = 0
    lookups: list[tuple[int, str]] = field(default_factory=list)
    clears: int = 0
    fault: Exception | None = None

    def stream_synchronize(self, stream: int) -> None:
        self.syncs.append(stream)
        if self.fault is not None:
            raise self.fault

    def flush(self) -> None:
        self.flushes += 1

    def module_global(self, function: driver.Function, name: str) -> int:
        self.lookups.append((function.handle, name))
        return RECORD

    def read(self, address: int, nbytes: int) -> bytes:
        assert (address, nbytes) == (RECORD, ASSERT_RECORD.size)
        return ASSERT_RECORD.pack(*self.record)

    def clear(self, address: int, nbytes: int) -> None:
        assert (address, nbytes) == (RECORD, ASSERT_RECORD.size)
        self.record = [0] * 6
        self.clears += 1


@pytest.fixture
def fake(gpu: FakeGPU, monkeypatch: pytest.MonkeyPatch) -> FakeDriver:
    fake = FakeDriver()
    for name, fn in (("stream_synchronize", fake.stream_synchronize), ("module_global", fake.module_global),
                     ("read", fake.read), ("clear", fake.clear)):
        monkeypatch.setattr(driver, name, fn)
    monkeypatch.setattr(launcher, "flush_stdout", fake.flush)
    return fake


def with_metadata(gpu: FakeGPU, monkeypatch: pytest.MonkeyPatch, **extra: Any) -> None:
    """The fake backend's binaries carry `extra` in their metadata."""
    def compile_module(module: Any, options: dict[str, Any], target: str) -> Binary:
        binary = gpu.kernel_binary(module, options, target)
        return Binary(binary.name, binary.cubin, {**binary.metadata, **extra}, binary.asm)

    monkeypatch.setattr(kernels, "compile_binary", compile_module)


def test_other_kernels_launch_through_libcuda_itself(gpu: FakeGPU, fake: FakeDriver,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    with_metadata(gpu, monkeypatch, prints=False, asserts=[])
    k = despina.jit(copy.fn)
    k[(1,)](CudaArray(0x1000), CudaArray(0x2000), N=128)
    k[(1,)](CudaArray(0x1000), CudaArray(0x2000), N=128)
    (entry,) = k._dispatcher.entries.values()
    assert entry.launch_ex == gpu.lib.launch_ex and not isinstance(entry.launch_ex, CheckedLaunch)
    assert len(gpu.lib.calls) == 2 and fake.syncs == [] and fake.flushes == 0


def test_a_printing_kernel_waits_for_its_stream_and_flushes(gpu: FakeGPU, fake: FakeDriver,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    with_metadata(gpu, monkeypatch, prints=True, asserts=[])
    k = despina.jit(copy.fn)
    for stream in (0x55, 0x55, 0):
        k[(2,)](CudaArray(0x1000), CudaArray(0x2000), N=128, stream=stream)
    assert k._dispatcher.slow_calls == 1  # the fast path, with the wait inside its launch_ex
    assert [c.stream for c in gpu.lib.calls] == fake.syncs == [0x55, 0x55, 0]
    assert fake.flushes == 3 and fake.lookups == []


def test_a_fault_found_by_the_wait_is_raised_after_flushing(gpu: FakeGPU, fake: FakeDriver,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    with_metadata(gpu, monkeypatch, prints=True, asserts=[])
    fake.fault = KernelFaultError("CUDA fault in kernel 'copy'", 700)
    with pytest.raises(KernelFaultError, match="copy"):
        despina.jit(copy.fn)[(1,)](CudaArray(0x1000), CudaArray(0x2000), N=128)
    assert fake.flushes == 1 and driver.LastLaunch.kernel == "copy"


def test_a_refused_launch_does_not_wait(gpu: FakeGPU, fake: FakeDriver, monkeypatch: pytest.MonkeyPatch) -> None:
    with_metadata(gpu, monkeypatch, prints=True, asserts=[])
    gpu.lib.code = 701
    with pytest.raises(OutOfResourcesError):
        despina.jit(copy.fn)[(1,)](CudaArray(0x1000), CudaArray(0x2000), N=128)
    assert fake.syncs == [] and fake.flushes == 0


def test_a_failed_assert_raises_from_its_launch_and_the_next_launch_runs(gpu: FakeGPU, fake: FakeDriver,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """With the real backend's metadata: the message is the interpreter's, word for word."""
    pytest.importorskip("llvmlite")
    pytest.importorskip("cuda.bindings.nvjitlink")
    monkeypatch.setattr(kernels, "compile_binary", backend_compile)
    k, x = despina.jit(checked.fn, debug=True), CudaArray(0x1000, (16,), "int32")
    k[(1,)](x, 10, N=16)
    assert fake.syncs == [0] and fake.clears == 0 and fake.flushes == 0
    assert fake.lookups == [(0xF001, ASSERT_GLOBAL)]
    fake.record = [1, 0, 0, 0, 0, 10]  # assertion 0 failed in program (0, 0, 0) at element 10
    with pytest.raises(KernelRuntimeError) as info:
        k[(1,)](x, 11, N=16)
    assert fake.clears == 1 and fake.record == [0] * 6
    k[(1,)](x, 11, N=16)  # the record is clear: the next launch reports nothing
    assert k._dispatcher.slow_calls == 1 and len(fake.lookups) == 1  # the fast path, the record found once

    host = np.arange(16, dtype=np.int32)
    host[10] = -1
    monkeypatch.setenv("DESPINA_INTERPRET", "1")
    with pytest.raises(KernelRuntimeError) as interpreted:
        despina.jit(checked.fn, debug=True)[(1,)](host, 11, N=16)
    assert str(info.value) == str(interpreted.value)
    assert "x must be non-negative" in str(info.value) and "test_checked_launch.py:" in str(info.value)


@pytest.mark.parametrize("shape, element, pid, where", [
    ([4, 8], 13, (2, 1, 0), "(program (2, 1, 0), element (1, 5))"),
    ([], 0, (0, 0, 3), "(program (0, 0, 3))"),
])
def test_assert_error_wording(shape: list[int], element: int, pid: tuple[int, int, int], where: str) -> None:
    entry = {"message": "bad", "file": "k.py", "line": 7, "shape": shape}
    error = assert_error("kern", entry, pid, element)
    assert str(error) == f"kernel 'kern' at k.py:7: device_assert failed: bad {where}"


def test_the_stream_is_read_from_the_launch_config() -> None:
    layout = packing.ArgLayout([])
    frame = layout.frame()
    layout.pack(frame, (1, 1, 1), 128, 0, 0xABCDEF12345, [])
    assert packing.config_stream(frame.config) == 0xABCDEF12345


def test_flush_stdout_writes_out_the_c_library_buffer(capfd: pytest.CaptureFixture[str]) -> None:
    libc = ctypes.CDLL(None)
    libc.printf(b"from the C library, as the driver prints\n")
    launcher.flush_stdout()
    assert "from the C library, as the driver prints" in capfd.readouterr().out


def test_driver_calls_of_the_assert_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """The libcuda calls behind module_global, read and clear, with their arguments."""
    memory = struct.pack("=6I", 1, 2, 3, 4, 5, 6)

    def global_(out: Any, size: Any, module: Any, name: bytes) -> None:
        put(out, 0xD000)
        put(size, 24)

    cuda = FakeCuda({"cuFuncGetModule": lambda out, fn: put(out, 0xA0), "cuModuleGetGlobal_v2": global_,
                     "cuMemcpyDtoH_v2": lambda dst, src, nbytes: ctypes.memmove(dst, memory, nbytes.value)})
    monkeypatch.setattr(libcuda, "_LIB", cuda)
    function = driver.Function(0xF1, "k", 0, 4, None)  # type: ignore[arg-type]
    assert driver.module_global(function, ASSERT_GLOBAL) == 0xD000
    assert driver.read(0xD000, 24) == memory
    driver.clear(0xD000, 24)
    driver.stream_synchronize(0x77)
    assert cuda.calls == [
        ("cuFuncGetModule", "out", 0xF1), ("cuModuleGetGlobal_v2", "out", "out", 0xA0, b"__despina_assert"),
        ("cuMemcpyDtoH_v2", "buffer", 0xD000, 24), ("cuMemsetD8_v2", 0xD000, 0, 24), ("cuCtxSynchronize",),
        ("cuStreamSynchronize", 0x77)]
    cuda.codes["cuStreamSynchronize"] = 700
    driver.LastLaunch.kernel = "k"
    with pytest.raises(KernelFaultError, match="CUDA fault in kernel 'k'.*reported by cuStreamSynchronize"):
        driver.stream_synchronize(0)


def test_the_record_layout_is_the_backends() -> None:
    pytest.importorskip("llvmlite")
    from despina.compiler.backends.nvptx.lower import debug

    assert debug.ASSERT_GLOBAL == ASSERT_GLOBAL and len(debug.ASSERT_FIELDS) * 4 == ASSERT_RECORD.size
