"""The flash-attention example on the GPU against torch's SDPA: causal and not, head dims, block
shapes and warps (causal attention was wrong from row 16 of each block: axis analysis let rows share
the causal mask's registers), in-process and through the daemon. Ragged N_CTX gives tiles whose mask
`cols < N_CTX` is mixed, and the causal diagonal tiles whose compare is: the lowering decides every other
tile's mask a thread at a time (lower/select.py)."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import flash_attention  # noqa: E402

import despina  # noqa: E402

from .test_execute import GrpcDaemon, gpu_daemon, on_daemon  # noqa: E402, F401 (fixtures)


def _matches_sdpa(torch: Any, heads: int, n_ctx: int, head_dim: int, blocks: tuple[int, int], warps: int,
                  causal: bool) -> None:
    q, k, v = (torch.randn((heads, n_ctx, head_dim), device="cuda", dtype=torch.float16) for _ in range(3))
    out = torch.empty_like(q)
    flash_attention.attention_fwd[(despina.cdiv(n_ctx, blocks[0]), heads)](
        q, k, v, out, 1.0 / math.sqrt(head_dim), q.stride(0), q.stride(1), n_ctx, HEAD_DIM=head_dim, BLOCK_M=blocks[0],
        BLOCK_N=blocks[1], CAUSAL=causal, num_warps=warps)
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(("heads", "n_ctx", "head_dim", "block", "warps"), [
    (2, 100, 32, 32, 4), (2, 256, 64, 32, 4), (2, 256, 64, 64, 4), (2, 256, 64, 64, 8), (4, 512, 64, 128, 8),
    (2, 200, 128, 64, 4),
])
def test_attention_matches_sdpa(torch_cuda: Any, heads: int, n_ctx: int, head_dim: int, block: int, warps: int,
                                causal: bool) -> None:
    torch_cuda.manual_seed(0)
    _matches_sdpa(torch_cuda, heads, n_ctx, head_dim, (block, block), warps, causal)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(("block_m", "block_n", "warps"), [(64, 32, 4), (128, 16, 8)])
def test_p_from_an_mma_sync_dot_into_a_wgmma_dot(torch_cuda: Any, block_m: int, block_n: int, warps: int,
                                                  causal: bool) -> None:
    """On sm_90a a first dot too narrow for wgmma stays on mma.sync while the second takes P from its
    registers on wgmma (`A in registers`): P moves from one accumulator layout into the other's A
    fragment. Elsewhere both dots run on mma.sync, which this checks as well."""
    torch_cuda.manual_seed(1)
    _matches_sdpa(torch_cuda, 2, 200, 64, (block_m, block_n), warps, causal)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_the_daemon_runs_the_attention(on_daemon: GrpcDaemon, causal: bool) -> None:  # noqa: F811
    rng = np.random.default_rng(7)
    heads, n_ctx, head_dim = 2, 200, 64
    q, k, v = (rng.standard_normal((heads, n_ctx, head_dim)).astype(np.float16) for _ in range(3))
    out = np.full_like(q, np.nan)
    flash_attention.attention_fwd.run_remote[(despina.cdiv(n_ctx, 64), heads)](
        q, k, v, out, 1.0 / math.sqrt(head_dim), n_ctx * head_dim, head_dim, n_ctx, HEAD_DIM=head_dim, BLOCK_M=64,
        BLOCK_N=64, CAUSAL=causal, num_warps=4)
    scores = q.astype(np.float32) @ k.astype(np.float32).transpose(0, 2, 1) / math.sqrt(head_dim)
    if causal:
        scores = np.where(np.tri(n_ctx, dtype=bool), scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    ref = (p / p.sum(-1, keepdims=True)) @ v.astype(np.float32)
    np.testing.assert_allclose(out.astype(np.float32), ref, rtol=2e-2, atol=2e-2)
