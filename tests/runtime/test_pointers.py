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
    (1, ("i32", 1)), (16, ("i32", 16, "+")), (17, ("i32",)), (-16, ("i32", 16)), (0, ("i32", 16)), (2**31 - 1, ("i32",)),
    (2**31, ("i64", 16, "+")), (-(2**31) - 16, ("i64", 16)), (-(2**31) - 1, ("i64",)), (2**63, ("u64", True)), (True, ("i1",)), (0.5, ("f32", "+")),
    (float("inf"), ("f32", "+")), (-0.5, ("f32",)), (0.0, ("f32",)), (-0.0, ("f32",)), (float("-inf"), ("f32",)),
    (float("nan"), ("f32",)),
])
def test_scalar_keys_hold_what_specialization_reads(value: Any, key: Any) -> None:
    assert classify(value) == (key, value)


@pytest.mark.parametrize("value, key, launch", [
    (np.int64(16), ("i32", 16, "+"), 16), (np.uint64(2**63), ("u64", True), 2**63), (np.float32(0.5), ("f32", "+"), 0.5),
    (np.bool_(True), ("i1",), True), (np.float64(0.25), ("f32", "+"), 0.25), (np.float32(-2), ("f32",), -2.0),
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


# ---- host TensorDescriptors -------------------------------------------------------------------------


class OtherCudaArray(CudaArray):
    """Another array class of the same dtype: its own key, as for an array argument."""


def descriptor(base: Any = None, shape: tuple[int, ...] = (64, 32), strides: tuple[int, ...] = (32, 1),
               block: tuple[int, ...] = (16, 16), padding: str = "zero") -> Any:
    from despina.tools.tensor_descriptor import TensorDescriptor

    return TensorDescriptor(CudaArray(0x1000) if base is None else base, list(shape), list(strides), list(block), padding)


def test_descriptor_value_is_its_base_address_shape_and_strides_but_the_last() -> None:
    key, value = classify(descriptor(CudaArray(0x2000), shape=(64, 48), strides=(48, 1)))
    assert value == (0x2000, 64, 48, 48)
    key3, value3 = classify(descriptor(CudaArray(0x2000), shape=(2, 8, 32), strides=(512, 64, 1), block=(1, 8, 16)))
    assert value3 == (0x2000, 2, 8, 32, 512, 64) and key3 != key
    key1, value1 = classify(descriptor(CudaArray(0x2000), shape=(100,), strides=(1,), block=(16,)))
    assert value1 == (0x2000, 100) and key1 not in (key, key3)
    assert key[3] == classify(CudaArray(0x2000))[0]  # the base keyed as an array argument is


def test_descriptors_of_the_same_kind_have_one_key() -> None:
    # other addresses (aligned), other sizes with the same int facts, another last stride (never read)
    first = classify(descriptor(CudaArray(0x1000), shape=(64, 32), strides=(32, 1)))[0]
    assert classify(descriptor(CudaArray(0x7F0000), shape=(80, 48), strides=(48, 1)))[0] == first
    last_stride = descriptor(CudaArray(0x1000), shape=(64, 32), strides=(32, 1))
    last_stride.strides[-1] = 3  # the slow path does not read it either
    assert classify(last_stride)[0] == first
    hash(first)


@pytest.mark.parametrize("change", [
    {"block": (32, 16)}, {"block": (16, 32)}, {"padding": "nan"},
    {"base": CudaArray(0x1000, dtype="float16")}, {"base": OtherCudaArray(0x1000)}, {"base": FakeTorch(0x1000)},
    {"shape": (1, 32)}, {"shape": (17, 32)}, {"shape": (64, 33)}, {"shape": (2**31, 32)}, {"shape": (2**31 + 1, 32)},
    {"shape": (2**63, 32)}, {"strides": (1, 1)}, {"strides": (40, 1)}, {"strides": (2**32, 1)},
    {"shape": (64, 32, 8), "strides": (256, 8, 1), "block": (1, 16, 16)},
])
def test_what_specialization_reads_of_a_descriptor_changes_its_key(change: dict[str, Any]) -> None:
    d = descriptor()
    for field, value in change.items():  # set after checking: what the slow path specializes is read
        setattr(d, {"block": "block_shape"}.get(field, field), list(value) if isinstance(value, tuple) else value)
    assert classify(d)[0] != classify(descriptor())[0]


def test_a_misaligned_base_changes_the_key() -> None:
    d = descriptor()
    d.base = CudaArray(0x1008)  # a descriptor checks its base when made; one set later is keyed too
    assert classify(d)[0] != classify(descriptor())[0] and classify(d)[1][0] == 0x1008


@pytest.mark.parametrize("base, error", [
    (np.zeros((64, 32), np.float32), HostArrayError), (FakeTorch(0x1000, cuda=False), HostArrayError),
])
def test_a_descriptor_of_host_memory_has_no_key(base: Any, error: type) -> None:
    with pytest.raises(error):
        classify(descriptor(base))


@pytest.mark.parametrize("field, value", [
    ("shape", [2**64, 32]), ("shape", [64.0, 32]), ("shape", [np.int64(64), 32]), ("shape", [True, 32]),
    ("strides", [2**64, 1]), ("shape", [64]), ("strides", [1]), ("shape", [1, 2, 3]), ("block_shape", [16] * 4),
    ("base", None), ("base", 0x1000),
])
def test_a_descriptor_the_fast_path_does_not_take_raises(field: str, value: Any) -> None:
    d = descriptor()
    setattr(d, field, value)
    with pytest.raises((TypeError, OverflowError, ValueError)):  # the launch then takes the slow path
        classify(d)


def test_a_torch_base_is_keyed_as_a_torch_tensor_argument() -> None:
    first = classify(descriptor(FakeTorch(0x1000)))  # the first torch base met through `_torch_array`, then inline
    second = classify(descriptor(FakeTorch(0x2000)))
    assert first[0] == second[0] and first[0][3] == classify(FakeTorch(0x1000))[0] and second[1][0] == 0x2000
    misaligned = descriptor(FakeTorch(0x1000))
    misaligned.base = FakeTorch(0x1004)
    assert classify(misaligned)[0][3] == classify(FakeTorch(0x1004))[0] != first[0][3]
    with pytest.raises(HostArrayError, match="a torch tensor on cpu"):
        classify(descriptor(FakeTorch(0x1000, cuda=False)))
