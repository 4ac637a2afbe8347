"""NumPy references for the 8-bit floats, written independently of the interpreter's `fp8` module:
values decoded field by field, rounding by searching the whole table for the nearest value."""

from __future__ import annotations

import math

import numpy as np

# name -> (exponent bits, mantissa bits, bias, IEEE-like: infinities and many NaNs)
FORMATS = {"fp8e4nv": (4, 3, 7, False), "fp8e5": (5, 2, 15, True)}
MAX_FINITE = {"fp8e4nv": 448.0, "fp8e5": 57344.0}


def decode(bits: int, name: str) -> float:
    ebits, mbits, bias, ieee = FORMATS[name]
    sign = -1.0 if bits >> 7 else 1.0
    e, m = (bits >> mbits) & ((1 << ebits) - 1), bits & ((1 << mbits) - 1)
    if e == (1 << ebits) - 1 and (ieee or m == (1 << mbits) - 1):
        return sign * math.inf if ieee and m == 0 else math.nan
    if e == 0:
        return sign * math.ldexp(m, 1 - bias - mbits)
    return sign * math.ldexp((1 << mbits) + m, e - bias - mbits)


def values(name: str) -> np.ndarray:
    """The value of each bit pattern 0..255 (float64)."""
    return np.array([decode(b, name) for b in range(256)])


def encode(x: float, name: str) -> int:
    """The bits `cvt.rn.satfinite` gives for `x`: the nearest finite value (ties to the even pattern),
    +-max for anything beyond it, infinities included; None's NaN check is left to the caller."""
    table = values(name)
    if math.isnan(x):
        return 0x7F
    x = max(-MAX_FINITE[name], min(MAX_FINITE[name], x))
    best = None
    for b in range(256):
        v = table[b]
        if not math.isfinite(v) or (v == 0 and (b >> 7) != (math.copysign(1, x) < 0)):
            continue
        key = (abs(v - x), b & 1)  # nearer first, then the even mantissa
        if best is None or key < best[0]:
            best = (key, b)
    assert best is not None
    return best[1]


def midpoints(name: str) -> np.ndarray:
    """Every value halfway between two adjacent finite fp8 values of one sign: the ties."""
    t = np.unique(values(name)[np.isfinite(values(name))])
    return ((t[:-1] + t[1:]) / 2)[t[:-1] * t[1:] >= 0]
