"""gather, histogram and what is built on gather (flip, sort, topk, bitonic_merge), interleave and
swizzle2d against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import despina
import despina.language as tl

from .reference import NUMPY, sample
from .test_shape import load_nd, store_nd

SORT_DTYPES = ("int8", "uint16", "int32", "int64", "fp16", "bf16", "fp32", "fp64")


@despina.jit
def gather_kernel(src_ptr, idx_ptr, out_ptr, SRC: tl.constexpr, IDX: tl.constexpr, AXIS: tl.constexpr):
    src = load_nd(src_ptr, SRC)
    idx = load_nd(idx_ptr, IDX)
    store_nd(out_ptr, tl.gather(src, idx, AXIS))


@pytest.mark.parametrize("axis,src_shape,idx_shape", [(0, (16,), (32,)), (0, (8, 4), (16, 4)), (1, (8, 16), (8, 4)),
                                                      (-1, (4, 8), (4, 8))])
@pytest.mark.parametrize("dtype", ["int8", "int32", "fp16", "fp32", "int64"])
def test_gather(device, dtype, axis, src_shape, idx_shape):
    src = sample(dtype, int(np.prod(src_shape)), seed=1).reshape(src_shape)
    idx = np.random.default_rng(2).integers(0, src_shape[axis], idx_shape).astype(np.int32)
    out = device.zeros(idx_shape, dtype)
    gather_kernel[(1,)](device.put(src, dtype), device.put(idx), out, SRC=src_shape, IDX=idx_shape, AXIS=axis)
    np.testing.assert_array_equal(device.get(out).reshape(idx_shape), np.take_along_axis(src, idx, axis=axis))


@despina.jit
def gather_method_kernel(src_ptr, idx_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(src_ptr + offs).gather(tl.load(idx_ptr + offs), 0))


@pytest.mark.parametrize("index_dtype", ["int8", "uint8", "int64", "uint32"])
def test_gather_index_dtypes(device, index_dtype):
    src = np.arange(64, dtype=np.float32) * 1.5
    idx = np.random.default_rng(3).integers(0, 64, 64).astype(NUMPY[index_dtype])
    out = device.zeros(64, "fp32")
    gather_method_kernel[(1,)](device.put(src), device.put(idx), out, N=64)
    np.testing.assert_array_equal(device.get(out), src[idx.astype(np.int64)])


def test_gather_out_of_range_is_reported_by_the_interpreter(monkeypatch):
    monkeypatch.setenv("DESPINA_INTERPRET", "1")
    src, idx, out = np.zeros(16, np.float32), np.full(16, 16, np.int32), np.zeros(16, np.float32)
    with pytest.raises(despina.KernelRuntimeError, match=r"tl.gather index 16 is out of range for axis 0 of extent 16"):
        gather_method_kernel[(1,)](src, idx, out, N=16)


@despina.jit
def gather_float_index(s, i):
    return tl.gather(s, i.to(tl.float32), 0)


@despina.jit
def gather_rank(s, i):
    return tl.gather(s, i[:, None], 0)


@despina.jit
def gather_shape(s, i):
    return tl.gather(s[:, None], tl.broadcast_to(i[:, None], (16, 2)), 0)


@despina.jit
def gather_axis(s, i):
    return tl.gather(s, i, 1)


@despina.jit
def gather_bad_kernel(src_ptr, idx_ptr, FN: tl.constexpr):
    offs = tl.arange(0, 16)
    FN(tl.load(src_ptr + offs), tl.load(idx_ptr + offs))


@pytest.mark.parametrize("bad,message", [
    (gather_float_index, "index must be an integer tile"),
    (gather_rank, "must have the source's rank"),
    (gather_shape, "in every dimension but axis 0"),
    (gather_axis, "dim 1 is out of range"),
])
def test_gather_rejects_bad_operands(device, bad, message):
    with pytest.raises(despina.CompilationError, match=message):
        gather_bad_kernel[(1,)](device.put(np.zeros(16, np.float32)), device.put(np.zeros(16, np.int32)), FN=bad)


@despina.jit
def histogram_kernel(x_ptr, out_ptr, N: tl.constexpr, BINS: tl.constexpr, MASKED: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    if MASKED:
        h = tl.histogram(x, BINS, mask=offs % 3 != 0)
    else:
        h = x.histogram(BINS)
    tl.static_assert(h.dtype == tl.int32)
    tl.store(out_ptr + tl.arange(0, BINS), h)


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("dtype,n,bins", [("int32", 256, 16), ("int8", 64, 8), ("uint8", 512, 256),
                                          ("int64", 1024, 32), ("uint16", 16, 512)])
def test_histogram(device, dtype, n, bins, masked):
    x = np.random.default_rng(4).integers(-4 if dtype.startswith("int") else 0, bins + 4, n).astype(NUMPY[dtype])
    out = device.zeros(bins, "int32")
    histogram_kernel[(1,)](device.put(x), out, N=n, BINS=bins, MASKED=masked)
    keep = (np.arange(n) % 3 != 0) if masked else np.ones(n, bool)
    counted = x[keep].astype(np.int64)
    expected = np.bincount(counted[(counted >= 0) & (counted < bins)], minlength=bins)
    np.testing.assert_array_equal(device.get(out), expected)


@despina.jit
def unary_nd_kernel(x_ptr, out_ptr, SHAPE: tl.constexpr, OUT: tl.constexpr, FN: tl.constexpr):
    store_nd(out_ptr, FN(load_nd(x_ptr, SHAPE)))


def run_unary(device, fn, x, dtype, out_shape=None):
    out_shape = out_shape or x.shape
    out = device.zeros(out_shape, dtype)
    unary_nd_kernel[(1,)](device.put(x, dtype), out, SHAPE=tuple(x.shape), OUT=tuple(out_shape), FN=fn)
    return device.get(out).reshape(out_shape)


@despina.jit
def flip_last(x):
    return tl.flip(x)


@despina.jit
def flip_0(x):
    return x.flip(0)


@despina.jit
def flip_neg2(x):
    return tl.flip(x, -2)


@pytest.mark.parametrize("fn,shape,axis", [(flip_last, (64,), -1), (flip_last, (4, 8), -1), (flip_0, (8, 4), 0),
                                           (flip_neg2, (2, 8, 4), -2), (flip_0, (1,), 0)])
@pytest.mark.parametrize("dtype", ["int16", "bf16", "fp32"])
def test_flip(device, fn, shape, axis, dtype):
    x = sample(dtype, int(np.prod(shape)), seed=5).reshape(shape)
    np.testing.assert_array_equal(run_unary(device, fn, x, dtype), np.flip(x, axis))


@despina.jit
def sort_asc(x):
    return tl.sort(x)


@despina.jit
def sort_desc(x):
    return tl.sort(x, descending=True)


@despina.jit
def sort_dim0(x):
    return x.sort(0)


@pytest.mark.parametrize("shape", [(2,), (128,), (4, 32), (2, 2, 16)])
@pytest.mark.parametrize("dtype", SORT_DTYPES)
def test_sort(device, dtype, shape):
    x = sample(dtype, int(np.prod(shape)), seed=6).reshape(shape)
    np.testing.assert_array_equal(run_unary(device, sort_asc, x, dtype), np.sort(x, axis=-1))
    np.testing.assert_array_equal(run_unary(device, sort_desc, x, dtype), np.flip(np.sort(x, axis=-1), -1))


def test_sort_other_dim_with_ties(device):
    x = np.random.default_rng(7).integers(0, 4, (16, 8)).astype(np.int32)
    np.testing.assert_array_equal(run_unary(device, sort_dim0, x, "int32"), np.sort(x, axis=0))


@despina.jit
def top4(x):
    return tl.topk(x, 4)


@despina.jit
def top_all(x):
    return tl.topk(x, x.shape[-1])


@pytest.mark.parametrize("dtype", ["int32", "fp32", "fp16"])
def test_topk(device, dtype):
    x = sample(dtype, 4 * 32, seed=8).reshape(4, 32)
    expected = np.flip(np.sort(x, axis=-1), -1)
    np.testing.assert_array_equal(run_unary(device, top4, x, dtype, (4, 4)), expected[:, :4])
    np.testing.assert_array_equal(run_unary(device, top_all, x, dtype), expected)


@despina.jit
def merge_asc(x):
    return tl.bitonic_merge(x)


@despina.jit
def merge_desc(x):
    return tl.bitonic_merge(x, descending=True)


def test_bitonic_merge(device):
    rng = np.random.default_rng(9)
    rows = []
    for _ in range(4):  # bitonic: ascending then descending halves
        v = rng.permutation(64)[:32].astype(np.int32)
        rows.append(np.concatenate([np.sort(v[:16]), np.sort(v[16:])[::-1]]))
    x = np.stack(rows)
    np.testing.assert_array_equal(run_unary(device, merge_asc, x, "int32"), np.sort(x, axis=-1))
    np.testing.assert_array_equal(run_unary(device, merge_desc, x, "int32"), np.sort(x, axis=-1)[:, ::-1])


def test_sort_rejects_a_dim_out_of_range(device):
    @despina.jit
    def k(x_ptr):
        x = tl.load(x_ptr + tl.arange(0, 8))
        tl.sort(tl.reshape(x, (8,)), dim=3)

    with pytest.raises(despina.CompilationError, match="dim 3 is out of range for a tile of rank 1"):
        k[(1,)](device.put(np.zeros(8, np.float32)))


@despina.jit
def interleave_kernel(a_ptr, b_ptr, out_ptr, SHAPE: tl.constexpr):
    c = tl.interleave(load_nd(a_ptr, SHAPE), load_nd(b_ptr, SHAPE))
    tl.static_assert(c.shape == SHAPE[:-1] + (2 * SHAPE[-1],))
    store_nd(out_ptr, c)


@pytest.mark.parametrize("shape", [(8,), (4, 8), (2, 2, 4)])
@pytest.mark.parametrize("dtype", ["int8", "fp32"])
def test_interleave(device, dtype, shape):
    a = sample(dtype, int(np.prod(shape)), seed=10).reshape(shape)
    b = sample(dtype, int(np.prod(shape)), seed=11).reshape(shape)
    out_shape = shape[:-1] + (2 * shape[-1],)
    out = device.zeros(out_shape, dtype)
    interleave_kernel[(1,)](device.put(a, dtype), device.put(b, dtype), out, SHAPE=shape)
    expected = np.stack([a, b], axis=-1).reshape(out_shape)
    np.testing.assert_array_equal(device.get(out).reshape(out_shape), expected)


@despina.jit
def swizzle_kernel(out_i, out_j, SIZE_I: tl.constexpr, SIZE_J: tl.constexpr, SIZE_G: tl.constexpr):
    i = tl.program_id(0)
    j = tl.program_id(1)
    new_i, new_j = tl.swizzle2d(i, j, SIZE_I, SIZE_J, SIZE_G)
    tl.store(out_i + i * SIZE_J + j, new_i)
    tl.store(out_j + i * SIZE_J + j, new_j)


@pytest.mark.parametrize("size_i", [4, 5])
def test_swizzle2d(device, size_i):
    size_j, size_g = 4, 2
    oi, oj = device.zeros((size_i, size_j), "int32"), device.zeros((size_i, size_j), "int32")
    swizzle_kernel[(size_i, size_j)](oi, oj, SIZE_I=size_i, SIZE_J=size_j, SIZE_G=size_g)
    new_i, new_j = device.get(oi).reshape(size_i, size_j), device.get(oj).reshape(size_i, size_j)
    placed = np.full((size_i, size_j), -1)
    placed[new_i, new_j] = np.arange(size_i * size_j).reshape(size_i, size_j)
    # Triton's docstring example: groups of 2 rows numbered column-major; a last group of 1 row stays.
    expected = [[0, 2, 4, 6], [1, 3, 5, 7], [8, 10, 12, 14], [9, 11, 13, 15], [16, 17, 18, 19]]
    np.testing.assert_array_equal(placed, expected[:size_i])
