"""Warp-specialized loops (`tl.range(..., warp_specialize=True)`) on a compute-capability-9.0 device: a
producer warp issues the TMA copies, the kernel's warps run the wgmma dots. The descriptor matmul and the
flattened persistent one (benchmarks/kernels.py) against torch over ragged shapes, K of one step and of
none (the producer runs no iteration), more programs than tiles; a kernel whose loop sits in an `if` the
consumers skip (the producer skips it too, or the launch would never end); a producer warpgroup that gives
its registers to the consumers (setmaxnreg); the same kernel run by the daemon, which launches its block
with the producer's warps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import benchmark_kernels
import numpy as np
import pytest

import despina
import despina.language as tl
from despina.runtime import driver
from despina.tools.tensor_descriptor import TensorDescriptor

from .test_execute import GrpcDaemon, gpu_daemon, on_daemon  # noqa: F401 (fixtures)
from .test_tma import _operand


@despina.jit
def gated_matmul(a_ptr, b_ptr, c_ptr, M, N, K, RUN: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                 BK: tl.constexpr):
    """C = A B^T, or zeros where the program's tile starts at or past `RUN` rows (its loop skipped)."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    off_m, off_n = tl.program_id(0) * BM, tl.program_id(1) * BN
    acc = tl.zeros((BM, BN), tl.float32)
    if off_m < RUN:
        for k in tl.range(0, K, BK, warp_specialize=True):
            acc = tl.dot(a_desc.load([off_m, k]), b_desc.load([off_n, k]).T, acc)
    rm, rn = off_m + tl.arange(0, BM), off_n + tl.arange(0, BN)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@pytest.fixture
def hopper(torch_cuda: Any, gpu_device: Any, fresh_cache: Path) -> Any:
    if gpu_device.capability != (9, 0):
        pytest.skip(f"warp specialization runs wgmma and TMA on a compute-capability-9.0 device, not {gpu_device}")
    return torch_cuda


def _want(torch: Any, a: Any, b: Any) -> Any:
    return (a.double() @ b.double().T).half().double()


