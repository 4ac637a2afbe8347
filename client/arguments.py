"""What a kernel argument is: its IR type and specialization, its host buffer for the interpreter, and
`reinterpret` (an array passed as another element type of the same size)."""

from __future__ import annotations

import ctypes
import sys
from typing import TYPE_CHECKING, Any

from despina.compiler.ir import types as _t
from despina.language.core import unwrap

if TYPE_CHECKING:
    import numpy as np

_NAMES: dict[str, _t.ScalarType] = {
    "bool": _t.int1, "int8": _t.int8, "int16": _t.int16, "int32": _t.int32, "int64": _t.int64,
    "uint8": _t.uint8, "uint16": _t.uint16, "uint32": _t.uint32, "uint64": _t.uint64,
    "float16": _t.float16, "half": _t.float16, "bfloat16": _t.bfloat16, "float32": _t.float32,
    "float": _t.float32, "float64": _t.float64, "double": _t.float64,
    "float8_e4m3fn": _t.float8e4nv, "float8_e5m2": _t.float8e5,
}


def _numpy() -> Any:
    """NumPy if something imported it, else None (then no value is a NumPy array, scalar or dtype):
    `import despina` and compiling need no NumPy."""
    return sys.modules.get("numpy")


def element_type(dtype: Any) -> _t.ScalarType | None:
    """The scalar type of a NumPy, torch or CuPy dtype, or None if it has none (remembered by dtype: a
    NumPy dtype's name takes microseconds, which a TensorDescriptor made for every launch paid each time)."""
    if isinstance(dtype, _t.ScalarType):
        return dtype
    try:
        return _ELEMENT_TYPES[dtype]
    except (KeyError, TypeError):  # not seen yet, or not hashable
        pass
    name = str(dtype).rsplit(".", 1)[-1]
    np = _numpy()
    if np is not None and (isinstance(dtype, np.dtype) or (isinstance(dtype, type) and issubclass(dtype, np.generic))):
        name = np.dtype(dtype).name
    found = _NAMES.get(name)
    try:
        _ELEMENT_TYPES[dtype] = found
    except TypeError:
        pass
    return found


_ELEMENT_TYPES: dict[Any, _t.ScalarType | None] = {}


def is_array(value: Any) -> bool:
    np = _numpy()
    return hasattr(value, "dtype") and (hasattr(value, "data_ptr") or (np is not None and isinstance(value, np.ndarray))
                                        or hasattr(value, "__cuda_array_interface__") or hasattr(value, "__dlpack__"))


def data_ptr(value: Any) -> int:
    if hasattr(value, "data_ptr"):
        return int(value.data_ptr())
    np = _numpy()
    if np is not None and isinstance(value, np.ndarray):
        return int(value.ctypes.data)
    if hasattr(value, "__cuda_array_interface__"):
        return int(value.__cuda_array_interface__["data"][0])
    raise TypeError(f"cannot take the address of {type(value).__name__}")


def host_array(value: Any) -> np.ndarray:
    """A host array (NumPy, or a CPU torch tensor) as a NumPy array over the same memory, with its strides."""
    if hasattr(value, "device") and str(getattr(value, "device", "cpu")).startswith("cuda"):
        raise TypeError("the interpreter runs on the host: pass CPU tensors or NumPy arrays, not CUDA tensors")
    if hasattr(value, "detach") and hasattr(value, "numpy"):
        import torch

        t = value.detach()
        as_bits = {torch.bfloat16: torch.int16, torch.bool: torch.uint8, torch.float8_e4m3fn: torch.uint8,
                   torch.float8_e5m2: torch.uint8}.get(t.dtype)
        arr = (t.view(as_bits) if as_bits is not None else t).numpy()
    elif _numpy() is not None and isinstance(value, _numpy().ndarray):
        arr = value
    else:
        raise TypeError(f"the interpreter cannot read a {type(value).__name__}; pass a NumPy array or a CPU torch tensor")
    return arr


