"""Pipelined loops of mma.sync dots hand their ring slots over by mbarriers (`lower/pipeline.py`, the
"mbarriers" handoff): no CTA barrier in the loop, each thread waiting for the slot it reads and the one
it writes. On a Hopper GPU the kernels here are compiled for sm_90 (mma.sync; sm_90a's wgmma loops
keep the CTA barrier), elsewhere for the device's own target: the tutorial matmul with ragged edges,
fewer iterations than stages and none at all, and the attention forward pass (chained dots, causal
and not) against torch; flattened persistent matmuls through pointers (one stepping its pointers, tutorial
09's building them from a tile's offsets), also on sm_90a and through the daemon."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import benchmark_kernels
import numpy as np
import pytest

import despina
import despina.language as tl
import despina.runtime.driver as driver

from .test_dot import TOL, _operand, triton_cdiv, tutorial_matmul
from .test_execute import GrpcDaemon, gpu_daemon, on_daemon  # noqa: F401 (fixtures)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import flash_attention  # noqa: E402

from .hopper import normals

# Kernel objects of their own: a launcher is cached by specialization and context, so the same kernel
# object launched elsewhere in this process for sm_90a would be found again here.
matmul = despina.jit(tutorial_matmul.fn)
attention = despina.jit(flash_attention.attention_fwd.fn)


@pytest.fixture
def mma_sync_target(torch_cuda: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """The target launches compile for: sm_90 on a 9.0 device (mma.sync), else the device's own."""
    own = driver.target_for
    monkeypatch.setattr(driver, "target_for", lambda capability: "sm_90" if capability == (9, 0) else own(capability))
    major, minor = torch_cuda.cuda.get_device_capability()
    return driver.target_for((major, minor))


# (M, N, K), (BM, BN, BK), warps: ragged M and N, K not a multiple of BK, one K step (fewer than the
# stages), no K step at all (the prologue's copies are all empty, the loop runs no iteration)
CASES = [
    ((256, 256, 512), (128, 128, 64), 8),
    ((200, 136, 208), (128, 128, 64), 8),
    ((256, 512, 320), (128, 256, 64), 8),
    ((96, 80, 16), (64, 64, 32), 4),
    ((64, 64, 0), (64, 64, 32), 4),
]


@pytest.mark.parametrize("stages", [2, 3, 4])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{'x'.join(map(str, c[0]))}-b{'x'.join(map(str, c[1]))}")
def test_matmul_hands_slots_over_by_mbarriers(torch_cuda: Any, mma_sync_target: str, case: tuple[Any, ...],
                                              stages: int) -> None:
    torch = torch_cuda
    (m, n, k), (bm, bn, bk), warps = case
    a = _operand(torch, "fp16", (m, max(k, 1)), 1, False)[:, :k]
    b = _operand(torch, "fp16", (max(k, 1), n), 2, False)[:k]
    c = torch.full((m, n), float("nan"), device="cuda", dtype=a.dtype)
    args = (a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    matmul[(triton_cdiv(m, bm), triton_cdiv(n, bn))](*args, BM=bm, BN=bn, BK=bk, LOOP_STAGES=None, num_warps=warps,
                                                     num_stages=stages)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=TOL["fp16"], atol=TOL["fp16"] * max(k, 1) ** 0.5)
    sig = ",".join(["*fp16:16"] * 3 + [_spec(x) for x in args[3:]])
    plan = despina.compile(matmul, sig, {"BM": bm, "BN": bn, "BK": bk, "LOOP_STAGES": None}, num_warps=warps,
                           num_stages=stages, target=mma_sync_target)
    assert "slots handed over by mbarriers" in plan.asm["gpuir"]


