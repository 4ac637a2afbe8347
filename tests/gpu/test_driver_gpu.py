"""The driver layer on a GPU: device properties, loading with dynamic shared memory, the device's
limits, DeviceArray, and a faulting kernel's error (in a subprocess: the fault kills the context)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from despina.compiler.ir import types as t
from despina.runtime import DeviceArray, LaunchError, SharedMemoryError, driver, synchronize
from despina.runtime.launcher import Launcher

from .ptx import cubin

TESTS = Path(__file__).resolve().parents[1]
F32P = t.PointerType(t.float32)


def test_device_properties(gpu_device: driver.Device) -> None:
    assert gpu_device.target == driver.target_for(gpu_device.capability)
    assert gpu_device.max_shared_optin >= gpu_device.max_shared_per_block >= 48 * 1024
    assert gpu_device.max_threads_per_block >= 1024 and gpu_device.multiprocessors > 0
    assert driver.context_device(driver.current_context()) is gpu_device


def test_dynamic_shared_memory_above_48k(gpu_device: driver.Device) -> None:
    n = 16384  # 64 KiB of floats: needs the function attribute
    function = gpu_device.load(cubin("smem_reverse", gpu_device.target), "smem_reverse", 4 * n, 8)
    assert driver.function_attribute(function, driver.FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES) == 4 * n
    a = np.arange(n, dtype=np.float32)
    x, out = DeviceArray.from_numpy(a), DeviceArray.empty(n, np.float32)
    Launcher(function, ["x", "out", "n"], [F32P, F32P, t.int32]).launch((1, 1, 1), {"x": x.data_ptr(),
                                                                                   "out": out.data_ptr(), "n": n})
    np.testing.assert_array_equal(out.to_numpy(), a[::-1])


def test_too_much_shared_memory_for_the_device(gpu_device: driver.Device) -> None:
    with pytest.raises(SharedMemoryError, match=f"at most {gpu_device.max_shared_optin}"):
        gpu_device.load(cubin("smem_reverse", gpu_device.target), "smem_reverse", gpu_device.max_shared_optin + 16, 4)


def test_too_many_threads_for_the_device(gpu_device: driver.Device) -> None:
    with pytest.raises(LaunchError, match="num_warps=64 makes 2048 threads"):
        gpu_device.load(cubin("bump", gpu_device.target), "bump", 0, 64)


def test_device_array_round_trip(gpu_device: driver.Device) -> None:
    a = np.arange(12, dtype=np.int16).reshape(3, 4)
    x = DeviceArray.from_numpy(a)
    assert (x.shape, x.dtype, x.size, len(x)) == ((3, 4), np.dtype(np.int16), 12, 3)
    interface = x.__cuda_array_interface__
    assert interface["data"] == (x.data_ptr(), False) and interface["typestr"] == "<i2" and interface["version"] == 3
    np.testing.assert_array_equal(x.to_numpy(), a)
    empty = DeviceArray.empty((0,), np.float32)
    assert empty.to_numpy().shape == (0,)
    synchronize()


_FAULT = """
import sys
sys.path.insert(0, {tests!r})
from despina.compiler.ir import types as t
from despina.runtime import KernelFaultError, driver, synchronize
from despina.runtime.launcher import Launcher
from gpu.ptx import cubin

device = driver.device(0)
device.make_current()
function = device.load(cubin("fault_kernel", device.target), "fault_kernel", 0, 1)
Launcher(function, ["x"], [t.PointerType(t.int32)]).launch((1, 1, 1), {{"x": 16}})
try:
    synchronize()
except KernelFaultError as exc:
    print("FAULT:", exc)
    sys.exit(0)
print("no fault was reported")
sys.exit(1)
"""


def test_a_faulting_kernel_is_a_clear_error(gpu_device: driver.Device) -> None:
    script = textwrap.dedent(_FAULT.format(tests=str(TESTS)))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "DESPINA_INTERPRET": "0"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "CUDA fault in kernel 'fault_kernel': an illegal memory access" in result.stdout
    assert "restart the process" in result.stdout
