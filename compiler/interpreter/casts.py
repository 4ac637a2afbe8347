"""`cast` and `bitcast` with PTX's conversion semantics.

Float to integer truncates toward zero and saturates at the target's range, NaN giving 0
(`cvt.rzi`); integer to integer wraps, extending by the source's signedness; float narrowing
rounds to nearest even unless the `rounding` attribute says `rtz`; rounding to fp8 saturates at
its largest finite value (`cvt.rn.satfinite`, see `fp8`); pointers convert to and from int64
addresses.
"""

from __future__ import annotations

import numpy as np

from ..ir.core import Op
from ..ir.types import ElemType, PointerType, ScalarType, elem_of
from . import fp8
from .core import State, rule
from .values import Val, from_bits, np_dtype, round_bf16, storage_dtype, to_bits


def _float_to_int(x: np.ndarray, dst: ScalarType) -> np.ndarray:
    dt = np_dtype(dst)
    info = np.iinfo(dt)
    f = np.trunc(x.astype(np.float64))
    hi = float(info.max)
    safe = np.where(np.isnan(f), 0.0, np.clip(f, float(info.min), hi))
    out = safe.astype(dt)
    if info.bits == 64:
        # The largest 64-bit integers round up to 2**63 (2**64) as floats: saturate those here.
        out = np.where(safe >= hi, info.max, out).astype(dt)
    return out


def _toward_zero(r: np.ndarray, dst: ScalarType) -> np.ndarray:
    """The representable value next to `r` (finite or infinite, non-zero) toward zero."""
    if dst.is_bf16():
        return (r.view(np.uint32) - np.uint32(0x10000)).view(np.float32)
    return np.nextafter(r, np.zeros_like(r))


def _float_to_float(x: np.ndarray, dst: ScalarType, rounding: str | None) -> np.ndarray:
    if dst.is_fp8():
        return fp8.round_fp8(x, dst)
    out = round_bf16(x) if dst.is_bf16() else x.astype(np_dtype(dst))
    if rounding == "rtz" and dst.primitive_bitwidth < 64:
        wide = x.astype(np.float64)
        rounded_away = np.abs(out.astype(np.float64)) > np.abs(wide)
        out = np.where(rounded_away, _toward_zero(out, dst), out)
    return out


def convert(x: np.ndarray, src: ElemType, dst: ElemType, rounding: str | None = None) -> np.ndarray:
    """`x` of element type `src` converted to `dst` as `cast` does."""
    if src == dst:
        return x
    if isinstance(dst, PointerType):
        return x.astype(np.int64)
    if dst.is_bool():
        return x != 0
    if isinstance(src, PointerType):
        return x.astype(np_dtype(dst))
    if dst.is_floating():
        if src.is_floating():
            return _float_to_float(x, dst, rounding)
        return round_bf16(x.astype(np.float64)) if dst.is_bf16() else x.astype(np_dtype(dst))
    if src.is_floating():
        return _float_to_int(x, dst)
    return x.astype(np_dtype(dst))


@rule("cast")
def cast(st: State, op: Op) -> list[Val]:
    src = elem_of(op.operands[0].type)
    return [convert(st.get(op.operands[0]), src, op.attrs["to"], op.attrs.get("rounding"))]


@rule("bitcast")
def bitcast(st: State, op: Op) -> list[Val]:
    x = st.get(op.operands[0])
    src, dst = elem_of(op.operands[0].type), op.attrs["to"]
    if src == dst or (isinstance(dst, ScalarType) and dst.is_bool()):
        return [x]
    return [from_bits(to_bits(x, src).view(storage_dtype(dst)), dst)]

