"""The flash-attention example on the GPU against torch's SDPA: causal and not, head dims, block
shapes and warps (causal attention was wrong from row 16 of each block: axis analysis let rows share
the causal mask's registers)."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import flash_attention  # noqa: E402

import despina  # noqa: E402


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
