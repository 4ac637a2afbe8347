"""Math builtins against NumPy, over every dtype (the operators are test_arith.py's)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import despina
import despina.language as tl

from .reference import DTYPES, FLOAT_DTYPES, INT_DTYPES, NUMPY, sample
from .test_arith import N, check, run_binary, run_unary

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


@despina.jit
def where_index_kernel(x_ptr, out_ptr, shift, n, BLOCK: tl.constexpr, PRED: tl.constexpr, UNSIGNED: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        at = rows[:, None] * n + cols[None, :]
        x = tl.load(x_ptr + at)
        left = rows[:, None] + 0
        right = cols[None, :] + shift
        if UNSIGNED:
            left, right = left.to(tl.uint32), right.to(tl.uint32)
        if PRED == "ge":
            keep = left >= right
        elif PRED == "gt":
            keep = left > right
        elif PRED == "le":
            keep = left <= right
        else:
            keep = left < right
        keep = keep & (cols[None, :] < n - 3)
        tl.store(out_ptr + at, tl.where(keep, x, -1.0))


@pytest.mark.parametrize("unsigned", [False, True])
@pytest.mark.parametrize("pred", ["ge", "gt", "le", "lt"])
def test_where_on_index_compares(device, pred, unsigned):
    """A causal-style mask over 4x4 tiles of 64x64, a loop over a row of them in each program, shifted so
    that tiles are wholly true, wholly false or mixed (in a loop, the GPU lowering decides whole tiles with
    a branch: lower/select.py), ANDed with a bound on the columns broadcast from one row. Unsigned, a negative shift wraps inside a tile, where
    the columns' order is not the values' (the lowering takes only signed compares)."""
    block, n = 64, 256
    x = np.arange(n * n, dtype=np.float32).reshape(n, n)
    rows, cols = np.arange(n)[:, None], np.arange(n)[None, :]
    compare = {"ge": np.greater_equal, "gt": np.greater, "le": np.less_equal, "lt": np.less}[pred]
    for shift in (-70, 0, 5, 64, 129):
        out = device.zeros((n, n), "fp32")
        where_index_kernel[(n // block,)](device.put(x), out, shift, n, BLOCK=block, PRED=pred, UNSIGNED=unsigned)
        left, right = (rows.astype(np.uint32), (cols + shift).astype(np.uint32)) if unsigned else (rows, cols + shift)
        keep = compare(left, right)
        np.testing.assert_array_equal(device.get(out), np.where(keep & (cols < n - 3), x, -1.0), err_msg=str(shift))
