"""Reductions, scans and `tl.dot` against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import despina
import despina.language as tl
from despina.compiler.ir.printer import print_module

from .reference import DTYPES, FLOAT_DTYPES, INT_DTYPES, NUMPY, as_dtype, is_float, sample, wrap

M, N = 8, 16


@despina.jit
def reduce_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, FN: tl.constexpr, AXIS: tl.constexpr,
                  KEEP: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    r = FN(x, AXIS, keep_dims=KEEP)
    tl.static_assert(r.dtype == out_ptr.dtype.element_ty, f"result is {r.dtype}")
    if AXIS is None:
        tl.static_assert(r.shape == ((1, 1) if KEEP else ()))
        tl.store(out_ptr + tl.arange(0, 1)[None, :], r)
    elif AXIS == 0:
        tl.static_assert(r.shape == ((1, N) if KEEP else (N,)))
        tl.store(out_ptr + tl.arange(0, N), tl.reshape(r, (N,)))
    else:
        tl.static_assert(r.shape == ((M, 1) if KEEP else (M,)))
        tl.store(out_ptr + tl.arange(0, M), tl.reshape(r, (M,)))


def run_reduce(device, fn, x, dtype, out_dtype, axis, keep=False):
    size = {None: 1, 0: N, 1: M}[axis]
    out = device.zeros(size, out_dtype)
    reduce_kernel[(1,)](device.put(x, dtype), out, M=M, N=N, FN=fn, AXIS=axis, KEEP=keep)
    return device.get(out)


def _matrix(dtype: str, seed: int = 0) -> np.ndarray:
    """Values whose sums are exact in every float dtype: small integers (full range for ints)."""
    if is_float(dtype):
        return as_dtype(np.random.default_rng(seed).integers(-8, 9, (M, N)), dtype)
    return sample(dtype, M * N, seed).reshape(M, N)


def _sum_dtype(dtype: str) -> str:
    if dtype in ("int8", "int16"):
        return "int32"
    if dtype in ("uint8", "uint16"):
        return "uint32"
    return dtype


@pytest.mark.parametrize("axis", [0, 1, None])
@pytest.mark.parametrize("dtype", DTYPES)
def test_sum(device, dtype, axis):
    x = _matrix(dtype)
    out_dtype = _sum_dtype(dtype)
    got = run_reduce(device, tl.sum, x, dtype, out_dtype, axis)
    exact = np.sum(x.astype(np.float64) if is_float(dtype) else x.astype(object), axis=axis)
    expected = as_dtype(exact, dtype) if is_float(dtype) else wrap(exact, NUMPY[out_dtype])
    np.testing.assert_array_equal(got, np.atleast_1d(expected))


@pytest.mark.parametrize(("fn", "ref"), [(tl.max, np.max), (tl.min, np.min)], ids=["max", "min"])
@pytest.mark.parametrize("axis", [0, 1, None])
@pytest.mark.parametrize("dtype", DTYPES)
def test_max_min(device, dtype, axis, fn, ref):
    x = sample(dtype, M * N, 3).reshape(M, N)
    np.testing.assert_array_equal(run_reduce(device, fn, x, dtype, dtype, axis), np.atleast_1d(ref(x, axis=axis)))


@despina.jit
def scaled_max_kernel(x_ptr, max_ptr, diff_ptr, scale, M: tl.constexpr, N: tl.constexpr, FN: tl.constexpr,
                      MASK: tl.constexpr):
    rows, cols = tl.arange(0, M)[:, None], tl.arange(0, N)[None, :]
    y = tl.load(x_ptr + rows * N + cols) * scale
    if MASK:
        y = tl.where(cols < rows, y, -float("inf") if FN == tl.max else float("inf"))
    m = FN(y, 1)
    tl.store(max_ptr + tl.arange(0, M), m)
    tl.store(diff_ptr + rows * N + cols, y - m[:, None])


@pytest.mark.parametrize("mask", [False, True])
@pytest.mark.parametrize(("fn", "ref"), [(tl.max, np.max), (tl.min, np.min)], ids=["max", "min"])
def test_the_extreme_of_a_scaled_tile_is_exact_for_every_scale(device, fn, ref, mask):
    """A scale > 0 specializes the kernel and leaves the reduction (`passes/scales.py`); one kernel launched with
    scales of either sign, 0, +-inf and a subnormal gives each the extreme of the tile as scaled element by
    element (row 0 fully masked)."""
    x = np.random.default_rng(5).standard_normal((M, N)).astype(np.float32)
    rows, cols = np.arange(M)[:, None], np.arange(N)[None, :]
    for scale in (0.5, -2.0, 3.0, 0.0, 1e-40, float("inf"), -0.5, float("-inf"), 0.25):
        y = x * np.float32(scale)
        if mask:
            y = np.where(cols < rows, y, np.float32(-np.inf if fn is tl.max else np.inf))
        out, diff = device.zeros(M, "fp32"), device.zeros((M, N), "fp32")
        scaled_max_kernel[(1,)](device.put(x), out, diff, scale, M=M, N=N, FN=fn, MASK=mask)
        m = ref(y, axis=1)
        np.testing.assert_array_equal(device.get(out), m, err_msg=f"scale {scale}")
        with np.errstate(invalid="ignore"):
            want = y - m[:, None]
        # y - m may be one FMA on the GPU: exact but for y's rounding
        np.testing.assert_allclose(device.get(diff), want, rtol=0, atol=1e-6 * np.abs(y[np.isfinite(y)]).max(initial=0),
                                   equal_nan=True, err_msg=f"scale {scale}")


@pytest.mark.parametrize(("fn", "ref"), [(tl.argmax, np.argmax), (tl.argmin, np.argmin)], ids=["argmax", "argmin"])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("dtype", DTYPES)
def test_argmax_argmin_pick_the_first_of_ties(device, dtype, axis, fn, ref):
    x = sample(dtype, M * N, 4, low=0, high=3).reshape(M, N)
    if is_float(dtype):
        x = np.round(x)
    np.testing.assert_array_equal(run_reduce(device, fn, x, dtype, "int32", axis), ref(x, axis=axis))


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("axis", [0, 1, None])
def test_xor_sum(device, dtype, axis):
    x = sample(dtype, M * N, 5).reshape(M, N)
    np.testing.assert_array_equal(run_reduce(device, tl.xor_sum, x, dtype, dtype, axis),
                                  np.atleast_1d(np.bitwise_xor.reduce(x, axis=axis)))


@pytest.mark.parametrize(("fn", "axis"), [(fn, axis) for fn in (tl.sum, tl.max, tl.argmin) for axis in (0, 1, None)
                                          if not (fn is tl.argmin and axis is None)])
def test_keep_dims(device, fn, axis):
    x = _matrix("int32", 6)
    out_dtype = "int32"
    ref = {tl.sum: np.sum, tl.max: np.max, tl.argmin: np.argmin}[fn]
    got = run_reduce(device, fn, x, "int32", out_dtype, axis, keep=True)
    np.testing.assert_array_equal(got, wrap(np.ravel(ref(x.astype(object), axis=axis, keepdims=True)), np.int32))


@despina.jit
def reduce_options_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    value, index = tl.max(x, 1, return_indices=True)
    tl.store(out_ptr + tl.arange(0, M), value)
    tl.store(out_ptr + M + tl.arange(0, M), index)
    value, index = x.min(0, return_indices=True, return_indices_tie_break_left=True)
    tl.store(out_ptr + 2 * M + tl.arange(0, N), value)
    tl.store(out_ptr + 2 * M + N + tl.arange(0, N), index)
    wide = tl.sum(x.to(tl.int8), 1, dtype=tl.int64)
    tl.static_assert(wide.dtype == tl.int64)
    tl.store(out_ptr + 2 * M + 2 * N + tl.arange(0, M), wide)
    tl.store(out_ptr + 3 * M + 2 * N + tl.arange(0, M), x.sum(1) + x.argmax(1) + x.argmin(axis=1))
    tl.store(out_ptr + 4 * M + 2 * N + tl.arange(0, N), x.max(axis=0) - x.xor_sum(0))
    tl.store(out_ptr + 4 * M + 3 * N, x.sum())


def test_reduction_options_and_methods(device):
    x = _matrix("int32", 7)
    out = device.zeros(4 * M + 3 * N + 1, "int64")
    reduce_options_kernel[(1,)](device.put(x), out, M=M, N=N)
    got = device.get(out)
    big = x.astype(object)
    expected = np.concatenate([x.max(1), x.argmax(1), x.min(0), x.argmin(0), x.astype(np.int8).astype(np.int64).sum(1),
                               wrap(big.sum(1) + x.argmax(1) + x.argmin(1), np.int32),
                               wrap(big.max(0) - np.bitwise_xor.reduce(x, 0), np.int32), [wrap(big.sum(), np.int32)]])
    np.testing.assert_array_equal(got, expected)


@despina.jit
def max_abs(a, b):
    return tl.where(tl.abs(a) > tl.abs(b), a, b)


@despina.jit
def argmax_combine(v1, i1, v2, i2):
    take_first = (v1 > v2) | ((v1 == v2) & (i1 < i2))
    return tl.where(take_first, v1, v2), tl.where(take_first, i1, i2)


@despina.jit
def custom_reduce_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    tl.store(out_ptr + tl.arange(0, M), tl.reduce(x, 1, max_abs))
    idx = tl.broadcast_to(tl.arange(0, N)[None, :], (M, N))
    value, index = tl.reduce((x, idx), 1, argmax_combine)
    tl.store(out_ptr + M + tl.arange(0, M), value)
    tl.store(out_ptr + 2 * M + tl.arange(0, M), index.to(tl.float32))
    tl.store(out_ptr + 3 * M + tl.arange(0, N), x.reduce(0, max_abs, keep_dims=True).reshape(N))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_reduce_with_a_combine_function(device, dtype):
    x = _matrix(dtype, 8)
    out = device.zeros(3 * M + N, dtype)
    custom_reduce_kernel[(1,)](device.put(x, dtype), out, M=M, N=N)

    def ref_max_abs(a, axis):
        return np.take_along_axis(a, np.expand_dims(np.argmax(np.abs(a), axis=axis), axis), axis).squeeze(axis)

    expected = np.concatenate([ref_max_abs(x, 1), x.max(1), x.argmax(1), ref_max_abs(x, 0)])
    got = device.get(out)
    # Ties of |a| between a and -a may resolve either way: compare magnitudes there.
    np.testing.assert_array_equal(np.abs(got[:M]), np.abs(expected[:M]))
    np.testing.assert_array_equal(got[M:3 * M], expected[M:3 * M])
    np.testing.assert_array_equal(np.abs(got[3 * M:]), np.abs(expected[3 * M:]))


@despina.jit
def scan_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, FN: tl.constexpr, AXIS: tl.constexpr,
                REVERSE: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    r = FN(tl.load(x_ptr + offs), AXIS, reverse=REVERSE)
    tl.static_assert(r.dtype == out_ptr.dtype.element_ty, f"result is {r.dtype}")
    tl.store(out_ptr + offs, r)


def ref_scan(op, x, axis, reverse):
    if reverse:
        return np.flip(op.accumulate(np.flip(x, axis), axis=axis, dtype=x.dtype), axis)
    return op.accumulate(x, axis=axis, dtype=x.dtype)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("dtype", DTYPES)
def test_cumsum(device, dtype, axis, reverse):
    x = _matrix(dtype, 9)
    out_dtype = _sum_dtype(dtype)
    out = device.zeros((M, N), out_dtype)
    scan_kernel[(1,)](device.put(x, dtype), out, M=M, N=N, FN=tl.cumsum, AXIS=axis, REVERSE=reverse)
    with np.errstate(all="ignore"):
        expected = ref_scan(np.add, x.astype(NUMPY[out_dtype]), axis, reverse)
    np.testing.assert_array_equal(device.get(out), expected)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("dtype", DTYPES)
def test_cumprod(device, dtype, axis, reverse):
    rng = np.random.default_rng(10)
    if is_float(dtype):
        x = as_dtype(rng.choice([-2.0, -1.0, 0.5, 1.0, 2.0], (M, N)), dtype)
    else:
        x = sample(dtype, M * N, 10).reshape(M, N)
    out = device.zeros((M, N), dtype)
    scan_kernel[(1,)](device.put(x, dtype), out, M=M, N=N, FN=tl.cumprod, AXIS=axis, REVERSE=reverse)
    with np.errstate(all="ignore"):
        expected = ref_scan(np.multiply, x, axis, reverse)
    np.testing.assert_array_equal(device.get(out), expected)


@despina.jit
def maximum_combine(a, b):
    return tl.maximum(a, b)


@despina.jit
def affine_combine(a1, b1, a2, b2):
    # Composition of x -> a * x + b maps: associative, not commutative.
    return a1 * a2, b1 * a2 + b2


@despina.jit
def custom_scan_kernel(x_ptr, a_ptr, b_ptr, out_ptr, N: tl.constexpr, REVERSE: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, tl.associative_scan(x, 0, maximum_combine, reverse=REVERSE))
    a, b = tl.associative_scan((tl.load(a_ptr + offs), tl.load(b_ptr + offs)), 0, affine_combine, reverse=REVERSE)
    tl.store(out_ptr + N + offs, a)
    tl.store(out_ptr + 2 * N + offs, b)
    tl.store(out_ptr + 3 * N + offs, x.associative_scan(0, maximum_combine) + x.cumsum(0) + x.cumprod(0) * 0)


@pytest.mark.parametrize("reverse", [False, True])
def test_associative_scan_with_tuples_and_a_non_commutative_combine(device, reverse):
    rng = np.random.default_rng(11)
    x = rng.integers(-50, 50, N).astype(np.float64)
    a = rng.choice([-1.0, 1.0, 2.0, 0.5], N)
    b = rng.integers(-4, 5, N).astype(np.float64)
    out = device.zeros(4 * N, "fp64")
    custom_scan_kernel[(1,)](device.put(x), device.put(a), device.put(b), out, N=N, REVERSE=reverse)
    got = device.get(out).reshape(4, N)
    order = range(N - 1, -1, -1) if reverse else range(N)
    ea, eb = np.empty(N), np.empty(N)
    acc_a, acc_b = 1.0, 0.0
    for i in order:
        acc_a, acc_b = acc_a * a[i], acc_b * a[i] + b[i]
        ea[i], eb[i] = acc_a, acc_b
    np.testing.assert_array_equal(got[0], ref_scan(np.maximum, x, 0, reverse))
    np.testing.assert_array_equal(got[1], ea)
    np.testing.assert_array_equal(got[2], eb)
    np.testing.assert_array_equal(got[3], np.maximum.accumulate(x) + np.cumsum(x))


# ---- dot -------------------------------------------------------------------------------------


@despina.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, out_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
               ACC: tl.constexpr, PRECISION: tl.constexpr, OUT_DTYPE: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    if ACC:
        c = tl.dot(a, b, tl.load(c_ptr + rm[:, None] * BN + rn[None, :]), input_precision=PRECISION)
    else:
        c = tl.dot(a, b, input_precision=PRECISION, out_dtype=OUT_DTYPE)
    tl.static_assert(c.dtype == out_ptr.dtype.element_ty, f"dot gives {c.dtype}")
    tl.store(out_ptr + rm[:, None] * BN + rn[None, :], c)


DOT_TOLERANCE = {"fp16": 2e-3, "bf16": 1e-2, "fp32": 1e-5, "int8": 0}


def _dot_operands(dtype: str, m: int, k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    if dtype == "int8":
        rng = np.random.default_rng(12)
        return rng.integers(-128, 128, (m, k), dtype=np.int8), rng.integers(-128, 128, (k, n), dtype=np.int8)
    return sample(dtype, m * k, 12, low=-1, high=1).reshape(m, k), sample(dtype, k * n, 13, low=-1, high=1).reshape(k, n)


@pytest.mark.parametrize("acc", [False, True])
@pytest.mark.parametrize(("m", "n", "k"), [(16, 16, 16), (32, 16, 64), (16, 32, 32)])
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32", "int8"])
def test_dot_2d(device, dtype, m, n, k, acc):
    a, b = _dot_operands(dtype, m, k, n)
    out_dtype = "int32" if dtype == "int8" else "fp32"
    c = np.arange(m * n).reshape(m, n).astype(NUMPY[out_dtype]) % 7
    out = device.zeros((m, n), out_dtype)
    dot_kernel[(1,)](device.put(a, dtype), device.put(b, dtype), device.put(c), out, BM=m, BN=n, BK=k, ACC=acc,
                     PRECISION="ieee", OUT_DTYPE=tl.dtype(out_dtype))
    expected = a.astype(np.float64) @ b.astype(np.float64) + (c if acc else 0)
    if dtype == "int8":
        np.testing.assert_array_equal(device.get(out), expected)
    else:
        np.testing.assert_allclose(device.get(out), expected, rtol=DOT_TOLERANCE[dtype], atol=DOT_TOLERANCE[dtype] * k)


@pytest.mark.parametrize(("precision", "rtol"), [("ieee", 1e-5), ("tf32", 5e-3), ("tf32x3", 1e-5), (None, 5e-3)])
def test_dot_input_precision(device, trace, precision, rtol):
    a, b = _dot_operands("fp32", 16, 32, 16)
    out = device.zeros((16, 16), "fp32")
    meta = dict(BM=16, BN=16, BK=32, ACC=False, PRECISION=precision, OUT_DTYPE=tl.float32)
    dot_kernel[(1,)](device.put(a), device.put(b), out, out, **meta)
    np.testing.assert_allclose(device.get(out), a.astype(np.float64) @ b, rtol=rtol, atol=rtol * 32)
    text = print_module(trace(dot_kernel, a, b, out, out, **meta), locs=False)
    assert f'input_precision = "{precision or "tf32"}"' in text


def test_dot_out_dtype_fp16(device):
    a, b = _dot_operands("fp16", 16, 16, 16)
    out = device.zeros((16, 16), "fp16")
    dot_kernel[(1,)](device.put(a), device.put(b), out, out, BM=16, BN=16, BK=16, ACC=False, PRECISION=None,
                     OUT_DTYPE=tl.float16)
    np.testing.assert_allclose(device.get(out), a.astype(np.float64) @ b, rtol=1e-2, atol=1e-2)


@despina.jit
def batched_dot_kernel(a_ptr, b_ptr, out_ptr, B: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rb = tl.arange(0, B)[:, None, None]
    rm = tl.arange(0, BM)[None, :, None]
    rn = tl.arange(0, BN)[None, None, :]
    rk_col = tl.arange(0, BK)[None, None, :]
    rk_row = tl.arange(0, BK)[None, :, None]
    a = tl.load(a_ptr + rb * BM * BK + rm * BK + rk_col)
    b = tl.load(b_ptr + rb * BK * BN + rk_row * BN + rn)
    tl.store(out_ptr + rb * BM * BN + rm * BN + rn, tl.dot(a, b))


@pytest.mark.parametrize("dtype", ["fp16", "fp32", "int8"])
def test_dot_3d_batched(device, dtype):
    a, b = _dot_operands(dtype, 2 * 16, 16, 32)
    a, b = a.reshape(2, 16, 16), b.reshape(16, 2, 16).transpose(1, 0, 2).copy()
    out_dtype = "int32" if dtype == "int8" else "fp32"
    out = device.zeros((2, 16, 16), out_dtype)
    batched_dot_kernel[(1,)](device.put(a, dtype), device.put(b, dtype), out, B=2, BM=16, BN=16, BK=16)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    tol = 5e-3 if dtype == "fp32" else DOT_TOLERANCE[dtype]  # fp32 defaults to tf32 inputs
    np.testing.assert_allclose(device.get(out), expected, rtol=tol, atol=tol * 16)


@despina.jit
def matmul_loop_kernel(a_ptr, b_ptr, out_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(k + rk)[None, :] < K, other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :], mask=(k + rk)[:, None] < K, other=0.0)
        acc = tl.dot(a, b, acc, allow_tf32=False)
    tl.store(out_ptr + rm[:, None] * BN + rn[None, :], acc)


def test_dot_accumulates_in_a_masked_k_loop(device):
    k = 40
    a, b = _dot_operands("fp32", 16, k, 16)
    out = device.zeros((16, 16), "fp32")
    matmul_loop_kernel[(1,)](device.put(a), device.put(b), out, k, BM=16, BN=16, BK=16)
    np.testing.assert_allclose(device.get(out), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
