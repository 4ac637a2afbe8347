"""The GPU's arithmetic on one scalar, for the constant folder.

Each function returns the exact value the hardware produces, or None where that value is not
pinned down (division by zero, shifts past the width, out-of-range float-to-int, results whose
bits differ between implementations such as NaN payloads) or where the op is approximate on the
GPU (`div`, `sqrt`, transcendentals): the folder leaves those ops alone.

Values are Python numbers: an int in its type's range (int1 is a bool), or a float holding a
value exactly representable in its type. Integer ops wrap at the type's width and divide as C
does (truncating); fp16, fp32 and fp64 arithmetic is computed by NumPy in that precision; bf16
is computed in fp32 and rounded to nearest even, as the GPU does without native bf16 math (and
with the same results as native bf16 math: fp32 is wide enough that rounding twice is exact).
The GPU is assumed not to flush subnormals to zero, as Triton's NVPTX lowering does not.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from ..ir.types import ScalarType

Num = int | float | bool

# significand bits, minimum and maximum normal exponent
_FORMATS: dict[str, tuple[int, int, int]] = {
    "fp16": (11, -14, 15),
    "bf16": (8, -126, 127),
    "fp32": (24, -126, 127),
    "fp64": (53, -1022, 1023),
}
_NUMPY_NAMES = {"fp16": "float16", "bf16": "float32", "fp32": "float32", "fp64": "float64"}


def _np() -> Any:
    """NumPy, imported when a float op is first folded: `import despina` needs no NumPy."""
    import numpy

    return numpy


def normalize(value: Any, ty: ScalarType) -> Num | None:
    """A `constant` op's value as held in `ty`, or None if it cannot be read as one."""
    if ty.is_int():
        return wrap(int(value), ty) if isinstance(value, (bool, int)) else None
    if ty.is_floating() and isinstance(value, (bool, int, float)):
        return to_float(value, ty)
    return None


def wrap(x: int, ty: ScalarType) -> Num:
    """`x` modulo 2**width, read as `ty` (two's complement when signed)."""
    if ty.is_bool():
        return bool(x & 1)
    bits = ty.primitive_bitwidth
    x &= (1 << bits) - 1
    if ty.is_int_signed() and x >> (bits - 1):
        x -= 1 << bits
    return x


def to_float(x: Num, ty: ScalarType) -> float:
    """`x` rounded once, to nearest even, to the float type `ty` (inf when it overflows)."""
    x = float(x) if isinstance(x, bool) else x
    if isinstance(x, float) and not math.isfinite(x):
        return x
    p, emin, emax = _FORMATS[ty.name]
    exact = Fraction(x)
    if exact == 0:
        return x if isinstance(x, float) else 0.0
    mag = abs(exact)
    e = mag.numerator.bit_length() - mag.denominator.bit_length()
    if Fraction(2) ** e > mag:
        e -= 1
    quantum = Fraction(2) ** (max(e, emin) - p + 1)
    n, rest = divmod(mag, quantum)
    if rest * 2 > quantum or (rest * 2 == quantum and n % 2 == 1):
        n += 1
    rounded = n * quantum
    if rounded >= Fraction(2) ** (emax + 1):
        return math.copysign(math.inf, exact)
    return math.copysign(float(rounded), exact)


# ---- integers ---------------------------------------------------------------------------------


def _div_ok(a: int, b: int, ty: ScalarType) -> bool:
    # x / 0 and INT_MIN / -1 are undefined in LLVM; the GPU's answer is not one to rely on.
    return b != 0 and not (ty.is_int_signed() and b == -1 and a == -(1 << (ty.primitive_bitwidth - 1)))


def _int_floordiv(a: int, b: int, ty: ScalarType) -> int | None:
    if not _div_ok(a, b, ty):
        return None
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _int_rem(a: int, b: int, ty: ScalarType) -> int | None:
    q = _int_floordiv(a, b, ty)
    return None if q is None else a - q * b


