"""Pointer-load kernels the CPU tests (the GPU IR, the refusals) and the GPU tests (against torch) both compile:
loads that read a tile of a tensor, which gpuir/pointer_tiles.py turns into descriptor loads, their variants
that stay on cp.async, and rows that wrap (gpuir/wrap_versions.py, gpuir/masked_rows.py); and `tile_ir`, a call's
tile IR for the CPU tests that rewrite it."""

from __future__ import annotations

from typing import Any

import despina
import despina.language as tl
from despina.compiler.ir.core import Module
from despina.compiler.passes.rewrite import clone_function


def tile_ir(kernel: Any, args: tuple[Any, ...], consts: dict[str, Any]) -> Module:
    """The kernel's tile IR for the call, a copy of the one the kernel keeps (which the CPU tests rewrite)."""
    options = kernel.options({}, interpret=True)
    module = kernel.ir(kernel.specialize(kernel.bind(args, consts), options), options)
    return Module([clone_function(fn) for fn in module.functions], dict(module.attrs))


@despina.jit
def below(x, bound, HOW: tl.constexpr):
    """`x < bound` of integers, written as HOW says: `x < bound`, `x <= bound - 1`, `bound > x`, `bound - 1 >= x`."""
    mask = x < bound
    if HOW == "<=":
        mask = x <= bound - 1
    if HOW == ">":
        mask = bound > x
    if HOW == ">=":
        mask = bound - 1 >= x
    return mask


@despina.jit
def stepped(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
            LOWER_A: tl.constexpr = False, HOW: tl.constexpr = "<"):
    """Pointers stepped by BLOCK_K in a loop by BLOCK_K, masked on every dimension (A's rows by M and columns by
    K, B's rows by K and columns by N; each bound written as HOW says, `below`); with LOWER_A, A's mask also says
    `rows >= 0` (always so, but no tile's bound: A stays a pointer load, which cp.async copies where K is a multiple
    of 16, while TMA copies B)."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :]
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a_mask = below(rm[:, None], M, HOW) & below(rk[None, :], K - k, HOW)
        if LOWER_A:
            a_mask = a_mask & (rm[:, None] >= 0)
        a = tl.load(a_ptrs, mask=a_mask, other=0.0)
        b = tl.load(b_ptrs, mask=below(k + rk[:, None], K, HOW) & below(rn[None, :], N, HOW), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK
        b_ptrs += BK * stride_bk
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@despina.jit
def ws_pointers(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                WRAP: tl.constexpr = False):
    """A warp-specialized loop of pointer loads, A [M, K] and B [N, K] row-major, K masked; with WRAP, rows that
    wrap around M and N (tutorial 03's `% M`): TMA copies them only in the loop versioned for the programs whose
    rows do not wrap, and only where K, the rows' stride, is specialized positive (gpuir/wrap_versions.py); the loop
    as written is copied by cp.async and gets no producer warp."""
    rm, rn, rk = tl.program_id(0) * BM + tl.arange(0, BM), tl.program_id(1) * BN + tl.arange(0, BN), tl.arange(0, BK)
    if WRAP:
        rm, rn = rm % M, rn % N
    acc = tl.zeros((BM, BN), tl.float32)
    for k in tl.range(0, K, BK, warp_specialize=True):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(k + rk)[None, :] < K, other=0.0)
        b = tl.load(b_ptr + rn[:, None] * K + (k + rk)[None, :], mask=(k + rk)[None, :] < K, other=0.0)
        acc = tl.dot(a, b.T, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


@despina.jit
def clamped(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """Tutorial 09's pointer matmul without its persistent loop: rows and columns past M and N read row and column 0
    (`tl.where`), the offsets hinted as tutorial 09 hints them, K's offsets made afresh each iteration."""
    start_m, start_n = tl.program_id(0) * BM, tl.program_id(1) * BN
    rm, rn = start_m + tl.arange(0, BM), start_n + tl.arange(0, BN)
    rm = tl.max_contiguous(tl.multiple_of(tl.where(rm < M, rm, 0), BM), BM)
    rn = tl.max_contiguous(tl.multiple_of(tl.where(rn < N, rn, 0), BN), BN)
    acc = tl.zeros((BM, BN), tl.float32)
    for ki in range(tl.cdiv(K, BK)):
        rk = ki * BK + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * stride_am + rk[None, :], mask=rk[None, :] < K, other=0.0)
        b = tl.load(b_ptr + rk[:, None] * stride_bk + rn[None, :], mask=rk[:, None] < K, other=0.0)
        acc = tl.dot(a, b, acc)
    cm, cn = start_m + tl.arange(0, BM), start_n + tl.arange(0, BN)
    tl.store(c_ptr + cm[:, None] * N + cn[None, :], acc, mask=(cm[:, None] < M) & (cn[None, :] < N))


