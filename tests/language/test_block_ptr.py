"""Block pointers (`tl.make_block_ptr`, `tl.advance`) against NumPy: loads and stores with
boundary checks and padding, carried through loops and `if`s."""

from __future__ import annotations

import numpy as np
import pytest

import despina
import despina.language as tl

from .reference import sample


@despina.jit
def copy_block_kernel(x_ptr, out_ptr, M, N, stride_m, stride_n, BM: tl.constexpr, BN: tl.constexpr,
                      PAD: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    src = tl.make_block_ptr(x_ptr, (M, N), (stride_m, stride_n), (pid_m * BM, pid_n * BN), (BM, BN), (1, 0))
    dst = tl.make_block_ptr(out_ptr, shape=(M, N), strides=(N, 1), offsets=(pid_m * BM, pid_n * BN),
                            block_shape=(BM, BN), order=(1, 0))
    tl.store(dst, tl.load(src, boundary_check=(0, 1), padding_option=PAD) + 1, boundary_check=(0, 1))


@pytest.mark.parametrize("dtype", ["int16", "fp16", "fp32", "fp64"])
@pytest.mark.parametrize("transposed", [False, True])
def test_copy_with_boundary_checks(device, dtype, transposed):
    m, n, bm, bn = 37, 21, 16, 8
    x = sample(dtype, m * n, seed=1, low=-100, high=100).reshape(m, n)
    src = np.ascontiguousarray(x.T).T if transposed else x
    strides = (1, m) if transposed else (n, 1)
    out = device.zeros((m, n), dtype)
    grid = (-(-m // bm), -(-n // bn))
    copy_block_kernel[grid](device.put(np.ascontiguousarray(x.T) if transposed else src, dtype), out, m, n,
                            *strides, BM=bm, BN=bn, PAD="zero")
    np.testing.assert_array_equal(device.get(out).reshape(m, n), (x + 1).astype(x.dtype))


@despina.jit
def padded_kernel(x_ptr, out_ptr, N, BLOCK: tl.constexpr, PAD: tl.constexpr, CHECK: tl.constexpr):
    src = tl.make_block_ptr(x_ptr, (N,), (1,), (tl.program_id(0) * BLOCK - 2,), (BLOCK,), (0,))
    tl.store(out_ptr + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK), tl.load(src, boundary_check=CHECK, padding_option=PAD))


@pytest.mark.parametrize("pad,fill", [("zero", 0.0), ("nan", np.nan)])
def test_padding_before_and_after_the_tensor(device, pad, fill):
    n, block = 13, 8
    x = sample("fp32", n, seed=2)
    out = device.zeros(2 * block, "fp32")
    padded_kernel[(2,)](device.put(x), out, n, BLOCK=block, PAD=pad, CHECK=(0,))
    expected = np.full(2 * block, fill, np.float32)
    for i in range(2 * block):  # program p reads elements p * BLOCK - 2 + (0 .. BLOCK - 1)
        j = (i // block) * block - 2 + i % block
        if 0 <= j < n:
            expected[i] = x[j]
    np.testing.assert_array_equal(device.get(out), expected)


@despina.jit
def row_sums_kernel(x_ptr, out_ptr, M, K, BM: tl.constexpr, BK: tl.constexpr):
    blk = tl.make_block_ptr(x_ptr, (M, K), (K, 1), (tl.program_id(0) * BM, 0), (BM, BK), (1, 0))
    acc = tl.zeros((BM,), tl.float32)
    for _ in range(0, K, BK):
        acc += tl.sum(tl.load(blk, boundary_check=(0, 1), padding_option="zero"), 1)
        blk = tl.advance(blk, (0, BK))
    out = tl.make_block_ptr(out_ptr, (M,), (1,), (tl.program_id(0) * BM,), (BM,), (0,))
    tl.store(out, acc, boundary_check=(0,))


def test_advance_in_a_loop(device):
    m, k = 20, 50
    x = np.random.default_rng(3).integers(-8, 9, (m, k)).astype(np.float32)
    out = device.zeros(m, "fp32")
    row_sums_kernel[(-(-m // 8),)](device.put(x), out, m, k, BM=8, BK=16)
    np.testing.assert_array_equal(device.get(out), x.sum(axis=1))


@despina.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    a = tl.make_block_ptr(a_ptr, (M, K), (K, 1), (pid_m * BM, 0), (BM, BK), (1, 0))
    b = tl.make_block_ptr(b_ptr, (K, N), (N, 1), (0, pid_n * BN), (BK, BN), (1, 0))
    acc = tl.zeros((BM, BN), tl.float32)
    k = 0
    while k < K:
        acc = tl.dot(tl.load(a, boundary_check=(0, 1), padding_option="zero"),
                     tl.load(b, boundary_check=(0, 1), padding_option="zero"), acc, input_precision="ieee")
        a, b = a.advance((0, BK)), tl.advance(b, (BK, 0))
        k += BK
    c = tl.make_block_ptr(c_ptr, (M, N), (N, 1), (pid_m * BM, pid_n * BN), (BM, BN), (1, 0))
    tl.store(c, acc, boundary_check=(0, 1))


def test_matmul_with_block_pointers_in_a_while_loop(device):
    m, n, k = 33, 40, 70
    rng = np.random.default_rng(4)
    a = rng.integers(-4, 5, (m, k)).astype(np.float32)
    b = rng.integers(-4, 5, (k, n)).astype(np.float32)
    c = device.zeros((m, n), "fp32")
    matmul_kernel[(-(-m // 16), -(-n // 16))](device.put(a), device.put(b), c, m, n, k, BM=16, BN=16, BK=16)
    np.testing.assert_array_equal(device.get(c).reshape(m, n), a @ b)


@despina.jit
def branch_kernel(x_ptr, out_ptr, flag, BLOCK: tl.constexpr):
    p = tl.make_block_ptr(x_ptr, (4 * BLOCK,), (1,), (0,), (BLOCK,), (0,))
    if flag > 0:
        p = tl.advance(p, (2 * BLOCK,))
    tl.store(out_ptr + tl.arange(0, BLOCK), tl.load(p))


@pytest.mark.parametrize("flag", [0, 1])
def test_advance_in_an_if(device, flag):
    x = np.arange(32, dtype=np.int32)
    out = device.zeros(8, "int32")
    branch_kernel[(1,)](device.put(x), out, flag, BLOCK=8)
    np.testing.assert_array_equal(device.get(out), x[16:24] if flag else x[:8])


@despina.jit
def bad_block_kernel(x_ptr, n, CASE: tl.constexpr):
    p = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (8,), (0,))
    if CASE == "mask":
        tl.load(p, mask=tl.arange(0, 8) < n)
    elif CASE == "pad":
        tl.load(p, boundary_check=(0,), padding_option="one")
    elif CASE == "nan_int":
        tl.load(tl.make_block_ptr(n.to(tl.int64).to(tl.pointer_type(tl.int32)), (n,), (1,), (0,), (8,), (0,)),
                boundary_check=(0,), padding_option="nan")
    elif CASE == "check_dim":
        tl.load(p, boundary_check=(1,))
    elif CASE == "rank":
        tl.make_block_ptr(x_ptr, (n, n), (1,), (0,), (8,), (0,))
    elif CASE == "order":
        tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (8,), (1,))
    elif CASE == "store_shape":
        tl.store(p, tl.zeros((4,), tl.float32))
    elif CASE == "plain":
        tl.load(x_ptr + tl.arange(0, 8), boundary_check=(0,))
    elif CASE == "loop":
        for i in range(n):
            p = tl.make_block_ptr(x_ptr, (n,), (1,), (i,), (8,), (0,))
    elif CASE == "advance":
        tl.advance(x_ptr, (1,))


@pytest.mark.parametrize("case,message", [
    ("mask", "tl.load of a block pointer takes no mask or other"),
    ("pad", "padding_option must be one of '', 'zero', 'nan', got 'one'"),
    ("nan_int", "padding_option='nan' needs a floating-point block, got int32"),
    ("check_dim", "boundary_check dimension 1 is out of range for a block pointer of rank 1"),
    ("rank", "shape has 2 entries, block_shape has 1"),
    ("order", "order [1] must be a permutation of 0..0"),
    ("store_shape", "the value's shape [4] is not the block pointer's block_shape [8]"),
    ("plain", "boundary_check and padding_option belong to block pointers (tl.make_block_ptr)"),
    ("loop", "'p' becomes another block pointer inside a run-time loop"),
    ("advance", "tl.advance needs a block pointer from tl.make_block_ptr"),
])
def test_block_pointer_errors(device, case, message):
    with pytest.raises(despina.CompilationError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]")):
        bad_block_kernel[(1,)](device.put(np.zeros(8, np.float32)), 8, CASE=case)


@despina.jit
def if_bad_kernel(x_ptr, flag):
    p = tl.make_block_ptr(x_ptr, (8,), (1,), (0,), (8,), (0,))
    if flag > 0:
        p = tl.make_block_ptr(x_ptr, (16,), (1,), (0,), (8,), (0,))
    tl.load(p)


def test_an_if_may_not_replace_a_block_pointer(device):
    with pytest.raises(despina.CompilationError, match="'p' must be one block pointer after both branches of the `if`"):
        if_bad_kernel[(1,)](device.put(np.zeros(8, np.float32)), 1)