def _shift(a: int, b: int, ty: ScalarType, left: bool) -> int | None:
    if not 0 <= b < ty.primitive_bitwidth:
        return None
    return a << b if left else a >> b  # Python's >> is arithmetic: ashr for signed, lshr for unsigned


def _umulhi(a: int, b: int, ty: ScalarType) -> int | None:
    if a < 0 or b < 0:
        return None  # libdevice reads the bits as unsigned, NumPy-style interpreters sign-extend
    return (a * b) >> ty.primitive_bitwidth


INT_BINARY: dict[str, Callable[[int, int, ScalarType], int | None]] = {
    "add": lambda a, b, t: a + b,
    "sub": lambda a, b, t: a - b,
    "mul": lambda a, b, t: a * b,
    "floordiv": _int_floordiv,
    "rem": _int_rem,
    "maximum": lambda a, b, t: max(a, b),
    "minimum": lambda a, b, t: min(a, b),
    "and": lambda a, b, t: a & b,
    "or": lambda a, b, t: a | b,
    "xor": lambda a, b, t: a ^ b,
    "shl": lambda a, b, t: _shift(a, b, t, True),
    "shr": lambda a, b, t: _shift(a, b, t, False),
    "umulhi": _umulhi,
}
INT_UNARY: dict[str, Callable[[int], int]] = {"neg": lambda a: -a, "abs": abs, "not": lambda a: ~a}
# On int1 only the ops whose answer does not depend on reading true as 1 or as -1.
BOOL_OPS = ("add", "sub", "mul", "and", "or", "xor", "not")


def int_binary(name: str, a: int, b: int, ty: ScalarType) -> Num | None:
    if ty.is_bool() and name not in BOOL_OPS:
        return None
    r = INT_BINARY[name](int(a), int(b), ty)
    return None if r is None else wrap(r, ty)


def int_unary(name: str, a: int, ty: ScalarType) -> Num | None:
    if ty.is_bool() and name not in BOOL_OPS:
        return None
    return wrap(INT_UNARY[name](int(a)), ty)


# ---- floats -----------------------------------------------------------------------------------

FLOAT_BINARY = ("add", "sub", "mul", "div_rn", "maximum", "minimum")
FLOAT_UNARY = ("neg", "abs", "floor", "ceil")


def _np_binary(name: str, a: Any, b: Any) -> Any:
    if name == "add":
        return a + b
    if name == "sub":
        return a - b
    if name == "mul":
        return a * b
    return a / b


def float_binary(name: str, a: float, b: float, ty: ScalarType) -> float | None:
    if name in ("maximum", "minimum"):
        # NaN handling and the sign of max(-0, +0) vary with `propagate_nan` and the instruction.
        if math.isnan(a) or math.isnan(b) or a == b:
            return a if a == b and math.copysign(1, a) == math.copysign(1, b) else None
        return max(a, b) if name == "maximum" else min(a, b)
    np = _np()
    np_ty = getattr(np, _NUMPY_NAMES[ty.name])
    with np.errstate(all="ignore"):
        r = float(_np_binary(name, np_ty(a), np_ty(b)))
    return _finish(r, ty)


def float_unary(name: str, a: float, ty: ScalarType) -> float | None:
    if name == "neg":
        r = -a
    elif name == "abs":
        r = abs(a)
    else:
        r = float(_np().floor(a) if name == "floor" else _np().ceil(a))
    return _finish(r, ty)


def _finish(r: float, ty: ScalarType) -> float | None:
    # A NaN's bits depend on the instruction that made it; a folded NaN would not match them.
    return None if math.isnan(r) else to_float(r, ty)


def compare(pred: str, a: Num, b: Num, ty: ScalarType) -> bool | None:
    if ty.is_floating() and (math.isnan(a) or math.isnan(b)):
        return None  # ordered vs unordered predicates differ exactly here
    if ty.is_bool() and pred not in ("eq", "ne"):
        return None
    ops: dict[str, Callable[[Num, Num], bool]] = {
        "eq": lambda x, y: x == y,
        "ne": lambda x, y: x != y,
        "lt": lambda x, y: x < y,
        "le": lambda x, y: x <= y,
        "gt": lambda x, y: x > y,
        "ge": lambda x, y: x >= y,
    }
    return ops[pred](a, b)


