"""Elementwise rules against NumPy / Python-integer references, for every dtype."""

from __future__ import annotations

import operator

import numpy as np
import pytest
import scipy.special

from .elementwise_kernel import apply
from .reference import FLOATS, INTS, NUMPY, bf16, sample, wrap

N = 64


def _round(x: np.ndarray, dtype: str) -> np.ndarray:
    return bf16(x.astype(np.float32)) if dtype == "bf16" else x.astype(NUMPY[dtype])


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("op, fn", [("add", operator.add), ("sub", operator.sub), ("mul", operator.mul)])
def test_int_arithmetic_wraps(dtype: str, op: str, fn: object) -> None:
    a, b = sample(dtype, N, 1), sample(dtype, N, 2)
    expected = wrap([fn(int(x), int(y)) for x, y in zip(a, b)], dtype)  # type: ignore[operator]
    np.testing.assert_array_equal(apply(op, [dtype] * 2, dtype, [a, b]), expected)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "div_rn", "fdiv", "rem"])
def test_float_arithmetic_rounds_once(dtype: str, op: str) -> None:
    a, b = sample(dtype, N, 1), sample(dtype, N, 2, nonzero=True)
    fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "rem": np.fmod}.get(op, np.divide)
    expected = _round(fn(a.astype(np.float64), b.astype(np.float64)), dtype)
    np.testing.assert_array_equal(apply(op, [dtype] * 2, dtype, [a, b]), expected)


def _c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


@pytest.mark.parametrize("dtype", INTS)
def test_integer_division_truncates_like_c(dtype: str) -> None:
    a, b = sample(dtype, N, 3), sample(dtype, N, 4, nonzero=True)
    if dtype.startswith("int"):
        a[4:8], b[4:8] = [-7, 7, -7, np.iinfo(NUMPY[dtype]).min], [2, -2, -2, -1]
    quotient = wrap([_c_div(int(x), int(y)) for x, y in zip(a, b)], dtype)
    remainder = wrap([int(x) - _c_div(int(x), int(y)) * int(y) for x, y in zip(a, b)], dtype)
    np.testing.assert_array_equal(apply("floordiv", [dtype] * 2, dtype, [a, b]), quotient)
    np.testing.assert_array_equal(apply("rem", [dtype] * 2, dtype, [a, b]), remainder)
    if dtype.startswith("int"):
        np.testing.assert_array_equal(quotient[4:7], [-3, -3, 3])
        np.testing.assert_array_equal(remainder[4:7], [-1, 1, -1])


@pytest.mark.parametrize("dtype", INTS)
def test_shifts_clamp_like_ptx(dtype: str) -> None:
    bits = np.iinfo(NUMPY[dtype]).bits
    a = sample(dtype, N, 5)
    amount = (np.arange(N) % (bits + 6)).astype(NUMPY[dtype])
    signed = dtype.startswith("int")
    left = wrap([int(x) << int(s) if s < bits else 0 for x, s in zip(a, amount)], dtype)
    right = wrap([int(x) >> min(int(s), bits - 1 if signed else bits) for x, s in zip(a, amount)], dtype)
    np.testing.assert_array_equal(apply("shl", [dtype] * 2, dtype, [a, amount]), left)
    np.testing.assert_array_equal(apply("shr", [dtype] * 2, dtype, [a, amount]), right)


@pytest.mark.parametrize("dtype", INTS)
def test_umulhi_is_the_high_half_of_the_unsigned_product(dtype: str) -> None:
    bits = np.iinfo(NUMPY[dtype]).bits
    a, b = sample(dtype, N, 6), sample(dtype, N, 7)
    mod = 1 << bits
    expected = wrap([((int(x) % mod) * (int(y) % mod)) >> bits for x, y in zip(a, b)], dtype)
    np.testing.assert_array_equal(apply("umulhi", [dtype] * 2, dtype, [a, b]), expected)


