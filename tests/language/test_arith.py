"""Operators and math builtins against NumPy, over every dtype; Triton's type promotion."""

from __future__ import annotations

import math

import numpy as np
import pytest

import despina
import despina.language as tl

from .reference import (
    DTYPES,
    FLOAT_DTYPES,
    INT_DTYPES,
    NUMPY,
    as_dtype,
    c_div,
    c_mod,
    is_float,
    sample,
    tolerance,
)

N = 32


@despina.jit
def binary_kernel(x_ptr, y_ptr, out_ptr, N: tl.constexpr, FN: tl.constexpr):
    offs = tl.arange(0, N)
    z = FN(tl.load(x_ptr + offs), tl.load(y_ptr + offs))
    tl.static_assert(z.dtype == out_ptr.dtype.element_ty, f"result is {z.dtype}")
    tl.store(out_ptr + offs, z)


@despina.jit
def unary_kernel(x_ptr, out_ptr, N: tl.constexpr, FN: tl.constexpr):
    offs = tl.arange(0, N)
    z = FN(tl.load(x_ptr + offs))
    tl.static_assert(z.dtype == out_ptr.dtype.element_ty, f"result is {z.dtype}")
    tl.store(out_ptr + offs, z)


def run_binary(device, fn, x, y, dtype, out_dtype):
    out = device.zeros(N, out_dtype)
    binary_kernel[(1,)](device.put(x, dtype), device.put(y, dtype), out, N=N, FN=fn)
    return device.get(out)


def run_unary(device, fn, x, dtype, out_dtype):
    out = device.zeros(N, out_dtype)
    unary_kernel[(1,)](device.put(x, dtype), out, N=N, FN=fn)
    return device.get(out)


def check(got, expected, dtype):
    if is_float(dtype):
        np.testing.assert_allclose(got.astype(np.float64), np.asarray(expected, np.float64), equal_nan=True,
                                   **tolerance(dtype))
    else:
        np.testing.assert_array_equal(got, expected)


def in_dtype(fn, dtype, *xs):
    """`fn(*xs)` computed the way a kernel of `dtype` does: in the dtype, bf16 via fp32 and rounding."""
    with np.errstate(all="ignore"):
        return as_dtype(fn(*xs), dtype)


# ---- binary operators ------------------------------------------------------------------------


@despina.jit
def op_add(a, b):
    return a + b


@despina.jit
def op_sub(a, b):
    return a - b


@despina.jit
def op_mul(a, b):
    return a * b


@despina.jit
def op_truediv(a, b):
    return a / b


@despina.jit
def op_floordiv(a, b):
    return a // b


@despina.jit
def op_mod(a, b):
    return a % b


@despina.jit
def op_and(a, b):
    return a & b


@despina.jit
def op_or(a, b):
    return a | b


@despina.jit
def op_xor(a, b):
    return a ^ b


@despina.jit
def op_lshift(a, b):
    return a << b


@despina.jit
def op_rshift(a, b):
    return a >> b


@despina.jit
def op_pow(a, b):
    return a**b


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("fn", "ref"), [(op_add, np.add), (op_sub, np.subtract), (op_mul, np.multiply)],
                         ids=["add", "sub", "mul"])
