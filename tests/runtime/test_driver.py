"""The driver layer on a CPU-only host: targets, error mapping, clean failures without CUDA."""

from __future__ import annotations

import ctypes
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import despina
import despina.language as tl
from despina.compiler.ir import types as t
from despina.runtime import (
    CudaError,
    CudaUnavailableError,
    DeviceArray,
    KernelFaultError,
    LaunchError,
    SharedMemoryError,
    driver,
    env,
    errors,
    libcuda,
)
from despina.runtime.launcher import Launcher, grid_dims, stream_handle

from .conftest import ATTRIBUTES, CONTEXT, FakeDevice, FakeGPU, device_cuda, put

TESTS = Path(__file__).resolve().parents[1]


def has_driver() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


no_driver = pytest.mark.skipif(has_driver(), reason="this host has a CUDA driver")


@pytest.mark.parametrize("capability, target", [((8, 0), "sm_80"), ((8, 6), "sm_86"), ((8, 9), "sm_89"),
                                                ((9, 0), "sm_90a"), ((10, 0), "sm_100")])
def test_target_of_a_compute_capability(capability: tuple[int, int], target: str) -> None:
    assert driver.target_for(capability) == target


@pytest.mark.parametrize("code, cls, text", [
    (700, KernelFaultError, "CUDA fault in kernel 'k': an illegal memory access"),
    (710, KernelFaultError, "device-side assertion"),
    (716, KernelFaultError, "misaligned"),
    (2, CudaError, "out of GPU memory"),
    (100, CudaUnavailableError, "no CUDA device"),
    (999, CudaError, "cuFoo failed: CUDA_ERROR_UNKNOWN"),
])
def test_driver_errors_are_explained(code: int, cls: type, text: str) -> None:
    error = errors.driver_error(code, "cuFoo", kernel="k")
    assert error.code == code and text in str(error) and type(error) is cls
    if code in errors.FAULTS:
        assert "restart the process" in str(error) and "DESPINA_INTERPRET=1" in str(error)


def test_fault_without_a_known_kernel() -> None:
    assert "a kernel launched earlier" in str(errors.driver_error(700, "cuCtxSynchronize"))


def test_check_passes_success() -> None:
    errors.check(0, "cuFoo")
    with pytest.raises(CudaError, match="cuFoo"):
        errors.check(1, "cuFoo")


@no_driver
def test_no_driver_is_a_clean_error() -> None:
    with pytest.raises(CudaUnavailableError, match="DESPINA_INTERPRET=1") as info:
        driver.init()
    # cuda-bindings' loader message ends in a period of its own: one period before "Set" (GPU tests'
    # skip reasons quote this message).
    text = str(info.value)
    assert text.startswith("no CUDA driver: ") and ".. " not in text, text
    assert text.endswith(". Set DESPINA_INTERPRET=1 to run kernels in the interpreter"), text
    with pytest.raises(CudaUnavailableError, match="libcuda.so.1"):
        libcuda.get()
    with pytest.raises(CudaUnavailableError):
        DeviceArray.empty(16, np.float32)


@no_driver
def test_gpu_launch_without_a_driver_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DESPINA_INTERPRET", raising=False)

    @despina.jit
    def k(x_ptr):
        tl.store(x_ptr, 1.0)

    with pytest.raises(CudaUnavailableError, match="DESPINA_INTERPRET=1"):
        k[(1,)](np.zeros(1, np.float32))


def test_environment_reads_follow_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DESPINA_TEST_KNOB", raising=False)
    assert env.get("DESPINA_TEST_KNOB") is None and not env.flag("DESPINA_TEST_KNOB")
    monkeypatch.setenv("DESPINA_TEST_KNOB", "Yes")
    assert env.get("DESPINA_TEST_KNOB") == "Yes" and env.flag("DESPINA_TEST_KNOB")
    assert env.raw(env.key("DESPINA_TEST_KNOB")) is not None
    monkeypatch.setenv("DESPINA_TEST_KNOB", "0")
    assert not env.flag("DESPINA_TEST_KNOB")


@pytest.mark.parametrize("grid, dims", [(5, (5, 1, 1)), ((5,), (5, 1, 1)), ((2, 3), (2, 3, 1)), ([2, 3, 4], (2, 3, 4)),
                                        ((np.int64(7),), (7, 1, 1)), ((tl.constexpr(3), 2), (3, 2, 1))])
def test_grid_dims(grid: Any, dims: tuple[int, int, int]) -> None:
    assert grid_dims(grid) == dims


@pytest.mark.parametrize("grid", [(), (1, 2, 3, 4), (-1,)])
def test_bad_grids(grid: Any) -> None:
    with pytest.raises(ValueError):
        grid_dims(grid)


def test_stream_handles() -> None:
    class HasPtr:
        ptr = 0x20

    assert stream_handle(None) == 0 and stream_handle(0x10) == 0x10 and stream_handle(HasPtr()) == 0x20
    with pytest.raises(TypeError, match="stream="):
        stream_handle("default")


