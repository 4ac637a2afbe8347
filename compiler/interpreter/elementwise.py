"""Elementwise arithmetic, comparison and selection with the GPU's semantics.

Integers are computed in NumPy integers of their exact width, so they wrap; division and
remainder truncate toward zero as in C; shifts by the bit width or more give 0 (or the sign)
as PTX clamps them. fp16 and bf16 math is done in float32 and rounded once; int1 arithmetic
is arithmetic modulo 2.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..ir.core import Op
from ..ir.types import ScalarType, elem_of
from .core import State, rule
from .values import Val, broadcast_shape, finish

Binary = Callable[..., np.ndarray]


def scalar_type(op: Op) -> ScalarType:
    ty = elem_of(op.result.type)
    assert isinstance(ty, ScalarType)
    return ty


def unsigned(x: np.ndarray) -> np.ndarray:
    """The bits of an integer array as the unsigned type of its width."""
    if x.dtype == np.bool_:
        return x.astype(np.uint8)
    return x.view(f"uint{x.dtype.itemsize * 8}")


def _modulo_2(fn: Binary) -> Binary:
    """int1 arithmetic: compute in uint8 and keep the low bit."""
    return lambda a, b: (fn(a.astype(np.uint8), b.astype(np.uint8)) & np.uint8(1)).astype(np.bool_)


def _compute(st: State, op: Op, fn: Binary) -> list[Val]:
    a, b = st.get(op.operands[0]), st.get(op.operands[1])
    ty = scalar_type(op)
    if ty.is_bool():
        return [_modulo_2(fn)(a, b)]
    if isinstance(fn, np.ufunc) and not ty.is_bf16():
        return [fn(a, b, out=st.scratch.empty(broadcast_shape(a.shape, b.shape), a.dtype))]
    return [finish(fn(a, b), ty)]


def _c_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "u":
        return a // b
    # `a - fmod(a, b)` is an exact multiple of b, so floor division of it truncates.
    return (a - np.fmod(a, b)) // b


@rule("add")
def add(st: State, op: Op) -> list[Val]:
    return _compute(st, op, np.add)


@rule("sub")
def sub(st: State, op: Op) -> list[Val]:
    return _compute(st, op, np.subtract)


@rule("mul")
def mul(st: State, op: Op) -> list[Val]:
    return _compute(st, op, np.multiply)


@rule("rem")
def rem(st: State, op: Op) -> list[Val]:
    return _compute(st, op, np.fmod)


@rule("floordiv")
def floordiv(st: State, op: Op) -> list[Val]:
    return _compute(st, op, _c_div)


@rule("div", "div_rn", "fdiv")
def div(st: State, op: Op) -> list[Val]:
    return _compute(st, op, np.true_divide)


@rule("pow")
def pow_(st: State, op: Op) -> list[Val]:
    ty = scalar_type(op)
    if ty.primitive_bitwidth == 16:
        return _compute(st, op, lambda a, b: np.power(a.astype(np.float32), b.astype(np.float32)))
    return _compute(st, op, np.power)


@rule("maximum", "minimum")
def extremum(st: State, op: Op) -> list[Val]:
    ty = scalar_type(op)
    if ty.is_floating() and op.attrs.get("propagate_nan", "none") != "all":
        fn: Binary = np.fmax if op.name == "maximum" else np.fmin
    else:
        fn = np.maximum if op.name == "maximum" else np.minimum
    a, b = st.get(op.operands[0]), st.get(op.operands[1])
    return [fn(a, b)]


@rule("and", "or", "xor")
def bitwise(st: State, op: Op) -> list[Val]:
    fn = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op.name]
    return [fn(st.get(op.operands[0]), st.get(op.operands[1]))]


@rule("not")
def not_(st: State, op: Op) -> list[Val]:
    return [np.invert(st.get(op.operands[0]))]


@rule("shl", "shr")
def shift(st: State, op: Op) -> list[Val]:
    a, b = st.get(op.operands[0]), st.get(op.operands[1])
    ty = scalar_type(op)
    bits = ty.primitive_bitwidth
    if ty.is_bool():
        a = a.astype(np.uint8)
    amount = unsigned(b)
    beyond = amount >= bits
    clamped = np.minimum(amount, bits - 1).astype(a.dtype)
    if op.name == "shl":
        out = np.where(beyond, 0, a << clamped)
    elif ty.is_int_signed() and not ty.is_bool():
        out = a >> clamped  # a shift by bits - 1 already fills with the sign
    else:
        out = np.where(beyond, 0, a >> clamped)
    return [out.astype(a.dtype if not ty.is_bool() else np.bool_, copy=False)]


def _mulhi64(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    low, half = np.uint64(0xFFFFFFFF), np.uint64(32)
    a_lo, a_hi, b_lo, b_hi = a & low, a >> half, b & low, b >> half
    lh, hl = a_lo * b_hi, a_hi * b_lo
    carry = ((a_lo * b_lo) >> half) + (lh & low) + (hl & low)
    return a_hi * b_hi + (lh >> half) + (hl >> half) + (carry >> half)


@rule("umulhi")
def umulhi(st: State, op: Op) -> list[Val]:
    """The high half of the product of the operands' bits read as unsigned (`__nv_umulhi`),
    whatever the signedness of the type, as Triton's `umulhi`."""
    a, b = st.get(op.operands[0]), st.get(op.operands[1])
    bits = scalar_type(op).primitive_bitwidth
    ua, ub = unsigned(a), unsigned(b)
    if bits == 64:
        return [_mulhi64(ua, ub).view(a.dtype)]
    product = ua.astype(np.uint64) * ub.astype(np.uint64)
    return [(product >> np.uint64(bits)).astype(ua.dtype).view(a.dtype)]