def test_add_sub_mul_wrap_like_the_dtype(device, dtype, fn, ref):
    x, y = sample(dtype, N, 1), sample(dtype, N, 2)
    check(run_binary(device, fn, x, y, dtype, dtype), in_dtype(ref, dtype, x, y), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_truediv(device, dtype):
    x, y = sample(dtype, N, 1), sample(dtype, N, 2, nonzero=True)
    if is_float(dtype):
        expected, out_dtype = in_dtype(np.divide, dtype, x, y), dtype
    else:
        expected, out_dtype = x.astype(np.float32) / y.astype(np.float32), "fp32"
    check(run_binary(device, op_truediv, x, y, dtype, out_dtype), expected, out_dtype)


def _division_operands(dtype):
    if is_float(dtype):
        return sample(dtype, N, 1), sample(dtype, N, 2, nonzero=True)
    info = np.iinfo(NUMPY[dtype])
    # INT_MIN // -1 overflows (undefined in C), so the dividend stays above INT_MIN.
    x = sample(dtype, N, 1, low=info.min + 1)
    y = sample(dtype, N, 2, nonzero=True)
    y[:4] = np.array([3, 7, 1, 2], dtype=y.dtype)
    if info.min < 0:
        y[4:8] = np.array([-3, -7, -1, -2], dtype=y.dtype)
    return x, y


@pytest.mark.parametrize("dtype", DTYPES)
def test_floordiv_truncates_toward_zero_for_ints(device, dtype):
    x, y = _division_operands(dtype)
    if is_float(dtype):
        expected = in_dtype(np.floor, dtype, in_dtype(np.divide, dtype, x, y))
    else:
        expected = c_div(x, y)
    check(run_binary(device, op_floordiv, x, y, dtype, dtype), expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_mod_takes_the_sign_of_the_dividend(device, dtype):
    x, y = _division_operands(dtype)
    expected = in_dtype(np.fmod, dtype, x, y) if is_float(dtype) else c_mod(x, y)
    check(run_binary(device, op_mod, x, y, dtype, dtype), expected, dtype)


@pytest.mark.parametrize(("dtype"), ["int8", "int32", "int64"])
def test_c_division_with_negative_operands(device, dtype):
    x = np.array([-7, 7, -7, 7, -1, 0, 6, -6] * 4, dtype=NUMPY[dtype])
    y = np.array([2, 2, -2, -2, 3, -5, -3, 3] * 4, dtype=NUMPY[dtype])
    np.testing.assert_array_equal(run_binary(device, op_floordiv, x, y, dtype, dtype), [-3, 3, 3, -3, 0, 0, -2, -2] * 4)
    np.testing.assert_array_equal(run_binary(device, op_mod, x, y, dtype, dtype), [-1, 1, -1, 1, -1, 0, 0, 0] * 4)


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize(("fn", "ref"), [(op_and, np.bitwise_and), (op_or, np.bitwise_or), (op_xor, np.bitwise_xor)],
                         ids=["and", "or", "xor"])
def test_bitwise(device, dtype, fn, ref):
    x, y = sample(dtype, N, 1), sample(dtype, N, 2)
    check(run_binary(device, fn, x, y, dtype, dtype), ref(x, y), dtype)


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize(("fn", "ref"), [(op_lshift, np.left_shift), (op_rshift, np.right_shift)], ids=["shl", "shr"])
def test_shifts_arithmetic_for_signed_logical_for_unsigned(device, dtype, fn, ref):
    bits = np.dtype(NUMPY[dtype]).itemsize * 8
    x, y = sample(dtype, N, 1), sample(dtype, N, 2, low=0, high=bits - 1)
    check(run_binary(device, fn, x, y, dtype, dtype), ref(x, y), dtype)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_pow_with_tensor_exponent(device, dtype):
    x, y = sample(dtype, N, 1, low=0.1, high=3.0), sample(dtype, N, 2, low=-2.0, high=2.0)
    expected = np.power(x.astype(np.float64), y.astype(np.float64))
    check(run_binary(device, op_pow, x, y, dtype, dtype), expected, dtype)


@despina.jit
def cube(a):
    return a**3


@pytest.mark.parametrize("dtype", DTYPES)
def test_pow_with_small_integer_literal_multiplies(device, dtype):
    x = sample(dtype, N, 1, low=-3, high=3) if is_float(dtype) else sample(dtype, N, 1)
    expected = in_dtype(lambda v: v * (v * v), dtype, x)
    check(run_unary(device, cube, x, dtype, dtype), expected, dtype)


# ---- comparisons -----------------------------------------------------------------------------


@despina.jit
def op_lt(a, b):
    return a < b


@despina.jit
def op_le(a, b):
    return a <= b


@despina.jit
def op_gt(a, b):
    return a > b


@despina.jit
def op_ge(a, b):
    return a >= b


@despina.jit
def op_eq(a, b):
    return a == b


@despina.jit
def op_ne(a, b):
    return a != b


COMPARISONS = [(op_lt, np.less), (op_le, np.less_equal), (op_gt, np.greater), (op_ge, np.greater_equal),
               (op_eq, np.equal), (op_ne, np.not_equal)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("fn", "ref"), COMPARISONS, ids=["lt", "le", "gt", "ge", "eq", "ne"])
def test_comparisons_give_int1(device, dtype, fn, ref):
    x, y = sample(dtype, N, 1), sample(dtype, N, 2)
    y[::3] = x[::3]
    np.testing.assert_array_equal(run_binary(device, fn, x, y, dtype, "int1"), ref(x, y))


# ---- unary operators -------------------------------------------------------------------------


@despina.jit
def op_neg(a):
    return -a


@despina.jit
def op_invert(a):
    return ~a


@despina.jit
def op_not(a):
    return not a


@despina.jit
def op_pos(a):
    return +a


@pytest.mark.parametrize("dtype", DTYPES)
def test_negation(device, dtype):
    x = sample(dtype, N, 1)
    with np.errstate(all="ignore"):
        check(run_unary(device, op_neg, x, dtype, dtype), -x, dtype)
    check(run_unary(device, op_pos, x, dtype, dtype), x, dtype)


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_invert(device, dtype):
    x = sample(dtype, N, 1)
    check(run_unary(device, op_invert, x, dtype, dtype), np.invert(x), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_logical_not_of_a_tile(device, dtype):
    x = sample(dtype, N, 1)
    x[::4] = 0
    np.testing.assert_array_equal(run_unary(device, op_not, x, dtype, "int1"), x == 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_abs(device, dtype):
    x = sample(dtype, N, 1)
    with np.errstate(all="ignore"):
        check(run_unary(device, tl.abs, x, dtype, dtype), np.abs(x), dtype)


# ---- math builtins ---------------------------------------------------------------------------

MATH = {
    "exp": (tl.exp, np.exp, -4.0, 4.0),
    "exp2": (tl.exp2, np.exp2, -4.0, 4.0),
    "log": (tl.log, np.log, 0.1, 8.0),
    "log2": (tl.log2, np.log2, 0.1, 8.0),
    "sqrt": (tl.sqrt, np.sqrt, 0.0, 8.0),
    "rsqrt": (tl.rsqrt, lambda v: 1 / np.sqrt(v), 0.1, 8.0),
    "sin": (tl.sin, np.sin, -4.0, 4.0),
    "cos": (tl.cos, np.cos, -4.0, 4.0),
    "sigmoid": (tl.sigmoid, lambda v: 1 / (1 + np.exp(-v)), -6.0, 6.0),
    "erf": (tl.erf, np.vectorize(math.erf), -2.0, 2.0),
    "floor": (tl.floor, np.floor, -4.0, 4.0),
    "ceil": (tl.ceil, np.ceil, -4.0, 4.0),
}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", list(MATH))
def test_math_functions(device, name, dtype):
    fn, ref, low, high = MATH[name]
    x = sample(dtype, N, 1, low=low, high=high)
    check(run_unary(device, fn, x, dtype, dtype), ref(x.astype(np.float64)), dtype)


@pytest.mark.parametrize("name", ["exp", "sqrt", "floor"])
def test_math_on_integers_computes_in_fp32(device, name):
    fn, ref, _, _ = MATH[name]
    x = np.arange(N, dtype=np.int32) % 5
    check(run_unary(device, fn, x, "int32", "fp32"), ref(x.astype(np.float64)), "fp32")


@despina.jit
def methods_kernel(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = x.exp() + x.exp2() + x.log() + x.log2() + x.sqrt() + x.rsqrt() + x.sin() + x.cos()
    y += x.sigmoid() + x.erf() + x.floor() + x.ceil() + x.abs() + abs(x)
    tl.store(out_ptr + offs, y)


def test_math_tensor_methods(device):
    x = sample("fp64", N, 1, low=0.5, high=3.0)
    out = device.zeros(N, "fp64")
    methods_kernel[(1,)](device.put(x), out, N=N)
    expected = sum(ref(x) for _, ref, _, _ in MATH.values()) + 2 * np.abs(x)
    np.testing.assert_allclose(device.get(out), expected, rtol=1e-12)


@despina.jit
def fma_kernel(x_ptr, y_ptr, z_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    r = tl.fma(tl.load(x_ptr + offs), tl.load(y_ptr + offs), tl.load(z_ptr + offs))
    tl.static_assert(r.dtype == out_ptr.dtype.element_ty)
    tl.store(out_ptr + offs, r)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_fma(device, dtype):
    x, y, z = sample(dtype, N, 1), sample(dtype, N, 2), sample(dtype, N, 3)
    out = device.zeros(N, dtype)
    fma_kernel[(1,)](device.put(x, dtype), device.put(y, dtype), device.put(z, dtype), out, N=N)
    f = [v.astype(np.float64) for v in (x, y, z)]
    check(device.get(out), f[0] * f[1] + f[2], dtype)


@despina.jit
def fma_exact_kernel(out_ptr):
    # (1 + 2^-12)^2 - (1 + 2^-11) = 2^-24: zero if x * y were rounded to fp32 before the add.
    x = tl.full((), 1.0 + 2.0**-12, tl.float32)
    tl.store(out_ptr, tl.fma(x, x, -(1.0 + 2.0**-11)))


def test_fma_rounds_once(device):
    out = device.zeros(1, "fp32")
    fma_exact_kernel[(1,)](out)
    assert device.get(out)[0] == np.float32(2.0**-24)


@despina.jit
def cdiv_kernel(x_ptr, y_ptr, out_ptr, N: tl.constexpr, B: tl.constexpr):
    offs = tl.arange(0, N)
    q = tl.cdiv(tl.load(x_ptr + offs), tl.load(y_ptr + offs))
    tl.static_assert(q.dtype == x_ptr.dtype.element_ty)
    tl.store(out_ptr + offs, q.to(tl.int64) + tl.cdiv(N, B) * 1000)


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_cdiv(device, dtype):
    x = sample(dtype, N, 1, low=0, high=100)
    y = sample(dtype, N, 2, low=1, high=9)
    out = device.zeros(N, "int64")
    cdiv_kernel[(1,)](device.put(x), device.put(y), out, N=N, B=5)
    expected = (x.astype(np.int64) + y - 1) // y + (-(-N // 5)) * 1000
    np.testing.assert_array_equal(device.get(out), expected)
    assert despina.cdiv(10, 3) == 4 and tl.cdiv(9, 3) == 3


@pytest.mark.parametrize("dtype", ["int32", "uint32", "int64", "uint64"])
def test_umulhi_is_the_high_half_of_the_unsigned_product(device, dtype):
    x, y = sample(dtype, N, 1), sample(dtype, N, 2)
    bits = np.dtype(NUMPY[dtype]).itemsize * 8
    unsigned = NUMPY["uint" + str(bits)]
    ux, uy = x.view(unsigned).astype(object), y.view(unsigned).astype(object)
    expected = np.array((ux * uy) >> bits, dtype=object).astype(unsigned).view(NUMPY[dtype])
    check(run_binary(device, tl.umulhi, x, y, dtype, dtype), expected, dtype)


@despina.jit
def fdiv_ieee(a, b):
    return tl.fdiv(a, b, ieee_rounding=True)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("fn", [tl.div_rn, tl.fdiv, fdiv_ieee], ids=["div_rn", "fdiv", "fdiv_ieee"])
def test_float_divisions(device, dtype, fn):
    x, y = sample(dtype, N, 1), sample(dtype, N, 2, nonzero=True)
    check(run_binary(device, fn, x, y, dtype, dtype), x.astype(np.float64) / y.astype(np.float64), dtype)


def test_div_rn_is_correctly_rounded(device):
    x, y = sample("fp32", N, 1), sample("fp32", N, 2, nonzero=True)
    np.testing.assert_array_equal(run_binary(device, tl.div_rn, x, y, "fp32", "fp32"), x / y)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("fn", "ref"), [(tl.maximum, np.maximum), (tl.minimum, np.minimum)], ids=["max", "min"])
def test_maximum_minimum(device, dtype, fn, ref):
    x, y = sample(dtype, N, 1), sample(dtype, N, 2)
    check(run_binary(device, fn, x, y, dtype, dtype), ref(x, y), dtype)


@despina.jit
def nan_kernel(x_ptr, y_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    tl.store(out_ptr + offs, tl.maximum(x, y, propagate_nan=tl.PropagateNan.ALL))
    tl.store(out_ptr + N + offs, tl.minimum(x, y, propagate_nan=tl.PropagateNan.ALL))
    tl.store(out_ptr + 2 * N + offs, tl.clamp(x, -1.0, 1.0, propagate_nan=tl.PropagateNan.ALL))


def test_propagate_nan_all(device):
    x = np.array([np.nan, 1.0, 2.0, np.nan] * (N // 4), np.float32)
    y = np.array([0.0, np.nan, 3.0, np.nan] * (N // 4), np.float32)
    out = device.zeros(3 * N, "fp32")
    nan_kernel[(1,)](device.put(x), device.put(y), out, N=N)
    got = device.get(out).reshape(3, N)
    np.testing.assert_array_equal(got[0], np.maximum(x, y))
    np.testing.assert_array_equal(got[1], np.minimum(x, y))
    np.testing.assert_array_equal(got[2], np.clip(x, -1, 1))


@despina.jit
def clamp_kernel(x_ptr, lo_ptr, hi_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    lo = tl.load(lo_ptr + offs)
    r = tl.clamp(tl.load(x_ptr + offs), lo, tl.maximum(lo, tl.load(hi_ptr + offs)))
    tl.store(out_ptr + offs, r)


@pytest.mark.parametrize("dtype", DTYPES)
def test_clamp(device, dtype):
    x, lo, hi = sample(dtype, N, 1), sample(dtype, N, 2), sample(dtype, N, 3)
    out = device.zeros(N, dtype)
    clamp_kernel[(1,)](device.put(x, dtype), device.put(lo, dtype), device.put(hi, dtype), out, N=N)
    check(device.get(out), np.minimum(np.maximum(x, lo), np.maximum(lo, hi)), dtype)


@despina.jit
def where_kernel(x_ptr, y_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    tl.store(out_ptr + offs, tl.where(x > y, x, y))
    tl.store(out_ptr + N + offs, tl.where(offs % 2 == 0, x, 1))
    tl.store(out_ptr + 2 * N + offs, tl.where(offs < 5, 3, y))
    tl.store(out_ptr + 3 * N + offs, tl.where(True, x, y))


@pytest.mark.parametrize("dtype", DTYPES)
def test_where(device, dtype):
    x, y = sample(dtype, N, 1), sample(dtype, N, 2)
    out = device.zeros(4 * N, dtype)
    where_kernel[(1,)](device.put(x, dtype), device.put(y, dtype), out, N=N)
    offs = np.arange(N)
    expected = np.concatenate([np.where(x > y, x, y), np.where(offs % 2 == 0, x, 1), np.where(offs < 5, 3, y), x])
    check(device.get(out), expected.astype(x.dtype), dtype)


@despina.jit
def where_broadcast_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    rows = tl.arange(0, M)[:, None]
    cols = tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + cols)
    tl.store(out_ptr + rows * N + cols, tl.where(rows > 1, x, -x))


def test_where_broadcasts_condition_and_values(device):
    x = np.arange(8, dtype=np.float32)
    out = device.zeros((4, 8), "fp32")
    where_broadcast_kernel[(1,)](device.put(x), out, M=4, N=8)
    np.testing.assert_array_equal(device.get(out), np.where(np.arange(4)[:, None] > 1, x, -x))


# ---- integer wrap-around, literals and type promotion ----------------------------------------


@despina.jit
def wrap_kernel(out8_ptr, outu8_ptr, out32_ptr, outu64_ptr):
    a = tl.full((4,), 127, tl.int8)
    tl.store(out8_ptr + tl.arange(0, 4), a + 1)
    b = tl.zeros((4,), tl.uint8)
    tl.store(outu8_ptr + tl.arange(0, 4), b - 1)
    c = tl.full((4,), 2**30, tl.int32)
    tl.store(out32_ptr + tl.arange(0, 4), c * 4 + 1)
    d = tl.full((4,), 2**63, tl.uint64)
    tl.store(outu64_ptr + tl.arange(0, 4), d + d + 5)


def test_integer_wrap_around(device):
    outs = [device.zeros(4, d) for d in ("int8", "uint8", "int32", "uint64")]
    wrap_kernel[(1,)](*outs)
    got = [device.get(o)[0] for o in outs]
    assert got == [-128, 255, 1, 5]


def computation_type(a: str, b: str, div: bool = False) -> str:
    """Triton's computation type of a binary op on tensors of dtypes `a` and `b`."""
    if "fp64" in (a, b):
        return "fp64"
    if "fp32" in (a, b):
        return "fp32"
    if is_float(a) and is_float(b):
        return a if a == b else "fp32"
    if is_float(a) or is_float(b):
        return a if is_float(a) else b
    if div:
        return "fp32"
    wa, wb = np.dtype(NUMPY[a]).itemsize, np.dtype(NUMPY[b]).itemsize
    sa, sb = a.startswith("int"), b.startswith("int")
    if sa == sb:
        return a if wa >= wb else b
    unsigned, signed = (a, b) if not sa else (b, a)
    return unsigned if np.dtype(NUMPY[unsigned]).itemsize >= np.dtype(NUMPY[signed]).itemsize else signed


@despina.jit
def promote_kernel(x_ptr, y_ptr, ADD: tl.constexpr, DIV: tl.constexpr, CMP: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 4))
    y = tl.load(y_ptr + tl.arange(0, 4))
    tl.static_assert((x + y).dtype == ADD, f"x + y is {(x + y).dtype}")
    tl.static_assert((y * x).dtype == ADD, f"y * x is {(y * x).dtype}")
    tl.static_assert((x / y).dtype == DIV, f"x / y is {(x / y).dtype}")
    tl.static_assert(tl.where(x > y, x, y).dtype == ADD)
    tl.static_assert(tl.maximum(x, y).dtype == ADD)
    tl.static_assert((x < y).dtype == CMP)


@pytest.mark.parametrize("b", DTYPES)
@pytest.mark.parametrize("a", DTYPES)
def test_promotion_of_two_tensors(device, trace, a, b):
    x, y = device.zeros(4, a), device.zeros(4, b)
    trace(promote_kernel, x, y, ADD=tl.dtype(computation_type(a, b)), DIV=tl.dtype(computation_type(a, b, True)),
          CMP=tl.int1)


@despina.jit
def literal_kernel(x_ptr, INT: tl.constexpr, FLOAT: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 4))
    tl.static_assert((x + 1).dtype == INT, f"x + 1 is {(x + 1).dtype}")
    tl.static_assert((3 - x).dtype == INT, f"3 - x is {(3 - x).dtype}")
    tl.static_assert((x * True).dtype == INT)
    tl.static_assert((x + 1.5).dtype == FLOAT, f"x + 1.5 is {(x + 1.5).dtype}")
    tl.static_assert((2.0 * x).dtype == FLOAT)
    tl.static_assert((x > 1).dtype == tl.int1)


@pytest.mark.parametrize("dtype", DTYPES)
def test_python_literals_are_weak(device, trace, dtype):
    trace(literal_kernel, device.zeros(4, dtype), INT=tl.dtype(dtype), FLOAT=tl.dtype(dtype if is_float(dtype) else "fp32"))


@despina.jit
def scalar_arg_kernel(x_ptr, n, f, flag, EXPECT_N: tl.constexpr, EXPECT_F: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 4))
    tl.static_assert((x + n).dtype == EXPECT_N, f"x + n is {(x + n).dtype}")
    tl.static_assert((x + f).dtype == EXPECT_F, f"x + f is {(x + f).dtype}")
    tl.static_assert(n.dtype == tl.int32 and f.dtype == tl.float32 and flag.dtype == tl.int1)


@pytest.mark.parametrize("dtype", DTYPES)
def test_scalar_arguments_are_typed_not_weak(device, trace, dtype):
    trace(scalar_arg_kernel, device.zeros(4, dtype), 3, 0.5, True, EXPECT_N=tl.dtype(computation_type(dtype, "int32")),
          EXPECT_F=tl.dtype(computation_type(dtype, "fp32")))


@despina.jit
def mixed_kernel(a_ptr, b_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    tl.store(out_ptr + offs, a + b)


@pytest.mark.parametrize(("a", "b", "out"), [
    ("fp16", "bf16", "fp32"), ("int32", "uint32", "uint32"), ("int8", "uint8", "uint8"), ("int64", "uint32", "int64"),
    ("uint16", "int32", "int32"), ("int8", "fp16", "fp16"), ("int64", "bf16", "bf16"), ("uint8", "fp64", "fp64"),
])
def test_mixed_dtypes_at_run_time(device, a, b, out):
    x, y = sample(a, N, 1, low=0, high=9).round(), sample(b, N, 2, low=0, high=9).round()
    res = device.zeros(N, out)
    mixed_kernel[(1,)](device.put(x, a), device.put(y, b), res, N=N)
    check(device.get(res), as_dtype(x.astype(np.float64) + y.astype(np.float64), out), out)


@despina.jit
def signedness_kernel(a_ptr, b_ptr, out_ptr, lt_ptr):
    a = tl.load(a_ptr + tl.arange(0, 4))
    b = tl.load(b_ptr + tl.arange(0, 4))
    tl.store(out_ptr + tl.arange(0, 4), a + b)
    tl.store(lt_ptr + tl.arange(0, 4), a < b)


def test_signed_and_unsigned_of_equal_width_compute_unsigned(device):
    a = np.array([-1, -2, 5, 0], np.int32)
    b = np.array([1, 1, 1, 1], np.uint32)
    out, lt = device.zeros(4, "uint32"), device.zeros(4, "int1")
    signedness_kernel[(1,)](device.put(a), device.put(b), out, lt)
    np.testing.assert_array_equal(device.get(out), [0, 0xFFFFFFFF, 6, 1])
    np.testing.assert_array_equal(device.get(lt), [False, False, False, True])


@despina.jit
def scalar_logic_kernel(out_ptr, a, b):
    tl.store(out_ptr, (a > 0) and (b > 0))
    tl.store(out_ptr + 1, (a > 0) or (b > 0))
    tl.store(out_ptr + 2, not (a > 0))
    tl.store(out_ptr + 3, a == b)
    tl.store(out_ptr + 4, a != b)
    tl.store(out_ptr + 5, a <= b)


@pytest.mark.parametrize(("a", "b"), [(1, 2), (-1, 2), (3, -3), (-2, -2)])
def test_comparisons_and_logic_on_scalars(device, a, b):
    out = device.zeros(6, "int1")
    scalar_logic_kernel[(1,)](out, a, b)
    np.testing.assert_array_equal(device.get(out), [a > 0 and b > 0, a > 0 or b > 0, not a > 0, a == b, a != b, a <= b])