@pytest.mark.parametrize("mnk", [(300, 520, 136), (256, 256, 64), (200, 136, 0), (128, 256, 1000)])
@pytest.mark.parametrize("config", [(128, 256, 64, 3), (128, 128, 64, 4), (64, 64, 32, 2)])
def test_the_specialized_descriptor_matmul_matches_torch(hopper: Any, tmp_path: Path, mnk: tuple[int, int, int],
                                                         config: tuple[int, int, int, int]) -> None:
    torch = hopper
    kernels = benchmark_kernels.load(tmp_path)
    (m, n, k), (bm, bn, bk, stages) = mnk, config
    a, b = (_operand(torch, "fp16", (rows, max(k, 8)), seed)[:, :k] for rows, seed in ((m, 1), (n, 2)))
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    descs = [TensorDescriptor.from_tensor(t, block) for t, block in ((a, [bm, bk]), (b, [bn, bk]), (c, [bm, bn]))]
    grid = (despina.cdiv(m, bm), despina.cdiv(n, bn))
    kernels.matmul_tma_kernel[grid](*descs, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, WARP_SPECIALIZE=True,
                                    num_warps=4 if bm == 64 else 8, num_stages=stages)
    torch.testing.assert_close(c.double(), _want(torch, a, b), rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("programs,k", [(3, 136), (200, 136), (3, 0), (132, 4096), (3, 448), (2, 2048)])
@pytest.mark.parametrize("bn,stages", [(128, 3), (256, 3), (128, 4)])
def test_the_specialized_persistent_matmul_matches_torch(hopper: Any, tmp_path: Path, programs: int, k: int, bn: int,
                                                         stages: int) -> None:
    """Ragged shapes over 3 programs (5 or 3 tiles each; K = 136 and 0 copy by cp.async and are not specialized),
    200 (one tile or none each), 132 and 2: where a program runs several tiles, its epilogues reuse their shared
    memory, which the consumers' barrier at the end of every iteration guards (lower/pipeline.py)."""
    torch = hopper
    kernels = benchmark_kernels.load(tmp_path)
    m, n = 300, 520
    a, b = (_operand(torch, "fp16", (rows, max(k, 8)), seed)[:, :k] for rows, seed in ((m, 7), (n, 8)))
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    descs = [TensorDescriptor.from_tensor(t, block) for t, block in ((a, [128, 64]), (b, [bn, 64]), (c, [128, bn]))]
    tiles = despina.cdiv(m, 128) * despina.cdiv(n, bn)
    kernels.matmul_tma_persistent_kernel[(min(programs, tiles),)](
        *descs, m, n, k, BLOCK_M=128, BLOCK_N=bn, BLOCK_K=64, GROUP_SIZE_M=8, NUM_SMS=min(programs, tiles),
        WARP_SPECIALIZE=True, num_warps=8, num_stages=stages)
    torch.testing.assert_close(c.double(), _want(torch, a, b), rtol=1e-2, atol=5e-2)


def _gated(torch: Any, m: int, n: int, k: int, bn: int) -> None:
    """gated_matmul on 128 x `bn` tiles, its loop run by the programs of the first 256 rows, against torch."""
    a, b = _operand(torch, "fp16", (m, k), 3), _operand(torch, "fp16", (n, k), 4)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    gated_matmul[(m // 128, n // bn)](a, b, c, m, n, k, RUN=256, BM=128, BN=bn, BK=64, num_warps=8, num_stages=3)
    torch.cuda.synchronize()
    want = a.double() @ b.double().T
    want[256:] = 0
    torch.testing.assert_close(c.double(), want, rtol=1e-2, atol=5e-2)


def test_a_loop_the_consumers_skip_the_producer_skips(hopper: Any) -> None:
    _gated(hopper, 512, 256, 320, 128)


def test_a_producer_warpgroup_gives_its_registers_to_the_consumers(hopper: Any) -> None:
    """128x256 tiles in 3 slots hold the SM to one block: the producer is a warpgroup at 40 registers a thread
    and the consumers take 232 (setmaxnreg, the kernel assembled by this host's ptxas as a whole program); the
    block launches with 384 threads. Against torch, with a program whose loop is skipped."""
    compiled = despina.compile(gated_matmul, "*fp16:16,*fp16:16,*fp32:16,i32,i32,i32:16",
                               {"RUN": 256, "BM": 128, "BN": 256, "BK": 64}, num_warps=8, num_stages=3, target="sm_90a")
    assert compiled.metadata["setmaxnreg"].startswith("yes"), compiled.metadata["setmaxnreg"]
    assert compiled.metadata["num_threads"] == 384 and compiled.metadata["assembler"] == "ptxas"
    _gated(hopper, 384, 512, 448, 256)


@pytest.mark.parametrize("bn", [128, 256])
def test_the_daemon_runs_the_specialized_kernel(gpu_device: driver.Device, on_daemon: GrpcDaemon,  # noqa: F811
                                                bn: int) -> None:
    """With one producer warp (128x128 tiles) and with a producer warpgroup trading registers (128x256)."""
    if gpu_device.capability != (9, 0):
        pytest.skip("warp specialization needs a compute-capability-9.0 device")
    rng = np.random.default_rng(6)
    m, n, k = 384, 512, 192
    a, b = (rng.standard_normal(shape).astype(np.float16) for shape in ((m, k), (n, k)))
    c = np.full((m, n), np.nan, np.float32)
    gated_matmul.run_remote[(m // 128, n // bn)](a, b, c, m, n, k, RUN=m, BM=128, BN=bn, BK=64, num_warps=8,
                                                 num_stages=3)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32).T, rtol=1e-2, atol=1e-1)


@despina.jit
def deferred_chain(a_ptr, b_ptr, v_ptr, out_ptr, ROWS, TRIPS, N: tl.constexpr, BN: tl.constexpr):
    """out = sum over j < TRIPS of (A B_j^T / 8 in fp16) V_j, the loop warp-specialized (its second product
    deferred to the next iteration, gpuir/defer.py): B_j and V_j are rows j * BN of b and v (ROWS rows), by TMA."""
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[ROWS, N], strides=[N, 1], block_shape=[BN, N])
    v_desc = tl.make_tensor_descriptor(v_ptr, shape=[ROWS, N], strides=[N, 1], block_shape=[BN, N])
    rows = tl.arange(0, 128)
    a = tl.load(a_ptr + rows[:, None] * N + tl.arange(0, N)[None, :])
    acc = tl.zeros((128, N), tl.float32)
    for j in tl.range(0, TRIPS * BN, BN, warp_specialize=True):
        s = tl.dot(a, b_desc.load([j, 0]).T)
        acc = tl.dot((s * 0.125).to(tl.float16), v_desc.load([j, 0]), acc)
    tl.store(out_ptr + rows[:, None] * N + tl.arange(0, N)[None, :], acc)


@pytest.mark.parametrize("trips", [0, 1, 2, 3, 4, 7])
def test_a_deferred_chain_matches_torch_whatever_the_trip_count(hopper: Any, trips: int) -> None:
    """No iteration (the last product after the loop skipped), one (only the one after the loop adds), more; the
    last V, which the producer copies into the slot after the last iteration's, at either phase of the ring's
    3 slots (3 and 4 trips: the second phase)."""
    torch = hopper
    a, b, v = (_operand(torch, "fp16", (rows, 64), seed) for rows, seed in ((128, 1), (max(trips, 1) * 64, 2),
                                                                              (max(trips, 1) * 64, 3)))
    out = torch.full((128, 64), float("nan"), device="cuda", dtype=torch.float32)
    deferred_chain[(1,)](a, b, v, out, b.shape[0], trips, N=64, BN=64, num_warps=8, num_stages=3)
    torch.testing.assert_close(out.double(), _chain(torch, a, b, v, trips), rtol=1e-2, atol=1e-1)


def _chain(torch: Any, a: Any, b: Any, v: Any, trips: int) -> Any:
    """What `deferred_chain` computes, in float64 (P rounded to fp16 as the kernel does)."""
    want = torch.zeros((128, 64), device="cuda", dtype=torch.float64)
    for j in range(trips):
        s = (a.double() @ b[j * 64 : (j + 1) * 64].double().T * 0.125).half().double()
        want += s @ v[j * 64 : (j + 1) * 64].double()
    return want


@despina.jit
def gated_chain(a_ptr, b_ptr, v_ptr, out_ptr, ROWS, TRIPS, RUN, N: tl.constexpr, BN: tl.constexpr):
    """`deferred_chain` in an `if` that programs at or past RUN skip, each storing its 128 rows of out: their
    producer skips the loop and the copy of the last V after it, or the block would end with a copy in flight."""
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[ROWS, N], strides=[N, 1], block_shape=[BN, N])
    v_desc = tl.make_tensor_descriptor(v_ptr, shape=[ROWS, N], strides=[N, 1], block_shape=[BN, N])
    rows = tl.arange(0, 128)
    a = tl.load(a_ptr + rows[:, None] * N + tl.arange(0, N)[None, :])
    acc = tl.zeros((128, N), tl.float32)
    if tl.program_id(0) < RUN:
        for j in tl.range(0, TRIPS * BN, BN, warp_specialize=True):
            s = tl.dot(a, b_desc.load([j, 0]).T)
            acc = tl.dot((s * 0.125).to(tl.float16), v_desc.load([j, 0]), acc)
    tl.store(out_ptr + tl.program_id(0) * 128 * N + rows[:, None] * N + tl.arange(0, N)[None, :], acc)


def test_a_deferred_chain_some_programs_skip(hopper: Any) -> None:
    torch = hopper
    trips = 5
    a, b, v = (_operand(torch, "fp16", (rows, 64), seed) for rows, seed in ((128, 4), (trips * 64, 5), (trips * 64, 6)))
    out = torch.full((3 * 128, 64), float("nan"), device="cuda", dtype=torch.float32)
    gated_chain[(3,)](a, b, v, out, b.shape[0], trips, 2, N=64, BN=64, num_warps=8, num_stages=3)
    want = _chain(torch, a, b, v, trips)
    torch.testing.assert_close(out.double(), torch.cat([want, want, torch.zeros_like(want)]), rtol=1e-2, atol=1e-1)
    plan = despina.compile(gated_chain, "*fp16:16,*fp16:16,*fp16:16,*fp32:16,i32:16,i32,i32", {"N": 64, "BN": 64},
                           num_warps=8, num_stages=3, target="sm_90a")
    assert "into the loop's ring by the producer, after its last iteration" in plan.asm["gpuir"]