def test_launcher_general_path(gpu: FakeGPU) -> None:
    function = driver.Function(0xF1, "k", 1024, 2, FakeDevice())
    launcher = Launcher(function, ["x", "n", "scale"], [t.PointerType(t.float32), t.int32, t.bfloat16], gpu.lib)
    gpu.lib.nparams = 3
    launcher.launch((3, 2, 1), {"scale": 1.5, "x": 0x1000, "n": 7}, stream=0x44)
    call = gpu.lib.calls[-1]
    assert (call.handle, call.grid, call.block, call.shared, call.stream) == (0xF1, (3, 2, 1), (64, 1, 1), 1024, 0x44)
    assert call.words[0] == np.uint64(0x1000).tobytes()
    assert call.words[1][:4] == np.int32(7).tobytes() and call.words[2][:2] == np.uint16(0x3FC0).tobytes()
    assert driver.LastLaunch.kernel == "k"


@pytest.fixture
def cuda(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A fake libcuda with one device behind driver.py, and the driver's process state reset."""
    fake = device_cuda()
    monkeypatch.setattr(libcuda, "_LIB", fake)
    monkeypatch.setattr(driver, "_INITIALIZED", False)
    monkeypatch.setattr(driver, "_DEVICES", {})
    monkeypatch.setattr(driver, "_BY_CONTEXT", {})
    monkeypatch.setattr(driver.LastLaunch, "kernel", "")
    return fake


def test_devices_and_contexts_through_libcuda(cuda: Any) -> None:
    context = driver.current_context()  # none was current: device 0's primary context is made current
    dev = driver.context_device(context)
    assert context == CONTEXT == cuda.context and driver.device(0) is dev
    assert (dev.name, dev.capability, dev.target, dev.max_shared_optin, dev.max_grid) == (
        "Fake H100", (9, 0), "sm_90a", 232448, (2**31 - 1, 65535, 65535))
    assert cuda.calls[:5] == [("cuInit", 0), ("cuDeviceGetCount", "out"), ("cuDeviceGet", "out", 0),
                              ("cuDevicePrimaryCtxRetain", "out", 0), ("cuDeviceGetName", "buffer", 256, 0)]
    assert cuda.calls[5] == ("cuDeviceGetAttribute", "out", 75, 0) and cuda.calls[-1] == ("cuCtxSetCurrent", CONTEXT)
    assert len([c for c in cuda.calls if c[0] == "cuDeviceGetAttribute"]) == len(ATTRIBUTES)
    before = len(cuda.calls)
    assert driver.current_context() == CONTEXT and driver.context_device(CONTEXT) is dev
    assert cuda.calls[before:] == []  # cuInit once, the device and its context's device kept


def test_loading_checks_the_device_limits(cuda: Any) -> None:
    dev = driver.device(0)
    start = len(cuda.calls)
    fn = dev.load(b"\x7fELF cubin", "k", 65536, 4)
    assert (fn.handle, fn.name, fn.shared, fn.num_warps, fn.device) == (0x20, "k", 65536, 4, dev)
    assert cuda.calls[start:] == [
        ("cuModuleLoadData", "out", "buffer"), ("cuModuleGetFunction", "out", 0x10, b"k"),
        ("cuFuncGetAttribute", "out", driver.FUNC_SHARED_SIZE_BYTES, 0x20),
        ("cuFuncSetAttribute", 0x20, driver.FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536)]
    assert dev.registers(fn) == 40
    start = len(cuda.calls)
    assert dev.load(b"\x7fELF cubin", "k", 1024, 4).handle == 0x20
    assert [c[0] for c in cuda.calls[start:]] == ["cuModuleGetFunction", "cuFuncGetAttribute"]  # loaded once;
    # 1024 + 1024 bytes of shared memory need no attribute
    with pytest.raises(SharedMemoryError, match="needs 232449 bytes of shared memory"):
        dev.load(b"\x7fELF cubin", "k", 232448 - 1023, 4)
    with pytest.raises(LaunchError, match="num_warps=64 makes 2048 threads"):
        dev.load(b"\x7fELF cubin", "k", 0, 64)


def test_failed_driver_calls_name_the_call_and_the_last_kernel(cuda: Any) -> None:
    cuda.codes["cuInit"] = 100
    with pytest.raises(CudaUnavailableError, match="cuInit: no CUDA device is visible"):
        driver.init()
    del cuda.codes["cuInit"]
    dev = driver.device(0)
    cuda.codes["cuModuleGetFunction"] = 500
    with pytest.raises(CudaError, match=r"cuModuleGetFunction\('k'\) failed"):
        dev.load(b"\x7fELF cubin", "k", 0, 4)
    driver.LastLaunch.kernel = "add_kernel"
    cuda.codes["cuCtxSynchronize"] = 700
    with pytest.raises(KernelFaultError, match="kernel 'add_kernel'.*reported by cuCtxSynchronize"):
        driver.synchronize()
    cuda.codes["cuMemAlloc_v2"] = 2
    with pytest.raises(CudaError, match=r"cuMemAlloc\(4096\): out of GPU memory"):
        driver.alloc(dev, 4096)
    assert cuda.calls[-1] == ("cuCtxPopCurrent_v2", "out")  # the context pushed for it is popped


def test_memory_calls_pass_64_bit_addresses(cuda: Any) -> None:
    dev = driver.device(0)
    host = ctypes.create_string_buffer(8)
    big = 0x7F12_3456_7000
    driver.copy_to_device(dev, big, ctypes.addressof(host), 8)
    driver.copy_on_device(dev, big + 8, big, 8)
    driver.free(dev, big)
    assert [c for c in cuda.calls if c[0].startswith("cuMem")] == [
        ("cuMemcpyHtoD_v2", big, ctypes.addressof(host), 8), ("cuMemcpyDtoD_v2", big + 8, big, 8),
        ("cuMemFree_v2", big)]
    assert cuda.calls[-2:] == [("cuMemFree_v2", big), ("cuCtxPopCurrent_v2", "out")]


def test_fill_buffers_are_written_once_per_context_in_one_allocation(cuda: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver, "_FILLS", {})
    monkeypatch.setattr(driver, "_FILL_ARENAS", {})
    arenas = iter([0x7F00_0000_0200, 0x7F00_0000_0400, 0x7F00_0000_0600])
    written: dict[int, bytes] = {}
    cuda.handlers["cuMemAlloc_v2"] = lambda out, nbytes: put(out, next(arenas))
    cuda.handlers["cuMemcpyHtoD_v2"] = lambda dst, src, n: written.__setitem__(dst.value, ctypes.string_at(src, n.value))
    driver.current_context()
    start = len(cuda.calls)
    nan16, nan64 = bytes.fromhex("007e"), bytes.fromhex("000000000000f87f")
    assert driver.fill_buffer(b"\0\0") == 0x7F00_0000_0200
    assert cuda.calls[start:] == [("cuMemAlloc_v2", "out", driver.FILL_ARENA), ("cuMemcpyHtoD_v2", 0x7F00_0000_0200,
                                  b"", 16), ("cuCtxSynchronize",)]  # written, and done before any launch reads it
    assert driver.fill_buffer(nan16) == 0x7F00_0000_0210 and driver.fill_buffer(nan64) == 0x7F00_0000_0220
    before = len(cuda.calls)
    assert [driver.fill_buffer(b) for b in (b"\0" * 4, nan16, b"\0" * 8)] == [0x7F00_0000_0200, 0x7F00_0000_0210,
                                                                            0x7F00_0000_0200]
    assert cuda.calls[before:] == []  # zeros of any size share one buffer; none is written twice
    assert written == {0x7F00_0000_0200: bytes(16), 0x7F00_0000_0210: nan16.ljust(16, b"\0"),
                       0x7F00_0000_0220: nan64.ljust(16, b"\0")}
    assert len([c for c in cuda.calls if c[0] == "cuMemAlloc_v2"]) == 1
    for i in range(3, 16):
        driver.fill_buffer(bytes([i]))
    assert driver.fill_buffer(b"\x10") == 0x7F00_0000_0400  # 16 fills fill an allocation: another is made
    cuda.context = 0x6000  # another context: its own
    assert driver.fill_buffer(nan16) == 0x7F00_0000_0600
    with pytest.raises(ValueError, match="at most 16 bytes"):
        driver.fill_buffer(bytes(17))


def test_attribute_numbers_are_cuda_hs() -> None:
    cu = pytest.importorskip("cuda.bindings.driver")
    for name, number in driver.DEVICE_ATTRIBUTES.items():
        assert int(getattr(cu.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}")) == number, name
    f = cu.CUfunction_attribute
    assert (int(f.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES), int(f.CU_FUNC_ATTRIBUTE_NUM_REGS),
            int(f.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)) == (
        driver.FUNC_SHARED_SIZE_BYTES, driver.FUNC_NUM_REGS, driver.FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES)


_LAUNCH_ONLY = """
import sys
sys.path.insert(0, {tests!r})
from runtime.conftest import device_cuda
import despina, despina.runtime.dispatch
from despina.runtime import driver, libcuda
libcuda._LIB = device_cuda()
dev = driver.context_device(driver.current_context())
fn = dev.load(b"\\x7fELF cubin", "k", 65536, 4)
dev.registers(fn)
driver.synchronize()
print(sorted(m for m in sys.modules if m.startswith("cuda")))
"""


def test_the_driver_calls_of_a_launch_import_no_cuda_bindings() -> None:
    out = subprocess.run([sys.executable, "-c", _LAUNCH_ONLY.format(tests=str(TESTS))], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
