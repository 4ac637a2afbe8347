"""How the interpreter holds tile-IR values in NumPy.

Every value carries a leading *program axis*: a scalar of the IR is an array of shape `(P,)`
and a tile of shape `S` is `(P, *S)`, one row per program of the batch being run. Any
dimension may be 1 where the value is the same along it (NumPy broadcasting): a value with
leading dimension 1 is uniform across programs, `arange` is `(1, N)`, a `splat` is
`(P, 1, ..., 1)` and `broadcast` changes nothing. Rules that need whole tiles call `full`.

Element types map onto NumPy dtypes of the exact width, so integer arithmetic wraps as on the
GPU. bf16 has no NumPy dtype: it is held as float32 rounded to bf16 after every op that
produces it (`round_bf16`) and stored in memory as its upper 16 bits; the fp8 types likewise, as
float32 holding fp8 values, stored as their bit patterns (`fp8`). Pointers are int64
addresses (see `memory`), or a lazy `Ptr` that `addptr` builds so that loads and stores can
find their buffer without looking at every address.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import numpy as np

from ..ir.types import ElemType, ScalarType, TileType, Type, shape_of
from .fp8 import from_bits as fp8_values
from .fp8 import to_bits as fp8_bits

_DTYPES: dict[str, np.dtype] = {
    name: np.dtype(t)
    for name, t in {
        "int1": np.bool_,
        "int8": np.int8,
        "int16": np.int16,
        "int32": np.int32,
        "int64": np.int64,
        "uint8": np.uint8,
        "uint16": np.uint16,
        "uint32": np.uint32,
        "uint64": np.uint64,
        "fp16": np.float16,
        "bf16": np.float32,
        "fp32": np.float32,
        "fp64": np.float64,
        "fp8e4nv": np.float32,
        "fp8e5": np.float32,
    }.items()
}

# How an element sits in memory, where that differs from how it is computed with.
_STORAGE: dict[str, np.dtype] = {**_DTYPES, "int1": np.dtype(np.uint8), "bf16": np.dtype(np.uint16),
                                 "fp8e4nv": np.dtype(np.uint8), "fp8e5": np.dtype(np.uint8)}
_INT64 = np.dtype(np.int64)


def np_dtype(ty: ElemType) -> np.dtype:
    """The dtype a value of element type `ty` is computed in (pointers: int64 addresses)."""
    if isinstance(ty, ScalarType):
        return _DTYPES[ty.name]
    return _INT64


def storage_dtype(ty: ElemType) -> np.dtype:
    """The dtype of `ty` in memory: bf16 as uint16 bits, fp8 as uint8 bits, int1 as one byte."""
    if isinstance(ty, ScalarType):
        return _STORAGE[ty.name]
    return _INT64


def round_bf16(x: np.ndarray) -> np.ndarray:
    """Round float values to the nearest bf16 (ties to even), held as float32."""
    if x.dtype == np.float64:
        # Round the float64 mantissa to bf16's 8 bits first, so that the value is not rounded
        # twice (to float32, then to bf16).
        bits = x.view(np.uint64)
        bias = ((bits >> np.uint64(45)) & np.uint64(1)) + np.uint64((1 << 44) - 1)
        rounded = ((bits + bias) & np.uint64(~((1 << 45) - 1) & (2**64 - 1))).view(np.float64)
        x = np.where(np.isnan(x), x, rounded).astype(np.float32)
    elif x.dtype != np.float32:
        x = x.astype(np.float32)
    bits32 = x.view(np.uint32)
    bias32 = ((bits32 >> np.uint32(16)) & np.uint32(1)) + np.uint32(0x7FFF)
    out = ((bits32 + bias32) & np.uint32(0xFFFF0000)).view(np.float32)
    return np.where(np.isnan(x), x, out)


def bf16_to_bits(x: np.ndarray) -> np.ndarray:
    return (np.ascontiguousarray(x, dtype=np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)


def bf16_from_bits(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def to_bits(x: np.ndarray, ty: ElemType) -> np.ndarray:
    """Values of type `ty` as they lie in memory (bf16 and fp8 as their bit patterns)."""
    if isinstance(ty, ScalarType) and ty.is_bf16():
        return bf16_to_bits(x)
    if isinstance(ty, ScalarType) and ty.is_fp8():
        return fp8_bits(x, ty)
    return x


def from_bits(bits: np.ndarray, ty: ElemType) -> np.ndarray:
    """Values of type `ty` from their bits in memory: `to_bits` undone."""
    if isinstance(ty, ScalarType) and ty.is_bf16():
        return bf16_from_bits(bits)
    if isinstance(ty, ScalarType) and ty.is_fp8():
        return fp8_values(bits, ty)
    return bits


def finish(x: np.ndarray, ty: ElemType) -> np.ndarray:
    """`x` in the dtype of `ty`, rounded as the GPU would round a result of that type."""
    if isinstance(ty, ScalarType) and ty.is_bf16():
        return round_bf16(x)
    return x.astype(np_dtype(ty), copy=False)


def scalar_array(value: Any, ty: ElemType, ndim: int = 1) -> np.ndarray:
    """A Python or NumPy scalar as a uniform value of type `ty` (integers wrap to its width)."""
    shape = (1,) * ndim
    if not isinstance(ty, ScalarType) or (ty.is_int() and not ty.is_bool()):
        bits = ty.primitive_bitwidth
        if isinstance(value, (float, np.floating)):
            value = int(np.trunc(float(value)))
        wrapped = int(value) & ((1 << bits) - 1)
        return np.full(shape, wrapped, dtype=f"uint{bits}").view(np_dtype(ty))
    if ty.is_bool():
        return np.full(shape, bool(value), dtype=np.bool_)
    f = np.full(shape, float(value), dtype=np.float64)
    return round_bf16(f) if ty.is_bf16() else f.astype(np_dtype(ty))


def full(x: np.ndarray, ty: Type) -> np.ndarray:
    """`x` broadcast to the whole tile shape of `ty`, keeping its program axis as it is."""
    shape = (x.shape[0],) + shape_of(ty)
    return x if x.shape == shape else np.broadcast_to(x, shape)


def broadcast_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """The shape two values of one rank broadcast to (`np.broadcast_shapes`, faster)."""
    if a == b:
        return a
    return tuple(x if y == 1 else y for x, y in zip(a, b))


def along_programs(mask: np.ndarray, ndim: int) -> np.ndarray:
    """A `(P,)` per-program mask shaped to broadcast against a value of `ndim` dimensions."""
    return mask.reshape(mask.shape + (1,) * (ndim - 1))


def merge(mask: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per program: `a` where `mask` holds, else `b`."""
    if a is b:
        return a
    return np.where(along_programs(mask, max(a.ndim, b.ndim)), a, b)


class Ptr:
    """A tile of pointers `base + index * itemsize` kept in parts, as `addptr` made it.

    Loads and stores find the buffer from `base` alone (usually one value per program) and
    use `index` as element indices directly; everything else sees `address()`.
    """

    __slots__ = ("base", "index", "itemsize", "_address")

    def __init__(self, base: np.ndarray, index: np.ndarray, itemsize: int) -> None:
        self.base = base
        self.index = index
        self.itemsize = itemsize
        self._address: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return broadcast_shape(self.base.shape, self.index.shape)

    def address(self) -> np.ndarray:
        if self._address is None:
            offset = self.index.astype(np.int64, copy=False)
            if self.itemsize != 1:
                offset = offset * np.int64(self.itemsize)
            self._address = self.base + offset
        return self._address


Val: TypeAlias = np.ndarray | Ptr


def numel(ty: Type) -> int:
    return ty.numel if isinstance(ty, TileType) else 1
