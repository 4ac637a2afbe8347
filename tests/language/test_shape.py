"""Tile creation and shape builtins against NumPy: arange, zeros, full, cat, broadcast, reshape,
trans/permute, split/join and `None`/`:` indexing."""

from __future__ import annotations

import numpy as np
import pytest

import despina
import despina.language as tl

from .reference import DTYPES, as_dtype, sample


@despina.jit
def load_nd(ptr, SHAPE: tl.constexpr):
    if len(SHAPE) == 1:
        offs = tl.arange(0, SHAPE[0])
    elif len(SHAPE) == 2:
        offs = tl.arange(0, SHAPE[0])[:, None] * SHAPE[1] + tl.arange(0, SHAPE[1])[None, :]
    else:
        offs = (tl.arange(0, SHAPE[0])[:, None, None] * (SHAPE[1] * SHAPE[2])
                + tl.arange(0, SHAPE[1])[None, :, None] * SHAPE[2] + tl.arange(0, SHAPE[2])[None, None, :])
    return tl.load(ptr + offs)


@despina.jit
def store_nd(ptr, t):
    if len(t.shape) == 1:
        offs = tl.arange(0, t.shape[0])
    elif len(t.shape) == 2:
        offs = tl.arange(0, t.shape[0])[:, None] * t.shape[1] + tl.arange(0, t.shape[1])[None, :]
    else:
        offs = (tl.arange(0, t.shape[0])[:, None, None] * (t.shape[1] * t.shape[2])
                + tl.arange(0, t.shape[1])[None, :, None] * t.shape[2] + tl.arange(0, t.shape[2])[None, None, :])
    tl.store(ptr + offs, t)


@despina.jit
def shape_kernel(x_ptr, out_ptr, SHAPE: tl.constexpr, FN: tl.constexpr):
    store_nd(out_ptr, FN(load_nd(x_ptr, SHAPE)))


def run_shape(device, fn, x, out_shape, dtype="fp32"):
    out = device.zeros(out_shape, dtype)
    shape_kernel[(1,)](device.put(x, dtype), out, SHAPE=tuple(x.shape), FN=fn)
    return device.get(out).reshape(out_shape)


@despina.jit
def t_trans(x):
    return tl.trans(x)


@despina.jit
def t_T(x):
    return x.T


@despina.jit
def t_trans_dims(x):
    return tl.trans(x, 2, 0, 1)


@despina.jit
def t_permute(x):
    return tl.permute(x, (1, 2, 0))


@despina.jit
def t_permute_method(x):
    return x.permute(2, 1, 0)


@despina.jit
def t_reshape(x):
    return tl.reshape(x, (2, 4, 4))


@despina.jit
def t_reshape_varargs(x):
    return x.reshape(32)


@despina.jit
def t_ravel(x):
    return tl.ravel(x)


@despina.jit
def t_expand_dims(x):
    return tl.expand_dims(x, 0)


@despina.jit
def t_expand_dims_last(x):
    return x.expand_dims(-1)


@despina.jit
def t_expand_dims_many(x):
    return tl.sum(tl.expand_dims(x, (0, 2)), 0)


@despina.jit
def t_index_none(x):
    return x[:, None]


@despina.jit
def t_index_none_first(x):
    return x[None, :]


@despina.jit
def t_index_none_middle(x):
    return x[:, None, :]


@despina.jit
def t_broadcast_to(x):
    return tl.broadcast_to(x[None, :], (4, 8))


@despina.jit
def t_broadcast_to_method(x):
    return x[:, None].broadcast_to(8, 2)


@despina.jit
def t_broadcast(x):
    a, b = tl.broadcast(x[:, None], x[None, :])
    return a * 10 + b


@despina.jit
def t_split(x):
    a, b = tl.split(x)
    return a - b


@despina.jit
def t_split_method(x):
    a, b = x.split()
    return b


@despina.jit
def t_join(x):
    return tl.join(x, x * 2)


@despina.jit
def t_split_join(x):
    a, b = tl.split(tl.join(x, -x))
    return a + b * 3


ROW = np.arange(8, dtype=np.float32)
MAT = np.arange(32, dtype=np.float32).reshape(4, 8)
CUBE = np.arange(32, dtype=np.float32).reshape(2, 4, 4)
PAIRS = np.arange(16, dtype=np.float32).reshape(8, 2)


