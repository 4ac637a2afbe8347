"""Device addresses of every kind of array argument, host-array errors, and the fast path's keys."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pytest

import despina
import despina.language as tl
from despina.runtime import DeviceArray, HostArrayError
from despina.runtime.pointers import CONST, classify, device_pointer, is_torch, pointer_of

from .conftest import CudaArray


class _FakeTorch:
    """Looks like a torch.Tensor to the runtime (it goes by the class's module)."""

    def __init__(self, pointer: int, cuda: bool = True) -> None:
        self.pointer = pointer
        self.is_cuda = cuda
        self.device = "cuda:0" if cuda else "cpu"
        self.dtype = "torch.float32"
        self.shape = (4,)

    def data_ptr(self) -> int:
        return self.pointer


FakeTorch = type("Tensor", (_FakeTorch,), {"__module__": "torch"})


class _MemoryPointer:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


class _FakeCupy:
    def __init__(self, pointer: int) -> None:
        self.data = _MemoryPointer(pointer)
        self.dtype = np.dtype("float32")
        self.shape = (4,)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        raise AssertionError("the CuPy path reads .data.ptr, not the (slow) interface dict")


FakeCupy = type("ndarray", (_FakeCupy,), {"__module__": "cupy._core.core"})


class DLPackOnly:
    """A producer with only the DLPack protocol; its capsule is NumPy's, its device what we say."""

    def __init__(self, array: np.ndarray, device_type: int) -> None:
        self.array = array
        self.dtype = array.dtype
        self.shape = array.shape
        self.device_type = device_type

    def __dlpack__(self, stream: Any = None) -> Any:
        return self.array.__dlpack__()

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self.device_type, 0)


def fake_device_array(pointer: int) -> DeviceArray:
    array = DeviceArray.__new__(DeviceArray)
    array.shape, array.dtype, array._pointer = (4,), np.dtype("float32"), pointer
    return array


def test_torch_cuda_tensor() -> None:
    assert pointer_of(FakeTorch(0x1000)) == 0x1000
    assert is_torch(FakeTorch(0x1000))


def test_cupy_array_uses_data_ptr() -> None:
    assert pointer_of(FakeCupy(0x2010)) == 0x2010


def test_cuda_array_interface() -> None:
    assert pointer_of(CudaArray(0x3000)) == 0x3000


def test_masked_cuda_array_interface_is_refused() -> None:
    class Masked(CudaArray):
        @property
        def __cuda_array_interface__(self) -> dict[str, Any]:
            return {**super().__cuda_array_interface__, "mask": object()}

    with pytest.raises(TypeError, match="masked"):
        pointer_of(Masked(0x3000))


def test_device_array() -> None:
    assert pointer_of(fake_device_array(0x4000)) == 0x4000


def test_dlpack_capsule_gives_the_data_pointer() -> None:
    host = np.arange(8, dtype=np.float32)
    assert pointer_of(DLPackOnly(host, device_type=2)) == host.ctypes.data
    assert pointer_of(DLPackOnly(host[2:], device_type=2)) == host.ctypes.data + 8


def test_reinterpret_view_takes_its_base_address() -> None:
    view = despina.reinterpret(CudaArray(0x5000, dtype="uint16"), tl.bfloat16)
    assert pointer_of(view) == 0x5000
    key, value = classify(view)
    assert value == 0x5000 and key[1] == tl.bfloat16


@pytest.mark.parametrize("array, what", [
    (np.zeros(4, np.float32), "a NumPy array"),
    (FakeTorch(0x1000, cuda=False), "a torch tensor on cpu"),
    (DLPackOnly(np.zeros(4, np.float32), device_type=1), "a DLPack tensor on a host device"),
])
def test_host_arrays_are_named_errors(array: Any, what: str) -> None:
    with pytest.raises(HostArrayError) as info:
        device_pointer(array, "x_ptr", "add_kernel")
    message = str(info.value)
    assert "argument 'x_ptr' of kernel 'add_kernel'" in message
    assert what in message and "host memory" in message and "DeviceArray.from_numpy" in message


@pytest.mark.parametrize("value, key", [
    (1, ("i32", 1)), (16, ("i32", 16)), (17, ("i32",)), (-16, ("i32", 16)), (2**31 - 1, ("i32",)),
    (2**31, ("i64", 16)), (-(2**31) - 1, ("i64",)), (2**63, ("u64", True)), (True, ("i1",)), (0.5, ("f32",)),
])
def test_scalar_keys_hold_what_specialization_reads(value: Any, key: Any) -> None:
    assert classify(value) == (key, value)


@pytest.mark.parametrize("value, key, launch", [
    (np.int64(16), ("i32", 16), 16), (np.uint64(2**63), ("u64", True), 2**63), (np.float32(0.5), ("f32",), 0.5),
    (np.bool_(True), ("i1",), True), (np.float64(0.25), ("f32",), 0.25),
])
def test_numpy_scalars_are_keyed_as_python_scalars(value: Any, key: Any, launch: Any) -> None:
    got_key, got = classify(value)
    assert got_key == key and got == launch and type(got) in (int, float, bool, np.float64)


def test_too_large_integer_has_no_key() -> None:
    with pytest.raises(OverflowError):
        classify(2**64)


@pytest.mark.parametrize("value", [None, "fp32", (1, 2), tl.float16])
def test_constants_are_no_parameters(value: Any) -> None:
    key, launch_value = classify(value)
    assert launch_value is CONST and key == (type(value), value)


def test_array_key_holds_type_dtype_and_alignment() -> None:
    aligned, p = classify(CudaArray(0x1000))
    misaligned, q = classify(CudaArray(0x1004))
    assert (p, q) == (0x1000, 0x1004)
    assert aligned == (CudaArray, np.dtype("float32"), True) and misaligned[2] is False
    assert classify(FakeTorch(0x1000))[0][0] is FakeTorch


def test_unknown_objects_have_no_fast_path() -> None:
    with pytest.raises(TypeError):
        classify(object())


def test_capsule_layout_matches_dlpack() -> None:
    from despina.runtime.pointers import _DLTensor

    # DLTensor: data, device (2 x int32), ndim, dtype (4 bytes), shape, strides, byte_offset
    assert ctypes.sizeof(_DLTensor) == 48
    assert _DLTensor.byte_offset.offset == 40