def host_buffer(value: Any) -> np.ndarray:
    """A NumPy view of a host array's memory starting at its first element (for the interpreter).
    Writes through it land in `value`."""
    arr = host_array(value)
    if arr.flags.c_contiguous:
        return arr.reshape(-1)
    if any(s < 0 for s in arr.strides):
        raise ValueError("arrays with negative strides are not supported; pass np.ascontiguousarray(x)")
    np = _numpy()
    span = sum((n - 1) * s for n, s in zip(arr.shape, arr.strides)) + arr.itemsize if arr.size else 0
    raw = memoryview((ctypes.c_char * span).from_address(arr.ctypes.data))
    return np.frombuffer(raw, dtype=np.uint8).view(arr.dtype) if span % arr.itemsize == 0 else np.frombuffer(raw, np.uint8)


def strided_warning(kernel: str, name: str, arr: np.ndarray) -> str | None:
    """What to tell the user when argument `name` of `kernel` is not C-contiguous, which a kernel reads
    as contiguous memory from its first element (Triton's semantics), not through its strides; None
    when it is contiguous."""
    if arr.flags.c_contiguous:
        return None
    strides = tuple(s // arr.itemsize for s in arr.strides)
    return (f"kernel '{kernel}': argument '{name}' is not contiguous (shape {tuple(arr.shape)}, strides {strides} "
            "in elements); like Triton, the kernel reads it as contiguous memory from its first element, not "
            "through these strides. Pass a contiguous copy (np.ascontiguousarray(a); a torch tensor: a.contiguous()) "
            "unless the kernel indexes it with strides of its own")


def scalar_type(value: Any) -> _t.ScalarType:
    """The IR type of a scalar argument, as Triton picks it."""
    np = _numpy()
    if isinstance(value, bool) or (np is not None and isinstance(value, np.bool_)):
        return _t.int1
    if isinstance(value, int) or (np is not None and isinstance(value, np.integer)):
        v = int(value)
        if -(2**31) <= v < 2**31:
            return _t.int32
        if -(2**63) <= v < 2**63:
            return _t.int64
        if v < 2**64:
            return _t.uint64
        raise OverflowError(f"integer argument {v} does not fit in 64 bits")
    if isinstance(value, float) or (np is not None and isinstance(value, np.floating)):
        return _t.float32
    raise TypeError(f"unsupported argument type {type(value).__name__}")


class TensorWrapper:
    """An array whose elements a kernel sees as `dtype`; made by `reinterpret`."""

    def __init__(self, base: Any, dtype: _t.ScalarType) -> None:
        self.base = base
        self.dtype = dtype
        self.shape = tuple(base.shape)

    def data_ptr(self) -> int:
        return data_ptr(self.base)

    def __repr__(self) -> str:
        return f"reinterpret({type(self.base).__name__} of {self.base.dtype}, {self.dtype})"


def reinterpret(array: Any, dtype: _t.ScalarType) -> TensorWrapper:
    """`array` passed to kernels as a pointer to `dtype` elements of the same size: the way to pass
    bf16 and fp8 from NumPy, which has neither (`despina.reinterpret(bits_uint16, tl.bfloat16)`,
    `despina.reinterpret(bits_uint8, tl.float8e4nv)`)."""
    dtype = unwrap(dtype)
    if not isinstance(dtype, _t.ScalarType):
        raise TypeError(f"reinterpret needs a dtype such as tl.bfloat16, got {dtype!r}")
    base = array.base if isinstance(array, TensorWrapper) else array
    if not is_array(base):
        raise TypeError(f"reinterpret needs an array, got {type(base).__name__}")
    if base.dtype.itemsize != dtype.itemsize:
        raise TypeError(f"reinterpret: {base.dtype} elements are {base.dtype.itemsize} bytes, {dtype} are {dtype.itemsize}")
    return TensorWrapper(base, dtype)


def copy_buffer(x: Any) -> Any:
    """A copy of array `x` (torch's `clone`, NumPy's and CuPy's `copy`): what an autotuner restores."""
    return x.clone() if hasattr(x, "clone") else x.copy()


def zero_buffer(x: Any) -> None:
    """Zero array `x` in place (an autotuner's `reset_to_zero`)."""
    if hasattr(x, "zero_"):
        x.zero_()
    else:
        x[...] = 0


def restore_buffer(x: Any, saved: Any) -> None:
    """Write `saved` (a `copy_buffer` of `x`) back into `x` in place."""
    if hasattr(x, "copy_"):
        x.copy_(saved)
    else:
        x[...] = saved
