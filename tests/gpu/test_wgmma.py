"""wgmma on a compute-capability-9.0 device (its default target is sm_90a): tiles that wgmma takes
run on it (the GPU IR says so) and match torch across shapes: ragged M and N, K not a multiple of
BLOCK_K, A and B each K-major or M/N-major, 32-, 64- and 128-byte swizzles, one and two warpgroups
along M or N, loops pipelined with a group in flight and unpipelined ones (operands stored first),
K below BLOCK_K and K = 0 (the accumulator is zeroed by wgmma's scale-d, and selected to zero where
the loop ran no iteration)."""

from __future__ import annotations

from typing import Any

import pytest

import despina

from .test_dot import _operand, matmul, triton_cdiv

# dtype, (M, N, K), (BM, BN, BK), warps, stages, layout ("nn"; "tn": A column-major; "nt": B
# column-major; "trans": B^T loaded and transposed by tl.trans)
CASES = [
    ("fp16", (256, 256, 256), (128, 128, 64), 8, 3, "nn"),
    ("fp16", (200, 136, 208), (128, 128, 64), 8, 3, "nn"),
    ("bf16", (256, 512, 320), (128, 256, 64), 8, 3, "nn"),
    ("fp16", (128, 256, 192), (64, 256, 64), 8, 3, "nn"),
    ("fp16", (192, 320, 96), (64, 128, 32), 4, 4, "tn"),
    ("bf16", (130, 200, 100), (128, 64, 64), 4, 2, "nt"),
    ("fp16", (256, 256, 128), (128, 128, 16), 4, 3, "nn"),
    ("fp16", (256, 256, 384), (128, 128, 128), 8, 2, "nn"),
    ("fp16", (256, 256, 256), (128, 128, 64), 8, 1, "nn"),
    ("fp16", (256, 256, 192), (128, 128, 64), 8, 3, "trans"),
    ("bf16", (256, 128, 256), (128, 128, 64), 8, 4, "tn"),
    # one iteration, K < BLOCK_K: scale-d 0 on the first K step, the masked rest adds zeros
    ("fp16", (256, 256, 40), (128, 128, 64), 8, 3, "nn"),
    ("bf16", (128, 256, 16), (128, 128, 64), 4, 3, "tn"),
    # K = 0: the loop runs no iteration and the accumulator (never zeroed by moves) must be zero
    ("fp16", (256, 128, 0), (128, 128, 64), 8, 3, "nn"),
    ("bf16", (128, 128, 0), (128, 128, 64), 4, 1, "nn"),
]
TOL = {"fp16": 1e-2, "bf16": 3e-2}


@pytest.fixture
def hopper(torch_cuda: Any, gpu_device: Any) -> Any:
    if gpu_device.capability != (9, 0):
        pytest.skip(f"wgmma needs a compute-capability-9.0 device, not {gpu_device}")
    assert gpu_device.target == "sm_90a"
    return torch_cuda


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{'x'.join(map(str, c[1]))}-b{'x'.join(map(str, c[2]))}-w{c[3]}-s{c[4]}-{c[5]}")
def test_wgmma_matmul_matches_torch(hopper: Any, case: tuple[Any, ...]) -> None:
    torch = hopper
    dtype, (m, n, k), (bm, bn, bk), warps, stages, layout = case
    consts = {"BM": bm, "BN": bn, "BK": bk, "TRANS_B": layout == "trans", "PRECISION": "ieee", "ACC": despina.language.float32}
    sig = f"*{dtype}:16,*{dtype}:16,*fp32:16," + ",".join(["i32"] * 9)
    planned = despina.compile(matmul, sig, consts, num_warps=warps, num_stages=stages, target="sm_90a")
    (dot,) = [line for line in planned.asm["gpuir"].splitlines() if " dot(" in line]
    assert 'engine = "wgmma.m64n' in dot, dot
    # K = 0: a slice of no columns of a real tensor (its pointer is not null); C starts as NaN
    a = _operand(torch, dtype, (m, max(k, 1)), 1, layout == "tn")[:, :k]
    b = _operand(torch, dtype, (max(k, 1), n), 2, layout in ("nt", "trans"))[:k]
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    grid = (triton_cdiv(m, bm), triton_cdiv(n, bn))
    matmul[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                 num_warps=warps, num_stages=stages, **consts)
    tol = TOL[dtype]
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=tol, atol=tol * k ** 0.5)