@pytest.mark.parametrize(("fn", "x", "ref"), [
    (t_trans, MAT, lambda x: x.T),
    (t_T, MAT, lambda x: x.T),
    (t_trans_dims, CUBE, lambda x: x.transpose(2, 0, 1)),
    (t_permute, CUBE, lambda x: x.transpose(1, 2, 0)),
    (t_permute_method, CUBE, lambda x: x.transpose(2, 1, 0)),
    (t_reshape, MAT, lambda x: x.reshape(2, 4, 4)),
    (t_reshape_varargs, CUBE, lambda x: x.reshape(32)),
    (t_ravel, CUBE, lambda x: x.ravel()),
    (t_expand_dims, MAT, lambda x: x[None]),
    (t_expand_dims_last, ROW, lambda x: x[:, None]),
    (t_expand_dims_many, ROW, lambda x: x[None, :, None].sum(0)),
    (t_index_none, ROW, lambda x: x[:, None]),
    (t_index_none_first, ROW, lambda x: x[None, :]),
    (t_index_none_middle, MAT, lambda x: x[:, None, :]),
    (t_broadcast_to, ROW, lambda x: np.broadcast_to(x, (4, 8))),
    (t_broadcast_to_method, ROW, lambda x: np.broadcast_to(x[:, None], (8, 2))),
    (t_broadcast, ROW, lambda x: x[:, None] * 10 + x[None, :]),
    (t_split, PAIRS, lambda x: x[:, 0] - x[:, 1]),
    (t_split_method, PAIRS, lambda x: x[:, 1]),
    (t_join, ROW, lambda x: np.stack([x, x * 2], -1)),
    (t_split_join, MAT, lambda x: x - 3 * x),
], ids=lambda v: getattr(v, "__name__", "")[2:] if isinstance(v, despina.JITFunction) else "")
def test_shape_ops(device, fn, x, ref):
    expected = ref(x)
    np.testing.assert_array_equal(run_shape(device, fn, x, expected.shape), expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("fn", "ref"), [(t_trans, lambda x: x.T), (t_reshape, lambda x: x.reshape(2, 4, 4))],
                         ids=["trans", "reshape"])
def test_shape_ops_keep_every_dtype(device, dtype, fn, ref):
    x = sample(dtype, 32, 1).reshape(4, 8)
    expected = ref(x)
    np.testing.assert_array_equal(run_shape(device, fn, x, expected.shape, dtype), expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_split_join_keep_every_dtype(device, dtype):
    x = sample(dtype, 16, 2).reshape(8, 2)
    np.testing.assert_array_equal(run_shape(device, t_split_method, x, (8,), dtype), x[:, 1])
    y = x[:, 0].copy()
    np.testing.assert_array_equal(run_shape(device, t_join, y, (8, 2), dtype), np.stack([y, as_dtype(y * 2, dtype)], -1))


@despina.jit
def t_view(x):
    return tl.view(x, (8, 4))


@despina.jit
def t_view_method(x):
    return x.view(32)


@pytest.mark.parametrize(("fn", "shape"), [(t_view, (8, 4)), (t_view_method, (32,))])
def test_view_keeps_the_elements(device, fn, shape):
    got = run_shape(device, fn, MAT, shape)
    np.testing.assert_array_equal(np.sort(got.ravel()), np.sort(MAT.ravel()))


@despina.jit
def t_cat(x):
    return tl.cat(x, x + 100)


@pytest.mark.parametrize("x", [ROW, MAT], ids=["1d", "2d"])
def test_cat_concatenates_along_the_first_dimension(device, x):
    expected = np.concatenate([x, x + 100])
    np.testing.assert_array_equal(run_shape(device, t_cat, x, expected.shape), expected)


@despina.jit
def creation_kernel(out_ptr, v, N: tl.constexpr, DTYPE: tl.constexpr):
    z = tl.zeros((N,), DTYPE)
    tl.static_assert(z.dtype == DTYPE and z.shape == (N,))
    f = tl.full((2, N // 2), 7, DTYPE)
    r = tl.full((N,), v, DTYPE)
    zl = tl.zeros_like(r)
    fl = tl.full_like(r, 3)
    tl.static_assert(zl.dtype == DTYPE and fl.dtype == DTYPE)
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, z + 1)
    store_nd(out_ptr + N, f)
    tl.store(out_ptr + 2 * N + offs, r)
    tl.store(out_ptr + 3 * N + offs, zl)
    tl.store(out_ptr + 4 * N + offs, fl)
    tl.store(out_ptr + 5 * N + offs, tl.arange(4, 4 + N))


@pytest.mark.parametrize("dtype", DTYPES)
def test_zeros_full_zeros_like_arange(device, dtype):
    n = 8
    out = device.zeros(6 * n, dtype)
    creation_kernel[(1,)](out, 5, N=n, DTYPE=tl.dtype(dtype))
    expected = np.concatenate([np.ones(n), np.full(n, 7), np.full(n, 5), np.zeros(n), np.full(n, 3), np.arange(4, 4 + n)])
    np.testing.assert_array_equal(device.get(out), expected)


@despina.jit
def arange_kernel(out_ptr, START: tl.constexpr, END: tl.constexpr):
    r = tl.arange(START, END)
    tl.static_assert(r.dtype == tl.int32 and r.shape == (END - START,))
    tl.store(out_ptr + tl.arange(0, END - START), r)


@pytest.mark.parametrize(("start", "end"), [(0, 1), (0, 16), (3, 11), (-8, 8), (1024, 2048)])
def test_arange(device, start, end):
    out = device.zeros(end - start, "int32")
    arange_kernel[(1,)](out, START=start, END=end)
    np.testing.assert_array_equal(device.get(out), np.arange(start, end))


@despina.jit
def scalar_tile_kernel(out_ptr, v):
    s = tl.full((), 3, tl.int32)
    tl.static_assert(s.shape == ())
    t = tl.reshape(v, (1,))
    e = tl.expand_dims(v, 0)
    tl.store(out_ptr + tl.arange(0, 1), s + t + e)
    tl.store(out_ptr + 1 + tl.arange(0, 4), tl.broadcast_to(v, (4,)))


def test_scalars_become_tiles(device):
    out = device.zeros(5, "int32")
    scalar_tile_kernel[(1,)](out, 10)
    np.testing.assert_array_equal(device.get(out), [23, 10, 10, 10, 10])