@despina.jit
def persistent_matmul(a_ptr, b_ptr, c_ptr, M, N, K, TILES_N: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                      BK: tl.constexpr):
    """Each program takes every `num_programs`-th output tile in turn: the pipelined K loop (and its
    barriers) runs again inside the tile loop."""
    rk = tl.arange(0, BK)
    tiles = tl.cdiv(M, BM) * TILES_N
    for tile in range(tl.program_id(0), tiles, tl.num_programs(0)):
        rm = (tile // TILES_N) * BM + tl.arange(0, BM)
        rn = (tile % TILES_N) * BN + tl.arange(0, BN)
        a_ptrs = a_ptr + (rm % M)[:, None] * K + rk[None, :]
        b_ptrs = b_ptr + rk[:, None] * N + (rn % N)[None, :]
        acc = tl.zeros((BM, BN), tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BK, other=0.0)
            b = tl.load(b_ptrs, mask=rk[:, None] < K - k * BK, other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BK
            b_ptrs += BK * N
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


@pytest.mark.parametrize("programs", [1, 3])
def test_the_pipelined_loop_runs_again_inside_a_tile_loop(torch_cuda: Any, mma_sync_target: str, programs: int) -> None:
    """Its barriers are set up and invalidated once a K loop, which runs 2-6 times a program here."""
    torch = torch_cuda
    m, n, k, bm, bn, bk = 200, 256, 208, 64, 128, 32
    a = _operand(torch, "fp16", (m, k), 3, False)
    b = _operand(torch, "fp16", (k, n), 4, False)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=a.dtype)
    persistent_matmul[(programs,)](a, b, c, m, n, k, TILES_N=n // bn, BM=bm, BN=bn, BK=bk, num_warps=4, num_stages=3)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=TOL["fp16"], atol=TOL["fp16"] * k ** 0.5)
    plan = despina.compile(persistent_matmul, "*fp16:16,*fp16:16,*fp16:16,i32,i32:16,i32:16",
                           {"TILES_N": n // bn, "BM": bm, "BN": bn, "BK": bk}, num_warps=4, num_stages=3,
                           target=mma_sync_target)
    assert "slots handed over by mbarriers" in plan.asm["gpuir"]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(("n_ctx", "head_dim", "warps"), [(256, 64, 4), (500, 64, 8), (200, 128, 8)])
def test_attention_hands_slots_over_by_mbarriers(torch_cuda: Any, mma_sync_target: str, n_ctx: int, head_dim: int,
                                                 warps: int, causal: bool) -> None:
    torch = torch_cuda
    torch.manual_seed(2)
    q, k, v = (torch.randn((3, n_ctx, head_dim), device="cuda", dtype=torch.float16) for _ in range(3))
    out = torch.empty_like(q)
    consts = {"HEAD_DIM": head_dim, "BLOCK_M": 128, "BLOCK_N": 64, "CAUSAL": causal}
    attention[(despina.cdiv(n_ctx, 128), 3)](q, k, v, out, 1.0 / math.sqrt(head_dim), q.stride(0), q.stride(1), n_ctx,
                                             num_warps=warps, num_stages=3, **consts)
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2)
    sig = "*fp16:16,*fp16:16,*fp16:16,*fp16:16,fp32," + ",".join(_spec(x) for x in (q.stride(0), q.stride(1), n_ctx))
    plan = despina.compile(attention, sig, consts, num_warps=warps, num_stages=3, target=mma_sync_target)
    assert "slots handed over by mbarriers" in plan.asm["gpuir"]


def _spec(x: int) -> str:
    return "i32:1" if x == 1 else "i32:16" if x % 16 == 0 else "i32"


def stepped_persistent(a_ptr, b_ptr, c_ptr, M, N, K, TILES_N: tl.constexpr, PROGRAMS: tl.constexpr, BM: tl.constexpr,
                       BN: tl.constexpr, BK: tl.constexpr):
    """`persistent_matmul` with its tile loop flattened (passes/flatten.py): the K loop's pointers, which it
    steps, go from one iteration to the next beside the epilogue; through it, the loads were not pipelined."""
    rk = tl.arange(0, BK)
    tiles = tl.cdiv(M, BM) * TILES_N
    for tile in tl.range(tl.program_id(0), tiles, PROGRAMS, flatten=True):
        rm = (tile // TILES_N) * BM + tl.arange(0, BM)
        rn = (tile % TILES_N) * BN + tl.arange(0, BN)
        a_ptrs = a_ptr + (rm % M)[:, None] * K + rk[None, :]
        b_ptrs = b_ptr + rk[:, None] * N + (rn % N)[None, :]
        acc = tl.zeros((BM, BN), tl.float32)
        for k in range(0, K, BK):  # bounds from outside the nest, which flattening needs
            a = tl.load(a_ptrs, mask=rk[None, :] < K - k, other=0.0)
            b = tl.load(b_ptrs, mask=rk[:, None] < K - k, other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BK
            b_ptrs += BK * N
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


# Kernel objects of their own per target (see `matmul` above).
stepped_mma_sync = despina.jit(stepped_persistent)
stepped_own = despina.jit(stepped_persistent)


def _stepped(torch: Any, kernel: Any, target: str, programs: int, k: int) -> None:
    m, n, bm, bn, bk = 200, 256, 64, 128, 32
    a = _operand(torch, "fp16", (m, max(k, 1)), 5, False)[:, :k].contiguous()
    b = _operand(torch, "fp16", (max(k, 1), n), 6, False)[:k].contiguous()
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    consts = {"TILES_N": n // bn, "PROGRAMS": programs, "BM": bm, "BN": bn, "BK": bk}
    kernel[(programs,)](a, b, c, m, n, k, **consts, num_warps=4, num_stages=3)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=TOL["fp16"], atol=TOL["fp16"] * max(k, 1) ** 0.5)
    plan = despina.compile(kernel, f"*fp16:16,*fp16:16,*fp16:16,i32,i32:16,{_spec(k)}", consts, num_warps=4,
                           num_stages=3, target=target)
    fused = next(line for line in plan.asm["gpuir"].splitlines() if 'flattened = "yes' in line)
    assert "2 loads by cp.async" in fused


@pytest.mark.parametrize(("programs", "k"), [(1, 208), (3, 208), (5, 48), (3, 0)])
def test_a_flattened_tile_loop_stepping_its_pointers_is_pipelined(torch_cuda: Any, mma_sync_target: str, programs: int,
                                                                  k: int) -> None:
    _stepped(torch_cuda, stepped_mma_sync, mma_sync_target, programs, k)


@pytest.mark.parametrize(("programs", "k"), [(1, 208), (3, 208), (5, 48), (3, 0)])
def test_a_flattened_tile_loop_stepping_its_pointers_is_pipelined_on_the_device_s_target(
        torch_cuda: Any, programs: int, k: int) -> None:
    """On a 9.0 device: sm_90a, wgmma reading the cp.async ring."""
    major, minor = torch_cuda.cuda.get_device_capability()
    _stepped(torch_cuda, stepped_own, driver.target_for((major, minor)), programs, k)


def _pointer_persistent(torch: Any, kernel: Any, target: str, mnk: tuple[int, int, int], programs: int,
                        block: tuple[int, int, int, int]) -> None:
    """Tutorial 09's persistent matmul through pointers (benchmarks/kernels.py), flattened: a tile's offsets are
    carried through the fused loop and made for the next tile on a tile's last K step (passes/flatten.py)."""
    m, n, k = mnk
    bm, bn, bk, warps = block
    a = _operand(torch, "fp16", (m, max(k, 1)), 7, False)[:, :k].contiguous()
    b = _operand(torch, "fp16", (max(k, 1), n), 8, False)[:k].contiguous()
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    consts = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_SIZE_M": 2, "NUM_SMS": programs}
    kernel[(programs,)](a, b, c, m, n, k, a.stride(0), 1, b.stride(0), 1, c.stride(0), 1, **consts, num_warps=warps,
                        num_stages=3)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=TOL["fp16"], atol=TOL["fp16"] * max(k, 1) ** 0.5)
    sig = "*fp16:16,*fp16:16,*fp16:16," + ",".join(_spec(x) for x in (m, n, k, a.stride(0), 1, b.stride(0), 1, n, 1))
    plan = despina.compile(kernel, sig, consts, num_warps=warps, num_stages=3, target=target)
    fused = next(line for line in plan.asm["gpuir"].splitlines() if 'flattened = "yes' in line)
    aligned = sum(x.stride(0) % 16 == 0 for x in (a, b))  # cp.async needs rows known to start on 16 bytes
    assert f'pipeline = "3 stages, {aligned} loads by cp.async' in fused if aligned else 'pipeline = "none' in fused


POINTER_CASES = [((200, 136, 72), 3, (64, 64, 32, 4)), ((256, 256, 192), 1, (128, 128, 64, 8)),
                 ((333, 500, 256), 7, (128, 128, 64, 8)), ((128, 256, 0), 2, (64, 128, 32, 4)),
                 ((96, 64, 40), 9, (64, 64, 32, 4))]


@pytest.mark.parametrize(("mnk", "programs", "block"), POINTER_CASES)
def test_tutorial_09_s_pointer_persistent_matmul(torch_cuda: Any, mma_sync_target: str, tmp_path: Path,
                                                 mnk: tuple[int, int, int], programs: int,
                                                 block: tuple[int, int, int, int]) -> None:
    kernel = benchmark_kernels.load(tmp_path).matmul_persistent_kernel
    _pointer_persistent(torch_cuda, kernel, mma_sync_target, mnk, programs, block)


@pytest.mark.parametrize(("mnk", "programs", "block"), POINTER_CASES)
def test_tutorial_09_s_pointer_persistent_matmul_on_the_device_s_target(torch_cuda: Any, tmp_path: Path,
                                                                       mnk: tuple[int, int, int], programs: int,
                                                                       block: tuple[int, int, int, int]) -> None:
    """On a 9.0 device: sm_90a, wgmma reading the cp.async ring."""
    major, minor = torch_cuda.cuda.get_device_capability()
    kernel = benchmark_kernels.load(tmp_path).matmul_persistent_kernel
    _pointer_persistent(torch_cuda, kernel, driver.target_for((major, minor)), mnk, programs, block)


def test_the_daemon_runs_tutorial_09_s_pointer_persistent_matmul(gpu_device: driver.Device, tmp_path: Path,
                                                                on_daemon: GrpcDaemon) -> None:  # noqa: F811
    kernel = benchmark_kernels.load(tmp_path).matmul_persistent_kernel
    m, n, k = 200, 136, 72
    a, b = normals(9, (m, k), (k, n))
    c = np.full((m, n), np.nan, np.float16)
    kernel.run_remote[(3,)](a, b, c, m, n, k, k, 1, n, 1, n, 1, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_SIZE_M=2,
                            NUM_SMS=3, num_warps=4, num_stages=3)
    np.testing.assert_allclose(c.astype(np.float32), a.astype(np.float32) @ b.astype(np.float32), rtol=1e-2, atol=5e-2)
