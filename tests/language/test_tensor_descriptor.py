"""Tensor descriptors (`tl.make_tensor_descriptor`, `desc.load`, `desc.store`, the host `TensorDescriptor`)
against NumPy: tiles at the edges read as the padding and are written only inside the shape."""

from __future__ import annotations

import re

import numpy as np
import pytest

import despina
import despina.language as tl
from despina.tools.tensor_descriptor import TensorDescriptor

from .reference import NUMPY


@despina.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        acc += tl.dot(a_desc.load([pid_m * BM, k]), b_desc.load([k, pid_n * BN]))
    c_desc.store([pid_m * BM, pid_n * BN], acc)


def test_matmul_with_edge_tiles(device):
    m, n, k, bm, bn, bk = 37, 20, 40, 16, 16, 16
    rng = np.random.default_rng(0)
    a = rng.integers(-3, 4, (m, k)).astype(np.float16)
    b = rng.integers(-3, 4, (k, n)).astype(np.float16)
    c = device.put(np.full((m, n), 7, np.float32))
    matmul_kernel[(-(-m // bm), -(-n // bn))](device.put(a), device.put(b), c, m, n, k, BM=bm, BN=bn, BK=bk)
    np.testing.assert_array_equal(device.get(c).reshape(m, n), a.astype(np.float32) @ b.astype(np.float32))


@despina.jit
def shifted_copy_kernel(x_ptr, out_ptr, N, SHIFT, BLOCK: tl.constexpr, PAD: tl.constexpr):
    src = tl.make_tensor_descriptor(x_ptr, [N], [1], [BLOCK], padding_option=PAD)
    out = tl.make_tensor_descriptor(out_ptr, [N], [1], [BLOCK])
    start = tl.program_id(0) * BLOCK
    out.store([start + SHIFT], src.load([start + SHIFT - 3]))


@pytest.mark.parametrize("pad,fill", [("zero", 0.0), ("nan", np.nan)])
def test_load_pads_and_store_stays_inside_the_shape(device, pad, fill):
    # The descriptors see the first n elements of a buffer of n + 8: the last 8 are never written.
    n, block, shift = 21, 8, -2
    x = np.arange(1, n + 9, dtype=np.float32)
    out = device.put(np.full(n + 8, -1, np.float32))
    shifted_copy_kernel[(4,)](device.put(x), out, n, shift, BLOCK=block, PAD=pad)
    expected = np.full(n + 8, -1, np.float32)
    for p in range(4):
        for i in range(block):
            dst, src = p * block + shift + i, p * block + shift - 3 + i
            if 0 <= dst < n:
                expected[dst] = x[src] if 0 <= src < n else fill
    np.testing.assert_array_equal(device.get(out), expected)


@despina.jit
def copy_3d_kernel(x_ptr, out_ptr, D0, D1, D2, B0: tl.constexpr, B1: tl.constexpr, B2: tl.constexpr):
    src = tl.make_tensor_descriptor(x_ptr, [D0, D1, D2], [D1 * D2, D2, 1], [B0, B1, B2])
    dst = tl.make_tensor_descriptor(out_ptr, [D0, D1, D2], [D1 * D2, D2, 1], [B0, B1, B2])
    offsets = [tl.program_id(0) * B0, tl.program_id(1) * B1, tl.program_id(2) * B2]
    tl.store_tensor_descriptor(dst, offsets, tl.load_tensor_descriptor(src, offsets) * 2)


@pytest.mark.parametrize("dtype", ["int16", "fp32"])
def test_rank_3_copy(device, dtype):
    shape, blocks = (3, 5, 24), (2, 4, 16)
    x = np.arange(np.prod(shape)).reshape(shape).astype(NUMPY[dtype])
    out = device.zeros(shape, dtype)
    grid = tuple(-(-d // b) for d, b in zip(shape, blocks))
    copy_3d_kernel[grid](device.put(x), out, *shape, B0=blocks[0], B1=blocks[1], B2=blocks[2])
    np.testing.assert_array_equal(device.get(out).reshape(shape), x * 2)


@despina.jit
def _scale_tile(desc, row, factor):
    desc.store([row, 0], desc.load([row, 0]) * factor)


@despina.jit
def host_descriptor_kernel(x_desc, y_desc, BM: tl.constexpr):
    row = tl.program_id(0) * BM
    tile = x_desc.load([row, 0])
    y_desc.store([row, 0], tile + y_desc.shape[1].to(tl.float32))
    _scale_tile(y_desc, row, 2.0)


def test_host_tensor_descriptor_argument(device):
    # 13 x 20 matrices in rows of 24 (96 bytes): the descriptors' strides are the padded rows'.
    m, n, pitch, bm = 13, 20, 24, 8
    x = np.arange(m * pitch, dtype=np.float32).reshape(m, pitch)
    y = device.put(np.full((m, pitch), -1, np.float32))
    x_desc = TensorDescriptor(device.put(x), [m, n], [pitch, 1], [bm, 32])
    y_desc = TensorDescriptor(y, shape=[m, n], strides=[pitch, 1], block_shape=[bm, 32])
    host_descriptor_kernel[(-(-m // bm),)](x_desc, y_desc, BM=bm)
    expected = np.full((m, pitch), -1, np.float32)
    expected[:, :n] = (x[:, :n] + n) * 2
    np.testing.assert_array_equal(device.get(y).reshape(m, pitch), expected)


def test_host_descriptor_from_tensor_and_its_block_shape_in_the_key():
    x = np.zeros((8, 32), np.float16)
    d = TensorDescriptor.from_tensor(x, [8, 16])
    assert (d.shape, d.strides, d.block_shape, d.padding) == ([8, 32], [32, 1], [8, 16], "zero")
    bound = host_descriptor_kernel.bind((d, d), {"BM": 8})
    spec = host_descriptor_kernel.specialize(bound, despina.CompileOptions())
    other = host_descriptor_kernel.specialize(host_descriptor_kernel.bind(
        (d, TensorDescriptor.from_tensor(x, [4, 16])), {"BM": 8}), despina.CompileOptions())
    assert spec.key != other.key
    assert [n for n, _ in spec.params][:5] == ["x_desc", "x_desc.base", "x_desc.shape0", "x_desc.shape1",
                                               "x_desc.stride0"]


@pytest.mark.parametrize("kwargs,message", [
    (dict(strides=[64, 2]), "the last stride must be 1"),
    (dict(strides=[60, 1]), "must be multiples of 16 bytes"),
    (dict(block_shape=[8, 24]), "block_shape [8, 24] must hold powers of two"),
    (dict(block_shape=[8, 4]), "8 bytes along its last dimension; it needs at least 16"),
    (dict(shape=[2, 2, 2, 32], strides=[128, 64, 32, 1], block_shape=[1, 1, 1, 32]), "rank 1 to 3"),
    (dict(padding="one"), "padding must be 'zero' or 'nan'"),
])
def test_host_descriptor_errors(kwargs, message):
    base = np.zeros((8, 64), np.float16)
    args = dict(base=base, shape=[8, 64], strides=[64, 1], block_shape=[8, 16]) | kwargs
    with pytest.raises((ValueError, TypeError), match=re.escape(message)):
        TensorDescriptor(**args)


@despina.jit
def bad_descriptor_kernel(x_ptr, N, CASE: tl.constexpr):
    if CASE == "stride":
        tl.make_tensor_descriptor(x_ptr, [N, N], [N, N], [16, 16])
    elif CASE == "runtime_stride":
        tl.make_tensor_descriptor(x_ptr, [N, N], [N, N // N], [16, 16])
    elif CASE == "pow2":
        tl.make_tensor_descriptor(x_ptr, [N, N], [N, 1], [16, 12])
    elif CASE == "bytes":
        tl.make_tensor_descriptor(x_ptr, [N, N], [N, 1], [16, 2])
    elif CASE == "rank":
        tl.make_tensor_descriptor(x_ptr, [N, N, N, N], [N, N, N, 1], [2, 2, 2, 16])
    elif CASE == "strides":
        tl.make_tensor_descriptor(x_ptr, [N, N], [1], [16, 16])
    elif CASE == "offsets":
        tl.make_tensor_descriptor(x_ptr, [N, N], [N, 1], [16, 16]).load([0])
    elif CASE == "store_shape":
        d = tl.make_tensor_descriptor(x_ptr, [N, N], [N, 1], [16, 16])
        d.store([0, 0], tl.zeros((16, 8), tl.float32))
    elif CASE == "nan_int":
        tl.make_tensor_descriptor(x_ptr.to(tl.pointer_type(tl.int32)), [N], [1], [16], padding_option="nan").load([0])
    elif CASE == "load_fn":
        tl.load_tensor_descriptor(x_ptr, [0])


@pytest.mark.parametrize("case,message", [
    ("stride", "tl.make_tensor_descriptor: the last stride must be the constant 1"),
    ("runtime_stride", "the last stride must be the constant 1 (the last dimension contiguous), got a run-time"),
    ("pow2", "tl.make_tensor_descriptor: block_shape [16, 12] must hold powers of two"),
    ("bytes", "block_shape [16, 2] has 8 bytes along its last dimension (2 x fp32); it needs at least 16"),
    ("rank", "has rank 4; despina's tensor descriptors have rank 1 to 3"),
    ("strides", "tl.make_tensor_descriptor: strides has 1 entries, block_shape has 2"),
    ("offsets", "desc.load: expected 2 offsets, one per dimension of block_shape [16, 16], got 1"),
    ("store_shape", "desc.store: the value's shape [16, 8] is not the descriptor's block_shape [16, 16]"),
    ("nan_int", "padding_option='nan' needs a floating-point block"),
    ("load_fn", "tl.load_tensor_descriptor needs a tensor descriptor"),
])
def test_descriptor_errors(device, case, message):
    with pytest.raises(despina.CompilationError, match=re.escape(message)) as info:
        bad_descriptor_kernel[(1,)](device.put(np.zeros(8, np.float32)), 8, CASE=case)
    assert "bad_descriptor_kernel" in str(info.value) and "test_tensor_descriptor.py:" in str(info.value)
