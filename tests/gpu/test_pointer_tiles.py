"""Pointer loads copied by TMA on a compute-capability-9.0 device (gpuir/pointer_tiles.py): the benchmark's tutorial
matmul (fp16, bf16; K ragged, N ragged, whose unmasked columns TMA reads on into the next rows as the pointers
do; every row stride a multiple of 16 elements, as TMA needs), B K-major through `trans` (fp16 and fp8), a loop stepping by BLOCK_K with masks on every dimension, a loop
copying one load by TMA and one by cp.async, a producer warp on a pointer loop, K = 0 and a negative K (whose maps
are an empty tensor's), against torch, each checked to have taken TMA; and the same kernel run by the daemon."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import benchmark_kernels
import numpy as np
import pytest
from pointer_tile_kernels import stepped, ws_pointers

import despina
from despina.runtime import driver

from .hopper import normals, require_tma
from .test_dot import TORCH
from .test_execute import GrpcDaemon, gpu_daemon, on_daemon  # noqa: F401 (fixtures)


@pytest.fixture
def hopper(torch_cuda: Any, gpu_device: Any, fresh_cache: Path) -> Any:
    if gpu_device.capability != (9, 0):
        pytest.skip(f"TMA copies pointer tiles in wgmma loops on a compute-capability-9.0 device, not {gpu_device}")
    return torch_cuda


def _compiled(kernel: Any, args: tuple[Any, ...], consts: dict[str, Any], warps: int, stages: int) -> Any:
    from despina.runtime import kernels

    options = kernel.options({"num_warps": warps, "num_stages": stages}, interpret=False)
    k, _ = kernels.local(kernel.ir(kernel.specialize(kernel.bind(args, consts), options), options), options, "sm_90a")
    return k


def _operand(torch: Any, dtype: str, rows: int, cols: int, seed: int, pad: int = 0) -> Any:
    """A rows x cols matrix in a buffer `pad` elements longer (what unmasked reads past its end find)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    flat = torch.randn(rows * cols + pad, generator=g, device="cuda", dtype=torch.float32)
    flat = flat.to(getattr(torch, "float8_e4m3fn" if dtype == "fp8e4nv" else TORCH[dtype]))
    return flat[: rows * cols].view(rows, cols)


# dtype, (M, N, K), (BM, BN, BK), warps, stages, B K-major
TUTORIAL = [
    ("fp16", (256, 256, 256), (128, 128, 64), 8, 3, False),
    ("bf16", (256, 512, 208), (128, 256, 64), 8, 3, False),  # K ragged: the mask's zeros
    ("fp16", (128, 208, 144), (128, 128, 64), 8, 4, False),  # N ragged: B's columns read on into the next row
    ("fp16", (256, 256, 48), (128, 128, 64), 4, 2, False),  # one iteration, K < BLOCK_K
    ("fp16", (256, 256, 320), (128, 128, 64), 8, 3, True),  # B K-major: loaded as [N, K], transposed
    ("fp8e4nv", (256, 256, 384), (128, 256, 128), 8, 3, True),
]


@pytest.mark.parametrize("case", TUTORIAL, ids=lambda c: f"{c[0]}-{'x'.join(map(str, c[1]))}-b{'x'.join(map(str, c[2]))}"
                         f"-w{c[3]}-s{c[4]}{'-kmajor' if c[5] else ''}")
def test_the_tutorial_matmul_through_tma_matches_torch(hopper: Any, tmp_path: Path, case: tuple[Any, ...]) -> None:
    torch = hopper
    dtype, (m, n, k), (bm, bn, bk), warps, stages, k_major = case
    kernel = benchmark_kernels.load(tmp_path).matmul_kernel
    a = _operand(torch, dtype, m, k, 1, pad=bk * m)
    b = _operand(torch, dtype, n, k, 2, pad=bk * n).t() if k_major else _operand(torch, dtype, k, n, 2, pad=bk * n + bn)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    args = (a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    consts = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}
    kernel[(despina.cdiv(m, bm), despina.cdiv(n, bn))](*args, **consts, num_warps=warps, num_stages=stages)
    want = a.double() @ b.double()
    tol = {"fp16": 1e-2, "bf16": 3e-2, "fp8e4nv": 2e-2}[dtype]
    torch.testing.assert_close(c.double(), want.half().double(), rtol=tol, atol=tol * max(k, 1) ** 0.5)
    assert _compiled(kernel, args, consts, warps, stages).asm["gpuir"].count('origin = "pointers"') == 2