@despina.jit
def grouped(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
            GROUP_M: tl.constexpr):
    """Tutorial 03's grouped ordering without its wraps: rows and columns start at quotients by runtime values,
    which no analysis proves non-negative (gpuir/wrap_versions.py versions the loop on `0 <= start`); what lies
    past M, N and K masked."""
    pid = tl.program_id(0)
    num_pid_m, num_pid_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    group = GROUP_M * num_pid_n
    first_m = (pid // group) * GROUP_M
    group_m = min(num_pid_m - first_m, GROUP_M)
    rm = (first_m + (pid % group) % group_m) * BM + tl.arange(0, BM)
    rn = (pid % group) // group_m * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * stride_bk + rn[None, :], mask=((k + rk)[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@despina.jit
def k_loop(a_ptr, b_ptr, rm, rn, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """Rows rm of A [M, K] times columns rn of B [K, N], both row-major, K masked: a loop by BK."""
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(k + rk)[None, :] < K, other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=(k + rk)[:, None] < K, other=0.0)
        acc = tl.dot(a, b, acc)
    return acc


@despina.jit
def shifted(a_ptr, b_ptr, c_ptr, M, N, K, SHIFT, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """C = A[rows - SHIFT] B for a runtime SHIFT: program 0's rows start at -SHIFT, before A's first row (memory the
    caller's buffer holds), so that it runs the loop as written, and the programs after it the version on TMA
    (gpuir/wrap_versions.py)."""
    rm = tl.program_id(0) * BM - SHIFT + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = k_loop(a_ptr, b_ptr, rm, rn, N, K, BM, BN, BK)
    cm = tl.program_id(0) * BM + tl.arange(0, BM)
    tl.store(c_ptr + cm[:, None] * N + rn[None, :], acc, mask=(cm[:, None] < M) & (rn[None, :] < N))


@despina.jit
def flat_wraps(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """Rows that wrap (`% M`), computed before a loop nest marked to be flattened: two passes, each storing the
    product into its half of C [2, M, N]. The nest is versioned as a loop is, and both versions flattened."""
    rm = (tl.program_id(0) * BM + tl.arange(0, BM)) % M
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    for half in tl.range(0, 2, flatten=True):
        acc = k_loop(a_ptr, b_ptr, rm, rn, N, K, BM, BN, BK)
        tl.store(c_ptr + half * M * N + rm[:, None] * N + rn[None, :], acc, mask=rn[None, :] < N)


@despina.jit
def edge_reads(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, HOW: tl.constexpr):
    """Tutorial 03's rows and columns that wrap (`% M`, `% N`), C stored through rows and columns computed again and
    masked by M and N, or as HOW says otherwise (gpuir/masked_rows.py: which of them let the rows past M read zeros)."""
    rm = (tl.program_id(0) * BM + tl.arange(0, BM)) % M
    rn = (tl.program_id(1) * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a_mask = (k + rk)[None, :] < K
        if HOW == "rows read by a mask":
            a_mask = a_mask & (rm[:, None] < M)
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=a_mask, other=0.0)
        if HOW == "B K-major":  # B [N, K], its rows the columns that wrap
            b = tl.load(b_ptr + rn[:, None] * K + (k + rk)[None, :], mask=(k + rk)[None, :] < K, other=0.0).T
        else:
            b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=(k + rk)[:, None] < K, other=0.0)
        acc = tl.dot(a, b, acc)
    cm, cn = tl.program_id(0) * BM + tl.arange(0, BM), tl.program_id(1) * BN + tl.arange(0, BN)
    rows = cm[:, None] < M
    if HOW == "rows <=":
        rows = cm[:, None] <= M - 1
    if HOW == "rows shifted":
        rows = (cm + 1)[:, None] < M
    if HOW == "rows and bound shifted":
        rows = (cm + 1)[:, None] < M + 1
    if HOW == "rows bounded by K":
        rows = cm[:, None] < K
    if HOW == "rows unmasked":
        rows = cn[None, :] >= 0
    if HOW == "summed over rows":
        acc = tl.broadcast_to(tl.sum(acc, axis=0)[None, :], (BM, BN))
    if HOW == "row sums":  # into C's first column
        tl.store(c_ptr + cm * N, tl.sum(acc, axis=1), mask=cm < M)
    else:
        tl.store(c_ptr + cm[:, None] * N + cn[None, :], acc, mask=rows & (cn[None, :] < N))