@pytest.mark.parametrize("dtype", INTS)
def test_bitwise(dtype: str) -> None:
    a, b = sample(dtype, N, 8), sample(dtype, N, 9)
    np.testing.assert_array_equal(apply("and", [dtype] * 2, dtype, [a, b]), a & b)
    np.testing.assert_array_equal(apply("or", [dtype] * 2, dtype, [a, b]), a | b)
    np.testing.assert_array_equal(apply("xor", [dtype] * 2, dtype, [a, b]), a ^ b)
    np.testing.assert_array_equal(apply("not", [dtype], dtype, [a]), ~a)


@pytest.mark.parametrize("dtype", INTS + FLOATS)
def test_neg_and_abs(dtype: str) -> None:
    a = sample(dtype, N, 10)
    if dtype in FLOATS:
        np.testing.assert_array_equal(apply("neg", [dtype], dtype, [a]), -a)
        np.testing.assert_array_equal(apply("abs", [dtype], dtype, [a]), np.abs(a))
        return
    np.testing.assert_array_equal(apply("neg", [dtype], dtype, [a]), wrap([-int(x) for x in a], dtype))
    absolute = a if dtype.startswith("u") else wrap([abs(int(x)) for x in a], dtype)
    np.testing.assert_array_equal(apply("abs", [dtype], dtype, [a]), absolute)