# ---- conversions ------------------------------------------------------------------------------


def cast(x: Num, src: ScalarType, dst: ScalarType, rounding: str | None) -> Num | None:
    """`cast` as Triton lowers it: sext/zext/trunc, int1 zero-extends, float-to-int truncates."""
    if src.is_fp8() or dst.is_fp8():
        return None  # the IR has no fp8 constants to fold into
    if dst.is_bool():
        # The frontend writes `x != 0` for bools; a `cast` to int1 means whatever the backend makes of it.
        return x if src.is_bool() else None
    if src.is_int():
        return wrap(int(x), dst) if dst.is_int() else to_float(int(x), dst)
    assert isinstance(x, float)
    if math.isnan(x):
        return None
    if dst.is_floating():
        r = to_float(x, dst)
        return r if r == x or rounding in (None, "rtne") else None
    if math.isinf(x):
        return None
    t = math.trunc(x)
    return t if wrap(t, dst) == t else None  # out of range is poison in LLVM, saturation in PTX


# exponent bits, mantissa bits, largest finite value; fp8e5 is IEEE-like, fp8e4nv has no infinity
_FP8: dict[str, tuple[int, int, float]] = {"fp8e4nv": (4, 3, 448.0), "fp8e5": (5, 2, 57344.0)}


def fp8_bits(x: float, ty: ScalarType) -> int:
    """The bits `cvt.rn.satfinite` gives for `x` in fp8 type `ty`: rounded to nearest even, beyond the
    largest finite value (infinities too) that value with `x`'s sign, NaN 0x7F."""
    if math.isnan(x):
        return 0x7F
    ebits, mbits, top = _FP8[ty.name]
    bias = (1 << (ebits - 1)) - 1
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    mag = min(abs(Fraction(x)) if math.isfinite(x) else Fraction(top), Fraction(top))
    e = 1 - bias  # the subnormals' exponent, and the least normal one
    while mag >= Fraction(2) ** (e + 1):
        e += 1
    quantum = Fraction(2) ** (e - mbits)
    q, rest = divmod(mag, quantum)
    n = int(q)
    if rest * 2 > quantum or (rest * 2 == quantum and n % 2 == 1):
        n += 1
    # n counts quanta from zero: the fields follow (a carry into the next binade is the next exponent)
    if e == 1 - bias and n < 1 << mbits:
        return sign | n
    if n == 2 << mbits:
        n, e = 1 << mbits, e + 1
    return sign | (e + bias) << mbits | (n - (1 << mbits))


def bitcast(x: Num, src: ScalarType, dst: ScalarType) -> Num | None:
    if src.is_fp8() or dst.is_fp8():
        return None  # the IR has no fp8 constants to fold into
    bits = _to_bits(x, src)
    return None if bits is None else _from_bits(bits, dst)


def _to_bits(x: Num, ty: ScalarType) -> int | None:
    if ty.is_int():
        return int(x) & ((1 << ty.primitive_bitwidth) - 1)
    if math.isnan(x):
        return None
    np = _np()
    if ty.is_bf16():
        return int(np.float32(x).view(np.uint32)) >> 16
    return int(np.array(x, dtype=_NUMPY_NAMES[ty.name]).view(f"uint{ty.primitive_bitwidth}"))


def _from_bits(bits: int, ty: ScalarType) -> Num | None:
    if ty.is_int():
        return wrap(bits, ty)
    np = _np()
    if ty.is_bf16():
        r = float(np.array(bits << 16, dtype=np.uint32).view(np.float32))
    else:
        r = float(np.array(bits, dtype=f"uint{ty.primitive_bitwidth}").view(_NUMPY_NAMES[ty.name]))
    return None if math.isnan(r) else r
