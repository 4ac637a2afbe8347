"""The 8-bit floats in NumPy, which has none: values are held as float32 (every fp8 value is one),
stored as their bit patterns (uint8).

`fp8e4nv` is OCP e4m3fn: bias 7, no infinities, S.1111.111 the only NaN, largest finite 448.
`fp8e5` is e5m2: bias 15, IEEE-like, with infinities and NaNs, largest finite 57344.

Rounding to fp8 is what the GPU's `cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32` does: to nearest, ties to
even; a finite value or an infinity beyond the largest finite value becomes that value with its
sign; NaN stays NaN (0x7F here; NaN payloads are not compared).
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np

from ..ir.types import ScalarType


class Format(NamedTuple):
    exponent_bits: int
    mantissa_bits: int
    bias: int
    max_finite: float
    has_inf: bool


FORMATS: dict[str, Format] = {
    "fp8e4nv": Format(4, 3, 7, 448.0, False),
    "fp8e5": Format(5, 2, 15, 57344.0, True),
}
NAN_BITS = 0x7F


def _decode(bits: int, f: Format) -> float:
    sign = -1.0 if bits & 0x80 else 1.0
    e = (bits >> f.mantissa_bits) & ((1 << f.exponent_bits) - 1)
    m = bits & ((1 << f.mantissa_bits) - 1)
    top = (1 << f.exponent_bits) - 1
    if f.has_inf and e == top:
        return sign * np.inf if m == 0 else np.nan
    if not f.has_inf and e == top and m == (1 << f.mantissa_bits) - 1:
        return np.nan
    if e == 0:
        return sign * m * 2.0 ** (1 - f.bias - f.mantissa_bits)
    return sign * (1 + m / (1 << f.mantissa_bits)) * 2.0 ** (e - f.bias)


@cache
def table(name: str) -> np.ndarray:
    """The float32 value of each of the 256 bit patterns of fp8 type `name`."""
    f = FORMATS[name]
    return np.array([_decode(b, f) for b in range(256)], dtype=np.float32)


def from_bits(bits: np.ndarray, ty: ScalarType) -> np.ndarray:
    """The values (float32) of fp8 bit patterns."""
    return table(ty.name)[np.asarray(bits).astype(np.uint8)]


def to_bits(x: np.ndarray, ty: ScalarType) -> np.ndarray:
    """The fp8 bit patterns of float values, rounded to nearest even and saturated (`cvt.rn.satfinite`)."""
    f = FORMATS[ty.name]
    wide = np.asarray(x, dtype=np.float64)
    nan = np.isnan(wide)
    negative = np.signbit(wide)
    mag = np.minimum(np.abs(np.where(nan, 0.0, wide)), f.max_finite)
    emin = 1 - f.bias
    _, ex = np.frexp(mag)
    quantum = np.ldexp(1.0, np.maximum(ex - 1, emin) - f.mantissa_bits)
    rounded = np.rint(mag / quantum) * quantum  # exact: quantum is a power of two; rint ties to even
    _, ex = np.frexp(rounded)
    e = np.maximum(ex - 1, emin)
    normal = (rounded >= 2.0**emin).astype(np.int64)
    mant = (np.ldexp(rounded, f.mantissa_bits - e) - normal * (1 << f.mantissa_bits)).astype(np.int64)
    field = np.where(normal == 1, e + f.bias, 0).astype(np.int64)
    bits = (field << f.mantissa_bits) | mant | (negative.astype(np.int64) << 7)
    return np.where(nan, NAN_BITS, bits).astype(np.uint8)


def round_fp8(x: np.ndarray, ty: ScalarType) -> np.ndarray:
    """Float values rounded to fp8 type `ty` as the GPU converts them, held as float32."""
    return from_bits(to_bits(x, ty), ty)
