"""Operators and math builtins against NumPy, over every dtype; Triton's type promotion."""

from __future__ import annotations

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
