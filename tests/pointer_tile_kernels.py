"""Pointer-load kernels the CPU tests (the GPU IR, the refusals) and the GPU tests (against torch) both compile:
loads that read a tile of a tensor, which gpuir/pointer_tiles.py turns into descriptor loads, and their variants
that stay on cp.async."""

from __future__ import annotations

import despina
import despina.language as tl


@despina.jit
def stepped(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
            LOWER_A: tl.constexpr = False):
    """Pointers stepped by BLOCK_K in a loop by BLOCK_K, masked on every dimension (A's rows by M and columns by
    K, B's rows by K and columns by N); with LOWER_A, A's mask also says `rows >= 0` (always so, but no tile's
    bound: A stays a pointer load, which cp.async copies where K is a multiple of 16, while TMA copies B)."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :]
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a_mask = (rm[:, None] < M) & (rk[None, :] < K - k)
        if LOWER_A:
            a_mask = a_mask & (rm[:, None] >= 0)
        a = tl.load(a_ptrs, mask=a_mask, other=0.0)
        b = tl.load(b_ptrs, mask=(k + rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK
        b_ptrs += BK * stride_bk
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@despina.jit
def ws_pointers(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                WRAP: tl.constexpr = False):
    """A warp-specialized loop of pointer loads, A [M, K] and B [N, K] row-major, K masked; with WRAP, rows that
    wrap around M and N (tutorial 03's `% M`): no tile of a tensor, so cp.async copies them and the loop gets no
    producer warp."""
    rm, rn, rk = tl.program_id(0) * BM + tl.arange(0, BM), tl.program_id(1) * BN + tl.arange(0, BN), tl.arange(0, BK)
    if WRAP:
        rm, rn = rm % M, rn % N
    acc = tl.zeros((BM, BN), tl.float32)
    for k in tl.range(0, K, BK, warp_specialize=True):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(k + rk)[None, :] < K, other=0.0)
        b = tl.load(b_ptr + rn[:, None] * K + (k + rk)[None, :], mask=(k + rk)[None, :] < K, other=0.0)
        acc = tl.dot(a, b.T, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))