@rule("neg")
def neg(st: State, op: Op) -> list[Val]:
    x = st.get(op.operands[0])
    if x.dtype == np.bool_:
        return [x]
    return [np.negative(x)]


@rule("abs")
def abs_(st: State, op: Op) -> list[Val]:
    x = st.get(op.operands[0])
    if x.dtype.kind in "ub":
        return [x]
    return [np.abs(x)]


_PREDICATES: dict[str, Binary] = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}


@rule("cmp")
def cmp(st: State, op: Op) -> list[Val]:
    a, b = st.get(op.operands[0]), st.get(op.operands[1])
    out = st.scratch.empty(broadcast_shape(a.shape, b.shape), np.dtype(np.bool_))
    return [_PREDICATES[op.attrs["pred"]](a, b, out=out)]


@rule("select")
def select(st: State, op: Op) -> list[Val]:
    c, a, b = (st.get(v) for v in op.operands)
    return [np.where(c, a, b)]


@rule("fma")
def fma(st: State, op: Op) -> list[Val]:
    a, b, c = (st.get(v) for v in op.operands)
    ty = scalar_type(op)
    if ty.is_fp64():
        return [a * b + c]
    # The product of two floats of at most 24 bits is exact in float64: one rounding remains.
    return [finish(a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64), ty)]


_erf = np.frompyfunc(math.erf, 1, 1)

_FLOAT_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp": np.exp,
    "exp2": np.exp2,
    "log": np.log,
    "log2": np.log2,
    "sqrt": np.sqrt,
    "sqrt_rn": np.sqrt,
    "rsqrt": lambda x: np.reciprocal(np.sqrt(x)),
    "sin": np.sin,
    "cos": np.cos,
    "erf": lambda x: np.asarray(_erf(x.astype(np.float64)), dtype=np.float64),
    "floor": np.floor,
    "ceil": np.ceil,
}


@rule(*_FLOAT_UNARY)
def float_unary(st: State, op: Op) -> list[Val]:
    x = st.get(op.operands[0])
    ty = scalar_type(op)
    if ty.primitive_bitwidth == 16:
        x = x.astype(np.float32)
    return [finish(_FLOAT_UNARY[op.name](x), ty)]