@pytest.mark.parametrize("lower_a", [False, True])
@pytest.mark.parametrize(("mnk", "stages"), [((200, 136, 208), 3), ((130, 264, 1000), 4), ((64, 64, 0), 3),
                                             ((64, 64, -5), 3)])
def test_masked_stepped_loads_match_torch(hopper: Any, mnk: tuple[int, int, int], stages: int, lower_a: bool) -> None:
    """K = 0 and a negative K run no iteration; their maps are an empty tensor's (a negative size clamps to 0)."""
    torch = hopper
    m, n, k = mnk
    kk = max(k, 0)
    a = _operand(torch, "fp16", m, 1008, 3)[:, :kk]  # rows 1008 apart: 2016 bytes, a multiple of 16
    b = _operand(torch, "fp16", kk, 272, 4)[:, :n]
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    args = (a, b, c, m, n, k, 1008, 272)
    consts = {"BM": 128, "BN": 256, "BK": 64, "LOWER_A": lower_a}  # B's tile alone is 32 KiB (MIN_STAGE_BYTES)
    stepped[(despina.cdiv(m, 128), despina.cdiv(n, 256))](*args, **consts, num_warps=8, num_stages=stages)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-2, atol=1e-2 * max(kk, 1) ** 0.5)
    gpuir = _compiled(stepped, args, consts, 8, stages).asm["gpuir"]
    assert gpuir.count('origin = "pointers"') == (1 if lower_a else 2)
    # K a multiple of 16: A's masked rows are copied 16 bytes at a time by cp.async, in one ring with B's TMA copies
    assert ("1 loads by cp.async and 1 loads by TMA" in gpuir) == (lower_a and k % 16 == 0)


@pytest.mark.parametrize("how", ["<=", ">", ">="])
def test_bounds_written_other_ways_round_match_torch(hopper: Any, how: str) -> None:
    """`x <= M - 1`, `M > x`, `M - 1 >= x` (pointer_tile_kernels.below): the maps' extents are M, N and K as for
    `x < M`, so that TMA fills exactly what the masks exclude."""
    torch = hopper
    m, n, k = 200, 136, 208
    a, b = _operand(torch, "fp16", m, 1008, 15)[:, :k], _operand(torch, "fp16", k, 272, 16)[:, :n]
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    args = (a, b, c, m, n, k, 1008, 272)
    consts = {"BM": 128, "BN": 256, "BK": 64, "HOW": how}
    stepped[(despina.cdiv(m, 128), despina.cdiv(n, 256))](*args, **consts, num_warps=8, num_stages=3)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-2, atol=1e-2 * k**0.5)
    assert _compiled(stepped, args, consts, 8, 3).asm["gpuir"].count('origin = "pointers"') == 2


@pytest.mark.parametrize(("mnk", "stages"), [((256, 256, 512), 3), ((128, 256, 208), 4), ((256, 128, 64), 2)])
def test_a_specialized_pointer_loop_matches_torch(hopper: Any, mnk: tuple[int, int, int], stages: int) -> None:
    torch = hopper
    m, n, k = mnk
    a = _operand(torch, "fp16", m, k, 5, pad=64 * 128)
    b = _operand(torch, "fp16", n, k, 6, pad=64 * 128)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    args = (a, b, c, m, n, k)
    ws_pointers[(despina.cdiv(m, 128), despina.cdiv(n, 128))](*args, BM=128, BN=128, BK=64, num_warps=8,
                                                                num_stages=stages)
    torch.testing.assert_close(c.double(), (a.double() @ b.double().T).half().double(), rtol=1e-2, atol=1e-2 * k**0.5)
    gpuir = _compiled(ws_pointers, args, {"BM": 128, "BN": 128, "BK": 64}, 8, stages).asm["gpuir"]
    assert 'warp_specialized = "yes' in gpuir and gpuir.count('origin = "pointers"') == 2


def test_the_daemon_runs_the_pointer_tile_kernel(gpu_device: driver.Device, on_daemon: GrpcDaemon) -> None:  # noqa: F811
    """The same kernel through `run_remote`: the daemon compiles it and encodes the pointer loads' maps."""
    require_tma(gpu_device)
    m, n, k = 256, 128, 200
    a, b = normals(7, (m, 1008), (k, 272))
    c = np.full((m, n), np.nan, np.float32)
    stepped.run_remote[(2, 1)](a, b, c, m, n, k, 1008, 272, BM=128, BN=256, BK=64, LOWER_A=False, num_warps=8,
                               num_stages=3)
    want = a[:, :k].astype(np.float32) @ b[:, :n].astype(np.float32)
    np.testing.assert_allclose(c, want, rtol=1e-2, atol=1e-1)
