"""`tl.math` (Triton's math namespace), `sqrt_rn`, `softmax` and `reduce_or` against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import despina
import despina.language as tl

from .reference import sample, tolerance
from .test_arith import N, run_unary

MATH_NAMES = ("abs", "ceil", "cos", "div_rn", "erf", "exp", "exp2", "fdiv", "floor", "fma", "log", "log2", "rsqrt",
              "sin", "sqrt", "sqrt_rn", "umulhi")


def test_math_namespace_has_triton_s_functions():
    assert sorted(tl.math.__all__) == sorted(MATH_NAMES)
    for name in MATH_NAMES:
        assert getattr(tl.math, name) is getattr(tl, name)


@despina.jit
def math_namespace_kernel(x_ptr, y_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x, y = tl.load(x_ptr + offs), tl.load(y_ptr + offs)
    r = tl.math.exp2(x) + tl.math.log(y) + tl.math.rsqrt(y) + tl.math.fma(x, y, 1.0) + tl.math.div_rn(x, y)
    r += tl.math.fdiv(x, y) + tl.math.abs(x) + tl.math.floor(x) + tl.math.sqrt_rn(y)
    tl.store(out_ptr + offs, r)


def test_math_namespace_in_a_kernel(device):
    x, y = sample("fp32", N, 1), sample("fp32", N, 2, low=0.5, high=4.0)
    out = device.zeros(N, "fp32")
    math_namespace_kernel[(1,)](device.put(x), device.put(y), out, N=N)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    expected = np.exp2(x64) + np.log(y64) + 1 / np.sqrt(y64) + (x64 * y64 + 1) + 2 * x64 / y64 + np.abs(x64)
    expected += np.floor(x64) + np.sqrt(y64)
    np.testing.assert_allclose(device.get(out), expected, rtol=1e-5, atol=1e-5)


@despina.jit
def divisions_kernel(x_ptr, y_ptr, slash_ptr, rn_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x, y = tl.load(x_ptr + offs), tl.load(y_ptr + offs)
    tl.store(slash_ptr + offs, x / y)
    tl.store(rn_ptr + offs, tl.div_rn(x, y))


def test_div_rn_is_correctly_rounded_and_slash_within_two_ulp(device):
    """fp32 `/` is Triton's `div.full.f32` on the GPU, at most 2 ulp from the rounded quotient (the
    interpreter divides exactly); `tl.div_rn` is IEEE division, bit for bit NumPy's."""
    rng = np.random.default_rng(5)
    x = (sample("fp32", N, 6) * np.exp2(rng.integers(-60, 60, N))).astype(np.float32)
    y = (sample("fp32", N, 7, nonzero=True) * np.exp2(rng.integers(-60, 60, N))).astype(np.float32)
    slash, rn = device.zeros(N, "fp32"), device.zeros(N, "fp32")
    divisions_kernel[(1,)](device.put(x), device.put(y), slash, rn, N=N)
    exact = x / y
    np.testing.assert_array_equal(device.get(rn), exact)
    assert np.all(np.abs(device.get(slash).astype(np.float64) - exact) <= 2 * np.spacing(np.abs(exact)))


@pytest.mark.parametrize("dtype", ["fp32", "fp64"])
def test_sqrt_rn_is_correctly_rounded(device, dtype):
    x = sample(dtype, N, 3, low=0.0, high=1e6)
    np.testing.assert_array_equal(run_unary(device, tl.sqrt_rn, x, dtype, dtype), np.sqrt(x))


@despina.jit
def sqrt_rn_half(x_ptr):
    tl.sqrt_rn(tl.load(x_ptr))


def test_sqrt_rn_rejects_half_precision(device):
    with pytest.raises(despina.CompilationError, match="sqrt_rn needs fp32 or fp64 values, got fp16"):
        sqrt_rn_half[(1,)](device.put(np.zeros(1, np.float16)))


@despina.jit
def softmax_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, DIM: tl.constexpr, IEEE: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, tl.softmax(x, DIM, keep_dims=True, ieee_rounding=IEEE))


@pytest.mark.parametrize("ieee", [False, True])
@pytest.mark.parametrize("dim", [0, 1])
def test_softmax(device, dim, ieee):
    x = sample("fp32", 8 * 16, 4).reshape(8, 16)
    out = device.zeros((8, 16), "fp32")
    softmax_kernel[(1,)](device.put(x), out, M=8, N=16, DIM=dim, IEEE=ieee)
    e = np.exp(x.astype(np.float64) - x.max(axis=dim, keepdims=True))
    np.testing.assert_allclose(device.get(out).reshape(8, 16), e / e.sum(axis=dim, keepdims=True), **tolerance("fp32"))


@despina.jit
def softmax_method_kernel(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs).softmax())


def test_softmax_method_defaults_to_dim_0(device):
    x = sample("fp32", N, 5)
    out = device.zeros(N, "fp32")
    softmax_method_kernel[(1,)](device.put(x), out, N=N)
    e = np.exp(x.astype(np.float64) - x.max())
    np.testing.assert_allclose(device.get(out), e / e.sum(), **tolerance("fp32"))


@despina.jit
def reduce_or_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    tl.store(out_ptr + tl.arange(0, M), tl.reduce_or(x, 1))
    tl.store(out_ptr + M + tl.arange(0, N), x.reduce_or(0))


@pytest.mark.parametrize("dtype", ["int8", "uint32", "int64"])
def test_reduce_or(device, dtype):
    x = sample(dtype, 8 * 16, 6).reshape(8, 16)
    x &= x.dtype.type(0x11)
    out = device.zeros(8 + 16, dtype)
    reduce_or_kernel[(1,)](device.put(x), out, M=8, N=16)
    got = device.get(out)
    np.testing.assert_array_equal(got[:8], np.bitwise_or.reduce(x, axis=1))
    np.testing.assert_array_equal(got[8:], np.bitwise_or.reduce(x, axis=0))
