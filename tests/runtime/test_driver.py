"""The driver layer on a CPU-only host: targets, error mapping, clean failures without CUDA."""

from __future__ import annotations

import ctypes
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
    driver,
    env,
    errors,
    libcuda,
)
from despina.runtime.launcher import Launcher, grid_dims, stream_handle

from .conftest import FakeDevice, FakeGPU


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