@pytest.mark.parametrize("dtype", INTS + FLOATS)
@pytest.mark.parametrize("pred", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_cmp(dtype: str, pred: str) -> None:
    a, b = sample(dtype, N, 11), sample(dtype, N, 12)
    b[::3] = a[::3]
    if dtype in FLOATS:
        a[5], b[6], a[7], b[7] = np.nan, np.nan, np.nan, np.nan
    fn = {
        "eq": np.equal,
        "ne": np.not_equal,
        "lt": np.less,
        "le": np.less_equal,
        "gt": np.greater,
        "ge": np.greater_equal,
    }[pred]
    got = apply("cmp", [dtype] * 2, "int1", [a, b], pred=pred)
    np.testing.assert_array_equal(got, fn(a, b))
    if dtype in FLOATS:
        assert got[7] == (pred == "ne")


@pytest.mark.parametrize("dtype", FLOATS)
def test_maximum_minimum_nan_handling(dtype: str) -> None:
    a, b = sample(dtype, N, 13), sample(dtype, N, 14)
    a[0], b[1], a[2], b[2] = np.nan, np.nan, np.nan, np.nan
    np.testing.assert_array_equal(apply("maximum", [dtype] * 2, dtype, [a, b]), np.fmax(a, b))
    np.testing.assert_array_equal(apply("minimum", [dtype] * 2, dtype, [a, b], propagate_nan="none"), np.fmin(a, b))
    np.testing.assert_array_equal(apply("maximum", [dtype] * 2, dtype, [a, b], propagate_nan="all"), np.maximum(a, b))
    np.testing.assert_array_equal(apply("minimum", [dtype] * 2, dtype, [a, b], propagate_nan="all"), np.minimum(a, b))


@pytest.mark.parametrize("dtype", INTS)
def test_integer_maximum_minimum(dtype: str) -> None:
    a, b = sample(dtype, N, 15), sample(dtype, N, 16)
    np.testing.assert_array_equal(apply("maximum", [dtype] * 2, dtype, [a, b]), np.maximum(a, b))
    np.testing.assert_array_equal(apply("minimum", [dtype] * 2, dtype, [a, b]), np.minimum(a, b))


_UNARY = {
    "exp": np.exp,
    "exp2": np.exp2,
    "log": np.log,
    "log2": np.log2,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "sin": np.sin,
    "cos": np.cos,
    "erf": scipy.special.erf,
    "floor": np.floor,
    "ceil": np.ceil,
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", sorted(_UNARY))
def test_float_unary(dtype: str, op: str) -> None:
    a = sample(dtype, N, 17)
    if op in ("log", "log2", "sqrt", "rsqrt"):
        a = np.abs(a) + _round(np.array([0.5]), dtype)[0]
    expected = _round(_UNARY[op](a.astype(np.float64)), dtype)
    got = apply(op, [dtype], dtype, [a])
    assert got.dtype == expected.dtype
    ulps = {"fp16": 1e-3, "bf16": 8e-3, "fp32": 3e-7, "fp64": 1e-15}[dtype]
    np.testing.assert_allclose(got, expected, rtol=ulps, atol=ulps)


def test_unary_of_special_values() -> None:
    a = np.array([-1.0, 0.0, np.inf, -np.inf, np.nan, -0.0], dtype=np.float32)
    got = apply("sqrt", ["fp32"], "fp32", [np.tile(a, 4)], programs=4)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(got, np.tile(np.sqrt(a), 4))
    assert np.isnan(apply("log", ["fp32"], "fp32", [np.full(4, -1.0, np.float32)]))[0]


@pytest.mark.parametrize("dtype", FLOATS)
def test_fma_rounds_once(dtype: str) -> None:
    a, b, c = sample(dtype, N, 18), sample(dtype, N, 19), sample(dtype, N, 20)
    if dtype == "fp32":
        # a * b + c with an exact product: the single rounding shows against two roundings.
        a[0], b[0], c[0] = 1 + 2.0**-12, 1 + 2.0**-12, -1.0
        assert np.float32(a[0]) * np.float32(b[0]) + np.float32(c[0]) != np.float32(2.0**-11 + 2.0**-24)
    expected = _round(a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64), dtype)
    np.testing.assert_array_equal(apply("fma", [dtype] * 3, dtype, [a, b, c]), expected)
    if dtype == "fp32":
        assert apply("fma", [dtype] * 3, dtype, [a, b, c])[0] == np.float32(2.0**-11 + 2.0**-24)


@pytest.mark.parametrize("dtype", FLOATS)
def test_pow(dtype: str) -> None:
    a, b = np.abs(sample(dtype, N, 21)) + 0.5, sample(dtype, N, 22) / 4
    a, b = _round(a, dtype), _round(b, dtype)
    expected = _round(np.power(a.astype(np.float64), b.astype(np.float64)), dtype)
    np.testing.assert_allclose(
        apply("pow", [dtype] * 2, dtype, [a, b]), expected, rtol=1e-2 if dtype in ("fp16", "bf16") else 1e-6
    )


def test_bf16_results_are_rounded() -> None:
    a = bf16(np.full(N, 1.0))
    b = bf16(np.full(N, 2.0**-8))  # 1 + 2**-8 is a tie between two bf16 values: rounds to even, 1.0
    np.testing.assert_array_equal(apply("add", ["bf16"] * 2, "bf16", [a, b]), np.ones(N, np.float32))
    b = bf16(np.full(N, 3 * 2.0**-9))  # 1 + 1.5 * 2**-8 rounds up to 1 + 2**-7
    np.testing.assert_array_equal(apply("add", ["bf16"] * 2, "bf16", [a, b]), np.full(N, 1 + 2.0**-7, np.float32))


def test_int1_arithmetic_is_modulo_two() -> None:
    a = np.array([0, 0, 1, 1] * 4, dtype=np.bool_)
    b = np.array([0, 1, 0, 1] * 4, dtype=np.bool_)
    np.testing.assert_array_equal(apply("add", ["int1"] * 2, "int1", [a, b]), a ^ b)
    np.testing.assert_array_equal(apply("sub", ["int1"] * 2, "int1", [a, b]), a ^ b)
    np.testing.assert_array_equal(apply("mul", ["int1"] * 2, "int1", [a, b]), a & b)
    np.testing.assert_array_equal(apply("not", ["int1"], "int1", [a]), ~a)


@pytest.mark.parametrize("dtype", ["int8", "uint64", "fp16", "bf16", "fp64"])
def test_select(dtype: str) -> None:
    c = np.arange(N) % 3 == 0
    a, b = sample(dtype, N, 23), sample(dtype, N, 24)
    np.testing.assert_array_equal(apply("select", ["int1", dtype, dtype], dtype, [c, a, b]), np.where(c, a, b))
