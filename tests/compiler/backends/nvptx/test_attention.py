"""The flash-attention example (Triton's tutorial-06 forward pass) on tensor cores for sm_80, on the
CPU: both dots on mma.sync with the same warps, K (read transposed by strides) and V copied ahead by
16-byte cp.async and read with ldmatrix (K plain, being K-contiguous; V `.trans`), P passed from one
dot to the other in registers, Q converted once before the loop into shared memory and read from there
a K step at a time by each iteration's first dot (as Triton does: held in registers across the loop it
took 32 registers a thread at d128 on 8 warps, and ptxas spilled), the softmax in the accumulator's
layout, no local memory. Before, K's pointers shared V's layout and were read 2 bytes at a time, so K was
not pipelined, and the masked scores left the MMA layout through shared memory every iteration."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "examples"))

import flash_attention  # noqa: E402

import despina  # noqa: E402

from .loops import after_loop, pipelined_loop  # noqa: E402

# Q, K, V, Out, sm_scale, stride_h, stride_m, N_CTX as a launch on (heads, 2048, d) tensors specializes them.
SIG = "*fp16:16,*fp16:16,*fp16:16,*fp16:16,fp32,i32:16,i32:16,i32:16"


def _attention(head_dim: int, warps: int, causal: bool = False, target: str = "sm_80") -> Any:
    consts = {"HEAD_DIM": head_dim, "BLOCK_M": 128, "BLOCK_N": 64, "CAUSAL": causal}
    return despina.compile(flash_attention.attention_fwd, SIG, consts, num_warps=warps, num_stages=3, target=target)


@pytest.fixture(scope="module")
def d64() -> Any:
    return _attention(64, 4)


def _loop_ir(gpuir: str) -> str:
    start = gpuir.index("= for(")
    return gpuir[start : gpuir.index("\n  ) :", start)]


def test_the_gpu_ir_states_the_decisions(d64: Any) -> None:
    gpuir = d64.asm["gpuir"]
    assert re.findall(r'engine = "([^"]*)"', gpuir) == ["mma.sync.m16n8k16"] * 2
    assert 'pipeline = "3 stages, 2 loads by cp.async, ring of 49200 bytes, slots handed over by mbarriers"' in gpuir
    copies = re.findall(r'async_copy = "([^"]*)"', gpuir)
    assert copies == [  # K contiguous along its rows (head_dim), V along its columns
        "16-byte copies into swizzled_shared<vec=8, perPhase=1, maxPhase=8, order=[0, 1]>",
        "16-byte copies into swizzled_shared<vec=8, perPhase=1, maxPhase=8, order=[1, 0]>",
    ]
    # K's tile takes its own coalesced layout, contiguous along dimension 0.
    assert re.search(r"= blocked<spt=\[8, 1\], tpw=\[8, 4\], wpc=\[1, 4\], order=\[0, 1\]>", gpuir)
    # Both dots accumulate in one layout, warps stacked along M (chained dots, as Triton).
    assert len(set(re.findall(r"dot\(.*\) \{engine.*(#L\d+)$", gpuir, re.M))) == 1
    assert "mma<v2, warps=[4, 1], instr=[16, 8]>" in gpuir
    # In the loop only the dots' operands are converted (K, P and V); Q is stored in shared memory
    # before it (a swizzled buffer) and read from there as the first dot's A, and
    # `acc * alpha + tl.dot(p, v)` accumulates into acc.
    loop = _loop_ir(gpuir)
    assert loop.count("convert_layout(") == 3
    assert "convert_layout(" not in gpuir[: gpuir.index("= for(")]
    (q,) = re.findall(r"(%\d+) = local_alloc\(%\d+\) : shared<128x64xfp16> #L\d+$", gpuir, re.M)
    assert loop.count(f"local_load({q})") == 1
    assert not re.search(r"= add\(%\d+, %\d+\) : tile<128x64xfp32>", loop)


_loop = pipelined_loop


def test_k_and_v_are_copied_ahead_and_read_with_ldmatrix(d64: Any) -> None:
    ptx = d64.asm["ptx"]
    # Per thread a stage is 4 copies of K (64x64) and 4 of V: the prologue issues two stages, the loop one.
    assert ptx.count("cp.async.cg.shared.global") == 3 * 8
    body = _loop(ptx)
    assert "ld.global" not in body and "st.shared" not in body and "ld.shared" not in body
    assert "bar.sync" not in body  # the slots pass by mbarriers: the warps do not meet every iteration
    # K: 8 n8 tiles x 4 k16 steps, by pairs (16); Q, resident in shared memory: 2 m16 tiles x 4 k16 steps (8)
    assert body.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 16 + 8
    assert body.count("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") == 16  # V, the same
    assert body.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") == 2 * 64
    assert body.count("ex2.approx.ftz.f32") == 64 + 4  # P, and alpha for each of a thread's 4 rows
    assert not re.search(r"\b(ld|st)\.local", ptx)


@pytest.mark.parametrize(("head_dim", "warps"), [(64, 8), (128, 8)])
def test_larger_configurations_keep_p_in_registers(head_dim: int, warps: int) -> None:
    k = _attention(head_dim, warps, causal=True)
    body = _loop(k.asm["ptx"])
    assert "st.shared" not in body and "ld.shared" not in body and "bar.sync" not in body
    assert body.count("cp.async.cg.shared.global") == 2 * head_dim * 64 // 8 // (32 * warps)
    assert k.metadata["spill_stores"] == 0  # d128 spilled 48 bytes with Q held in registers


def test_d128_for_sm_90_reads_k_and_v_at_a_few_lane_bases() -> None:
    """K's and V's ring reads take split addresses (`ldmatrix.split_addresses`): every `ldmatrix` of the
    loop is `[base + imm]` over a few lane bases, and the slot's base is added to those. Before, V's 32
    reads were swizzled a row and column at a time, which left 28 lane offsets live across the loop:
    255 registers with spills, and ptxas ran each 16x8 tile of S through its K steps back to back
    (0.99x Triton's mma.sync path on the causal d128 row, 1.015x split; H200)."""
    k = _attention(128, 8, causal=True, target="sm_90")
    body = _loop(k.asm["ptx"])
    reads = re.findall(r"ldmatrix\.sync\.aligned\.m8n8\.x4(?:\.trans)?\.shared\.b16 \{[^}]*\}, \[(%r\d+)(?:\+\d+)?\]", body)
    assert len(reads) == 72  # Q: 8, K: 32, V: 32
    assert len(set(reads)) == 18  # K: 2, V: 8, Q: 8 (a K step each; Q is not a ring read); 44 before
    assert k.metadata["spill_stores"] == 0


@pytest.mark.parametrize(("head_dim", "causal"), [(64, False), (128, True)])
def test_sm_90a_runs_both_dots_on_wgmma_with_p_from_registers(head_dim: int, causal: bool) -> None:
    """On sm_90a both dots run on wgmma: Q is stored once before the loop in swizzle atoms, which the
    first dot's descriptors read in place; P, the first dot's accumulator rounded to fp16, is the
    second dot's A in registers as it lies (the A fragment of each warp's 16 rows). Before, the first
    dot stayed on mma.sync and P went through shared memory, fenced and waited for, every iteration:
    0.56-0.87x Triton on an H100."""
    k = _attention(head_dim, 8, causal=causal, target="sm_90a")
    gpuir = k.asm["gpuir"]
    assert re.findall(r'engine = "([^"]*)"', gpuir) == ["wgmma.m64n64k16", f"wgmma.m64n{head_dim}k16, A in registers"]
    assert gpuir.count('operand_a = "registers"') == 1
    block = head_dim if head_dim < 64 else 64  # the 128-byte swizzle's atom: 64 fp16 columns
    assert re.search(rf"= local_alloc\(%\d+\) : shared<128x{head_dim}xfp16> #L\d+$", gpuir, re.M)
    assert f"swizzled_shared<vec=8, perPhase=1, maxPhase=8, order=[1, 0], block={block}>" in gpuir
    ptx = k.asm["ptx"]
    body = _loop(ptx)
    # 8 warps = 2 warpgroups of 64 rows: per iteration head_dim / 16 K steps of S = Q K^T (both operands
    # from descriptors) and 64 / 16 of O += P V (A as four 32-bit registers).
    assert len(re.findall(r"wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 \{[^}]*\}, %rd\d+, %rd\d+", body)) == \
        head_dim // 16
    assert len(re.findall(rf"wgmma.mma_async.sync.aligned.m64n{head_dim}k16.f32.f16.f16 \{{[^}}]*\}}, "
                          r"\{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+", body)) == 64 // 16
    assert "st.shared" not in body and "fence.proxy.async" not in body
    assert k.metadata["spill_stores"] == 0 and k.metadata["ptxas_warnings"] == []


@pytest.mark.parametrize(("head_dim", "ring"), [(64, "ring of 65536 bytes in 4 slots, wgmma waits with 1 group in flight"),
                                                (128, "ring of 98304 bytes in 3 slots, wgmma waits with 1 group in "
                                                      "flight, copies after a second barrier")])
def test_sm_90a_leaves_o_plus_pv_in_flight_into_the_next_iteration(head_dim: int, ring: str) -> None:
    """O += P V is left running (`wait_group 1`) while the loop issues the next copies, waits for them
    and issues the next S = Q K^T, whose `wait_group 0` retires it before P is recomputed and O is
    rescaled (both computed from S: the data order that keeps LLVM from reading them early). V's slot
    outlives the group (a spare slot, or the copies after a second barrier), and the loop's result waits.
    On an H100: d128 0.93-0.95 -> 0.98-1.00x Triton (full), 1.02 -> 1.07x (causal); d64 the same or better."""
    k = _attention(head_dim, 8, target="sm_90a")
    assert ring in k.asm["gpuir"]
    ptx = k.asm["ptx"]
    body = _loop(ptx)
    waits = re.findall(r"wgmma.wait_group.sync.aligned (\d);", body)
    assert waits[0] == "0" and waits[-1] == "1"  # S waited for fully, O += P V left in flight
    assert "wgmma.wait_group.sync.aligned 0;" in after_loop(ptx)  # the loop's result is settled
    assert k.metadata["spill_stores"] == 0 and k.metadata["ptxas_warnings"] == []


def test_p_from_an_mma_sync_dot_keeps_its_wgmma_dot_synchronous() -> None:
    """Without a wgmma `wait_group 0` ahead of it in the body (S on mma.sync), nothing would retire O += P V
    before P's registers are recomputed: that dot waits for its own group."""
    consts = {"HEAD_DIM": 64, "BLOCK_M": 64, "BLOCK_N": 32, "CAUSAL": False}
    k = despina.compile(flash_attention.attention_fwd, SIG, consts, num_warps=4, num_stages=3, target="sm_90a")
    assert "wgmma waits" not in k.asm["gpuir"]
    assert re.findall(r"wgmma.wait_group.sync.aligned (\d);", _loop(k.asm["ptx"])) == ["0"]


def test_p_from_an_mma_sync_dot_feeds_a_wgmma_dot_in_registers() -> None:
    """A first dot that wgmma does not take (64x32 on 4 warps) stays on mma.sync; the second still takes
    P in registers: mma.sync's accumulator on [4, 1] warps already holds each warp's 16 rows as wgmma's
    A fragment wants them, so nothing goes through shared memory in the loop."""
    consts = {"HEAD_DIM": 64, "BLOCK_M": 64, "BLOCK_N": 32, "CAUSAL": False}
    k = despina.compile(flash_attention.attention_fwd, SIG, consts, num_warps=4, num_stages=3, target="sm_90a")
    engines = re.findall(r'engine = "([^"]*)"', k.asm["gpuir"])
    assert engines[0].startswith("mma.sync.m16n8k16 (not wgmma: ") and engines[1] == "wgmma.m64n64k16, A in registers"
    body = _loop(k.asm["ptx"])
    assert "st.shared" not in body and "fence.proxy.async" not in body
    assert len(re.findall(r"wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 \{[^}]*\}, \{%r\d+, %r\d+, %r\d+, %r\d+\}",
                          body)) == 32 // 16
