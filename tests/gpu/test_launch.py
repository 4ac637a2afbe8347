"""`kernel[grid](...)` on the GPU with every kind of array argument."""

from __future__ import annotations

import ctypes
import struct
from typing import Any

import numpy as np
import pytest

import despina
import despina.language as tl
from despina.runtime import DeviceArray, HostArrayError, driver, synchronize

N = 1000  # not a multiple of the block: the masks matter


@despina.jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


class CudaArray:
    """A CuPy-like array: only `__cuda_array_interface__`, a dtype and a shape, over a DeviceArray."""

    def __init__(self, data: DeviceArray) -> None:
        self.data = data
        self.dtype = data.dtype
        self.shape = data.shape

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return self.data.__cuda_array_interface__


class DLPackOnly:
    """Only the DLPack protocol (and a dtype), over a torch tensor."""

    def __init__(self, tensor: Any) -> None:
        self.tensor = tensor
        self.dtype = tensor.dtype
        self.shape = tuple(tensor.shape)

    def __dlpack__(self, stream: Any = None) -> Any:
        return self.tensor.__dlpack__()

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.tensor.__dlpack_device__()


def inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)


@pytest.fixture
def kernel(backend: str) -> despina.JITFunction:
    """`add` without compiled state, so that each backend's run compiles and loads its own."""
    return despina.jit(add.fn)


def launch_add(kernel: despina.JITFunction, x: Any, y: Any, out: Any, **options: Any) -> None:
    for _ in range(3):  # the first call takes the slow path, the others the fast path
        kernel[(despina.cdiv(N, 128),)](x, y, out, N, BLOCK=128, **options)
    assert kernel._dispatcher.slow_calls == 1


def test_torch_tensors(kernel: despina.JITFunction, torch_cuda: Any) -> None:
    a, b = inputs()
    x, y = torch_cuda.from_numpy(a).cuda(), torch_cuda.from_numpy(b).cuda()
    out = torch_cuda.empty_like(x)
    launch_add(kernel, x, y, out)
    torch_cuda.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), a + b)


def test_torch_tensors_on_the_current_torch_stream(kernel: despina.JITFunction, torch_cuda: Any) -> None:
    a, b = inputs()
    x, y = torch_cuda.from_numpy(a).cuda(), torch_cuda.from_numpy(b).cuda()
    out = torch_cuda.zeros_like(x)
    stream = torch_cuda.cuda.Stream()
    torch_cuda.cuda.synchronize()
    with torch_cuda.cuda.stream(stream):
        launch_add(kernel, x, y, out)
    stream.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), a + b)
    frame = next(iter(kernel._dispatcher.launchers.values())).frame()
    launched_on = struct.unpack("=Q", ctypes.string_at(frame.config.value + 32, 8))[0]
    assert launched_on == stream.cuda_stream


def test_device_arrays(kernel: despina.JITFunction) -> None:
    a, b = inputs()
    x, y = DeviceArray.from_numpy(a), DeviceArray.from_numpy(b)
    out = DeviceArray.empty(N, np.float32)
    launch_add(kernel, x, y, out)
    np.testing.assert_array_equal(out.to_numpy(), a + b)


def test_cuda_array_interface_objects(kernel: despina.JITFunction) -> None:
    a, b = inputs()
    x, y = CudaArray(DeviceArray.from_numpy(a)), CudaArray(DeviceArray.from_numpy(b))
    out = DeviceArray.empty(N, np.float32)
    launch_add(kernel, x, y, CudaArray(out))
    np.testing.assert_array_equal(out.to_numpy(), a + b)


def test_dlpack_objects(kernel: despina.JITFunction, torch_cuda: Any) -> None:
    a, b = inputs()
    x, y = torch_cuda.from_numpy(a).cuda(), torch_cuda.from_numpy(b).cuda()
    out = torch_cuda.empty_like(x)
    launch_add(kernel, DLPackOnly(x), DLPackOnly(y), DLPackOnly(out))
    torch_cuda.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), a + b)


def test_stream_option(kernel: despina.JITFunction, gpu_device: driver.Device) -> None:
    a, b = inputs()
    x, y, out = DeviceArray.from_numpy(a), DeviceArray.from_numpy(b), DeviceArray.empty(N, np.float32)
    stream = driver.value("cuStreamCreate", "cuStreamCreate", ctypes.c_void_p, ctypes.c_uint(0))
    assert stream != 0
    launch_add(kernel, x, y, out, stream=stream)
    driver.stream_synchronize(stream)
    np.testing.assert_array_equal(out.to_numpy(), a + b)
    driver.call("cuStreamDestroy", "cuStreamDestroy_v2", ctypes.c_void_p(stream))


def test_host_array_is_refused_before_anything_runs(kernel: despina.JITFunction) -> None:
    a, b = inputs()
    x, y = DeviceArray.from_numpy(a), DeviceArray.from_numpy(b)
    with pytest.raises(HostArrayError, match="argument 'out_ptr' of kernel 'add' is a NumPy array in host memory"):
        kernel[(despina.cdiv(N, 128),)](x, y, np.zeros(N, np.float32), N, BLOCK=128)
    synchronize()


def test_cpu_torch_tensor_is_refused(kernel: despina.JITFunction, torch_cuda: Any) -> None:
    x = torch_cuda.zeros(N, device="cuda")
    with pytest.raises(HostArrayError, match="argument 'y_ptr' of kernel 'add' is a torch tensor on cpu"):
        kernel[(despina.cdiv(N, 128),)](x, torch_cuda.zeros(N), x, N, BLOCK=128)


def test_device_array_is_readable_by_torch(gpu_device: driver.Device, torch_cuda: Any) -> None:
    a, _ = inputs()
    x = DeviceArray.from_numpy(a)
    np.testing.assert_array_equal(torch_cuda.as_tensor(x, device="cuda").cpu().numpy(), a)
