"""The device address of an array argument, whatever library made it, and the launch fast path's
classification of every argument.

Arrays: torch CUDA tensors (`data_ptr()`), CuPy arrays (`.data.ptr`), anything with
`__cuda_array_interface__` or `__dlpack__`, `despina.DeviceArray`, and `despina.reinterpret`
views of those. Host memory (a NumPy array, a CPU torch tensor, a CPU DLPack tensor) raises
HostArrayError: a GPU kernel cannot read it.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from despina import arguments
from despina.compiler.ir.types import ScalarType
from despina.language.descriptors import MAX_RANK
from despina.tools.tensor_descriptor import TensorDescriptor

from .errors import HostArrayError

# DLPack device types whose memory a kernel can address (CUDA, pinned host, managed).
_DLPACK_DEVICE = {2, 3, 13}
# A prototype of our own: setting argtypes on ctypes.pythonapi's shared function object would
# change it for every other user in the process.
_CAPSULE = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_GetPointer", ctypes.pythonapi))


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("dtype", ctypes.c_uint32), ("shape", ctypes.c_void_p),
                ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64)]


def _torch(a: Any) -> int:
    if not a.is_cuda:
        raise HostArrayError(f"a torch tensor on {a.device}")
    return int(a.data_ptr())


def _cupy(a: Any) -> int:
    return int(a.data.ptr)


def _cuda_array_interface(a: Any) -> int:
    interface = a.__cuda_array_interface__
    if interface.get("mask") is not None:
        raise TypeError("masked __cuda_array_interface__ arrays are not supported")
    return int(interface["data"][0])


def _dlpack(a: Any) -> int:
    device_type, _ = a.__dlpack_device__() if hasattr(a, "__dlpack_device__") else (2, 0)
    if device_type not in _DLPACK_DEVICE:
        raise HostArrayError(f"a DLPack tensor on a host device (DLPack device type {device_type})")
    capsule = a.__dlpack__()
    # A DLManagedTensor starts with its DLTensor. The capsule keeps `a`'s memory alive until it is
    # collected; `a` itself keeps it alive for the launch, as for every other argument.
    tensor = _DLTensor.from_address(_CAPSULE(capsule, b"dltensor"))
    return int(tensor.data or 0) + int(tensor.byte_offset)


def _numpy(a: Any) -> int:
    raise HostArrayError("a NumPy array")


def _data_ptr(a: Any) -> int:
    return int(a.data_ptr())


def _wrapped(a: Any) -> int:
    return pointer_of(a.base)


def getter_for(cls: type) -> Callable[[Any], int]:
    """How to read the device address of an instance of `cls` (an array type)."""
    found = _GETTERS.get(cls)
    if found is None:
        module = cls.__module__.split(".", 1)[0]
        if module == "torch":
            found = _torch
        elif issubclass(cls, np.ndarray):
            found = _numpy
        elif cls.__name__ == "TensorWrapper" and module == "despina":
            found = _wrapped
        elif module == "cupy" and cls.__name__ == "ndarray":
            found = _cupy
        elif hasattr(cls, "data_ptr"):
            found = _data_ptr
        elif hasattr(cls, "__cuda_array_interface__"):
            found = _cuda_array_interface
        elif hasattr(cls, "__dlpack__"):
            found = _dlpack
        else:
            raise TypeError(f"cannot take the device address of a {cls.__name__}")
        _GETTERS[cls] = found
    return found


_GETTERS: dict[type, Callable[[Any], int]] = {}


def pointer_of(a: Any) -> int:
    """The device address of array `a`; HostArrayError (saying what `a` is) for host memory."""
    return getter_for(a.__class__)(a)


def device_pointer(value: Any, name: str, kernel: str) -> int:
    """The device address of argument `name` of `kernel`, or an error naming both."""
    try:
        return pointer_of(value)
    except HostArrayError as exc:
        raise HostArrayError(
            f"argument '{name}' of kernel '{kernel}' is {exc} in host memory, which a GPU kernel cannot read: "
            "pass a torch CUDA tensor, a CuPy array or despina.DeviceArray.from_numpy(x), "
            "or set DESPINA_INTERPRET=1 to run the kernel in the interpreter") from None


def is_torch(value: Any) -> bool:
    """Whether `value` is a torch tensor or a `reinterpret` view of one (its launch uses torch's stream)."""
    base = getattr(value, "base", None) if type(value).__name__ == "TensorWrapper" else value
    return type(base).__module__.split(".", 1)[0] == "torch"


# ---- the fast path's classification --------------------------------------------------------------
# `classify(value) -> (key, launch value)`: the key holds everything the specialization reads from
# the value (its type, the pointer's 16-byte alignment, an integer's width and whether it is 1 or
# a multiple of 16, whether a float is greater than 0), so equal keys mean equal specializations;
# the launch value is what its parameter slot gets. A multiple of 16 is keyed apart when it is positive (a
# stride TMA can step by: gpuir/pointer_tiles.py), but for a descriptor's sizes and strides. CONST marks a value that is no kernel parameter
# (None, a string, a dtype).
# A host TensorDescriptor's launch value is a tuple (no other launch value is one): the values of
# its parameters `DescriptorArg.names`, which the dispatcher flattens for the launcher.

CONST = object()
_I32, _I32_16, _I64, _I64_16 = ("i32",), ("i32", 16), ("i64",), ("i64", 16)
_I32_16P, _I64_16P = ("i32", 16, "+"), ("i64", 16, "+")
_ONE, _BOOL, _F32, _F32_POSITIVE = ("i32", 1), ("i1",), ("f32",), ("f32", "+")


def _int(a: int) -> tuple[Any, Any]:
    if -0x80000000 <= a <= 0x7FFFFFFF:
        return (_ONE if a == 1 else _I32 if a & 15 else _I32_16P if a > 0 else _I32_16), a
    if -0x8000000000000000 <= a <= 0x7FFFFFFFFFFFFFFF:
        return (_I64 if a & 15 else _I64_16P if a > 0 else _I64_16), a
    if 0 <= a < 1 << 64:
        return ("u64", not a & 15), a
    raise OverflowError(a)


def _bool(a: bool) -> tuple[Any, Any]:
    return _BOOL, a


def _float(a: float) -> tuple[Any, Any]:
    return (_F32_POSITIVE if a > 0 else _F32), a


def _np_int(a: Any) -> tuple[Any, Any]:
    return _int(int(a))


def _np_float(a: Any) -> tuple[Any, Any]:
    return _float(float(a))


def _np_bool(a: Any) -> tuple[Any, Any]:
    return _BOOL, bool(a)


def _const(a: Any) -> tuple[Any, Any]:
    return (a.__class__, a), CONST


def _array(getter: Callable[[Any], int]) -> Callable[[Any], tuple[Any, Any]]:
    def classify(a: Any) -> tuple[Any, Any]:
        p = getter(a)
        return (a.__class__, a.dtype, not p & 15), p

    return classify


def _torch_array(a: Any) -> tuple[Any, Any]:
    # `_array(_torch)` in one call: torch tensors are what most launches take.
    if not a.is_cuda:
        raise HostArrayError(f"a torch tensor on {a.device}")
    p = a.data_ptr()
    return (a.__class__, a.dtype, not p & 15), p


def _wrapper(a: Any) -> tuple[Any, Any]:
    key, p = classify(a.base)
    return (a.__class__, a.dtype, key), p


def _int_key(a: Any) -> Any:
    """`_int`'s key of a descriptor's shape or stride outside int32's range; TypeError for a value that is
    no int (exactly: the slow path specializes anything else, a bool or a NumPy integer, its own way)."""
    if a.__class__ is not int:
        raise TypeError(f"no fast path for a descriptor's {a.__class__.__name__}")
    return _int(a)[0]


# A host TensorDescriptor: keyed on its class, block shape and padding (its DescriptorArg), its base as an
# array argument is keyed, and each shape and stride but the last as an int argument is (those in int32's
# range as the generated launch keys plain ints: 1, 16 for a multiple of 16, else 0; others by `_int_key`);
# its launch value is (base address, *shape, *strides[:-1]), in the order of `DescriptorArg.names`. One
# branch per rank, its ints unpacked and keyed inline (a shape or strides of another rank fails to unpack);
# a base of the first torch tensor class met (`_torch_base`) read inline too.
_INT_KEY = "((1 if {a} == 1 else 0 if {a} & 15 else 16) if {a}.__class__ is int and -0x80000000 <= {a} <= 0x7FFFFFFF " \
           "else _int_key({a}))"


def _descriptor_source() -> str:
    lines = ["def _descriptor(d):", "    base = d.base", "    if base.__class__ is _torch_base:  # `_torch_array` inlined",
             "        if not base.is_cuda:", "            raise HostArrayError(f'a torch tensor on {base.device}')",
             "        p = base.data_ptr()", "        base_key = (_torch_base, base.dtype, not p & 15)", "    else:",
             "        base_key, p = (_BASES.get(base.__class__) or _base_classifier(base))(base)",
             "    shape, strides, block = d.shape, d.strides, d.block_shape", "    rank = len(block)"]
    for rank in range(1, MAX_RANK + 1):
        sizes, steps = [f"s{i}" for i in range(rank)], [f"t{i}" for i in range(rank - 1)]
        lines += [f"    {'if' if rank == 1 else 'elif'} rank == {rank}:",
                  f"        {''.join(v + ', ' for v in sizes)}= shape",
                  f"        {''.join(v + ', ' for v in steps)}_, = strides",
                  f"        return (d.__class__, (*block,), d.padding, base_key, "
                  f"{', '.join(_INT_KEY.format(a=v) for v in sizes + steps)}), (p, {', '.join(sizes + steps)})"]
    lines.append("    raise TypeError(f'no fast path for a descriptor of rank {rank}')")
    return "\n".join(lines) + "\n"


def _base_classifier(a: Any) -> Callable[[Any], tuple[Any, Any]]:
    """The classifier of a descriptor's base of `a`'s type (an array's); TypeError for anything else."""
    if not arguments.is_array(a):
        raise TypeError(f"no fast path for a descriptor whose base is a {a.__class__.__name__}")
    found = _BASES[a.__class__] = CLASSIFIERS.get(a.__class__) or classifier_for(a)
    global _torch_base
    if found is _torch_array and _torch_base is _Unseen:  # the first torch tensor class met: inlined
        _torch_base = a.__class__
    return found


class _Unseen:
    """`_torch_base` before a descriptor's base was a torch tensor: no base's class is it."""


_BASES: dict[type, Callable[[Any], tuple[Any, Any]]] = {}
_torch_base: type = _Unseen
exec(compile(_descriptor_source(), "<despina descriptor classifier>", "exec"), globals())  # reads `_torch_base` here
_descriptor: Callable[[Any], tuple[Any, Any]] = globals()["_descriptor"]

CLASSIFIERS: dict[type, Callable[[Any], tuple[Any, Any]]] = {
    int: _int, bool: _bool, float: _float, type(None): _const, str: _const, tuple: _const, ScalarType: _const,
}


def classifier_for(a: Any) -> Callable[[Any], tuple[Any, Any]]:
    """The classifier of values of `a`'s type, made and remembered on first sight; TypeError for a
    value the fast path does not take (the slow path then explains or handles it)."""
    cls = a.__class__
    found: Callable[[Any], tuple[Any, Any]]
    if issubclass(cls, bool):
        found = _bool
    elif issubclass(cls, int):
        found = _int
    elif issubclass(cls, float):
        found = _float
    elif issubclass(cls, (np.integer, np.floating, np.bool_)):  # NumPy scalars, typed as Python's
        found = _np_bool if issubclass(cls, np.bool_) else _np_int if issubclass(cls, np.integer) else _np_float
    elif issubclass(cls, TensorDescriptor):
        found = _descriptor
    elif arguments.is_array(a):
        getter = getter_for(cls)
        found = _wrapper if getter is _wrapped else _torch_array if getter is _torch else _array(getter)
    else:
        raise TypeError(f"no fast path for {cls.__name__}")
    CLASSIFIERS[cls] = found
    return found


def classify(a: Any) -> tuple[Any, Any]:
    return (CLASSIFIERS.get(a.__class__) or classifier_for(a))(a)
