"""Pointer loads that read a tile of a tensor become descriptor loads that TMA copies (gpuir/pointer_tiles.py):
the benchmark's tutorial matmul for sm_90a, its maps (an unmasked dimension unbounded, a mask's bound the
extent, `clamp`), B read K-major through `trans` (fp8), a loop stepping by BLOCK_K, a producer warp on a pointer
loop; and the loads that stay on cp.async, each for its reason: a skewed mask, a stride not known positive, a unit
stride on neither dimension, a fill TMA does not give, stages too small for TMA to pay, sm_90. (Rows that wrap or
may start below 0: test_gpuir_wrap_versions.py.)"""

from __future__ import annotations

import re
from typing import Any

import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

import benchmark_kernels  # noqa: E402
from pointer_tile_kernels import stepped, ws_pointers  # noqa: E402

import despina  # noqa: E402
import despina.language as tl  # noqa: E402
from despina.compiler.backends.gpuir import affine  # noqa: E402

KERNELS = benchmark_kernels.load()
STRIDES = "i32:16+,i32:16+,i32:16+,i32:16+,i32:1,i32:16+,i32:1,i32:16+,i32:1"  # a launch at 4096^3 specializes so
UNBOUNDED = {"value": 2**31 - 1}


def _tutorial(sig: str = f"*fp16:16,*fp16:16,*fp16:16,{STRIDES}", bn: int = 128, bk: int = 64, target: str = "sm_90a",
              stages: int = 3) -> Any:
    return despina.compile(KERNELS.matmul_kernel, sig, {"BLOCK_M": 128, "BLOCK_N": bn, "BLOCK_K": bk}, num_warps=8,
                           num_stages=stages, target=target)


def _pipeline(k: Any) -> str:
    (found,) = re.findall(r'pipeline = "([^"]*)"', k.asm["gpuir"])
    return found


def test_the_tutorial_matmul_s_loads_are_copied_by_tma() -> None:
    k = _tutorial()
    gpuir, ptx = k.asm["gpuir"], k.asm["ptx"]
    assert _pipeline(k).startswith("3 stages, 2 loads by TMA")
    assert gpuir.count('origin = "pointers"') == 2 and " load(" not in gpuir[: gpuir.index("= cast(")]
    # A: rows unbounded, columns bounded by K (the mask); B: rows by K, columns unbounded; strides A's and B's rows
    a, b = k.metadata["tensor_maps"]
    assert (a["base"], a["shape"], a["strides"], a["box"], a["clamp"]) == ({"arg": 0}, [UNBOUNDED, {"arg": 5}],
                                                                          [{"arg": 6}], [128, 64], True)
    assert (b["base"], b["shape"], b["strides"], b["box"]) == ({"arg": 1}, [{"arg": 5}, UNBOUNDED], [{"arg": 8}], [64, 64])
    # The pointers the loop carried are gone with their loads: it carries the accumulator alone.
    assert re.search(r"= for\(%\d+, %\d+, %\d+, %\d+\) \{pipeline", gpuir)
    assert "cp.async.bulk.tensor.2d" in ptx and "cp.async.cg" not in ptx and "mbarrier.try_wait" in ptx
    assert k.metadata["spill_stores"] == 0 and k.metadata["ptxas_warnings"] == []


def test_a_k_major_b_is_loaded_as_its_transpose() -> None:
    """fp8's B, K-major (stride_bk = 1): the block [K, N] lies as [N, K] rows; it is loaded so and transposed."""
    sig = "*fp8e4nv:16,*fp8e4nv:16,*fp16:16,i32:16+,i32:16+,i32:16+,i32:16+,i32:1,i32:1,i32:16+,i32:16+,i32:1"
    k = _tutorial(sig, bn=256, bk=128)
    assert _pipeline(k).startswith("3 stages, 2 loads by TMA")
    b_load = re.search(r"(%\d+) = descriptor_load\(%1, [^)]*\) \{[^}]*shape = \[256, 128\]", k.asm["gpuir"])
    assert b_load and re.search(rf"= trans\({b_load.group(1)}\) \{{perm = \[1, 0\]\}}", k.asm["gpuir"])
    assert k.metadata["tensor_maps"][1]["shape"] == [UNBOUNDED, {"arg": 5}]  # B's N rows of K
    assert k.metadata["spill_stores"] == 0 and k.metadata["ptxas_warnings"] == []


STEPPED_SIG = "*fp16:16,*fp16:16,*fp32:16,i32,i32,i32,i32:16+,i32:16+"


@pytest.mark.parametrize("how", ["<", "<=", ">", ">="])
def test_masks_bound_the_map_and_a_loop_by_block_k_steps_it(how: str) -> None:
    """Each bound written four ways (`x < M`, `x <= M - 1`, `M > x`, `M - 1 >= x`), the same maps: a `<=` read as
    `x - M + 2 < 0` had made the extents M - 2 (no parameter, so no tile)."""
    k = despina.compile(stepped, STEPPED_SIG, {"BM": 128, "BN": 128, "BK": 64, "HOW": how}, num_warps=8,
                        num_stages=3, target="sm_90a")
    assert _pipeline(k).startswith("3 stages, 2 loads by TMA")
    a, b = k.metadata["tensor_maps"]
    assert a["shape"] == [{"arg": 3}, {"arg": 5}] and b["shape"] == [{"arg": 5}, {"arg": 4}]  # [M, K], [K, N]


@despina.jit
def refused(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
            HOW: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a_ptrs = a_ptr + rm[:, None] * stride_am + (k + rk)[None, :]
        if HOW == "no unit stride":
            a_ptrs = a_ptr + rm[:, None] * stride_am + (k + rk)[None, :] * stride_bk
        if HOW == "skewed mask":
            a = tl.load(a_ptrs, mask=rk[None, :] < K - k - rm[:, None], other=0.0)
        elif HOW == "fill of 1":
            a = tl.load(a_ptrs, mask=rk[None, :] < K - k, other=1.0)
        else:
            a = tl.load(a_ptrs, mask=rk[None, :] < K - k, other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * stride_bk + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


@pytest.mark.parametrize(("how", "sig"), [
    ("no unit stride", STEPPED_SIG),
    ("skewed mask", STEPPED_SIG), ("fill of 1", STEPPED_SIG),
    ("a stride that may be 0", "*fp16:16,*fp16:16,*fp32:16,i32,i32,i32,i32:16,i32:16+"),
    ("a stride not a multiple of 16 bytes", "*fp16:16,*fp16:16,*fp32:16,i32,i32,i32,i32,i32:16+"),
])
def test_a_load_that_is_no_proven_tile_stays_a_pointer_load(how: str, sig: str) -> None:
    """A's load stays a pointer load (cp.async, or a plain load where cp.async refuses it too); B's is a tile, of
    32 KiB an iteration alone (`MIN_STAGE_BYTES`)."""
    k = despina.compile(refused, sig, {"BM": 128, "BN": 256, "BK": 64, "HOW": how}, num_warps=8, num_stages=3,
                        target="sm_90a")
    gpuir = k.asm["gpuir"]
    assert gpuir.count('origin = "pointers"') == 1 and re.search(r"descriptor_load\(%1,", gpuir)
    assert re.search(r"= load\(", gpuir)


@despina.jit
def proven(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
           HOW: tl.constexpr):
    start = tl.program_id(0) * BM
    if HOW == "a start clamped at 0":
        start = tl.maximum(start - 8, 0)
    rm = start + tl.arange(0, BM)
    if HOW == "hinted rows":
        rm = tl.max_contiguous(tl.multiple_of(rm, BM), BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k + rk)[None, :], mask=rk[None, :] < K - k, other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * stride_bk + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


@pytest.mark.parametrize("how", ["a start clamped at 0", "hinted rows"])
def test_a_clamped_start_and_hinted_offsets_are_tiles(how: str) -> None:
    """`maximum(c, 0)` is non-negative whatever c is, and `tl.multiple_of` / `tl.max_contiguous` are the values
    they hint: both loads are tiles."""
    k = despina.compile(proven, STEPPED_SIG, {"BM": 128, "BN": 256, "BK": 64, "HOW": how}, num_warps=8, num_stages=3,
                        target="sm_90a")
    assert k.asm["gpuir"].count('origin = "pointers"') == 2


@despina.jit
def carried(a_ptr, b_ptr, c_ptr, K, stride_am, stride_bk, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
            HOW: tl.constexpr):
    """A's rows start at a value the K loop carries, and steps as HOW says."""
    start = tl.program_id(0) * BM
    rn, rk = tl.program_id(1) * BN + tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        rm = start + tl.arange(0, BM)
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * stride_bk + rn[None, :])
        acc = tl.dot(a, b, acc)
        if HOW == "stepped on":
            start = start + BM
        elif HOW == "selected":
            start = tl.where(k > BK, 0, start + BM)
        elif HOW == "stepped back":
            start = start - 1
    tl.store(c_ptr + tl.arange(0, BM)[:, None] * BN + rn[None, :], acc)


@pytest.mark.parametrize(("how", "tiles"), [("kept", 2), ("stepped on", 2), ("selected", 2), ("stepped back", 1)])
def test_a_start_a_loop_carries_is_proved_non_negative_as_it_steps(how: str, tiles: int) -> None:
    """Non-negative at entry and after every step (a select's values both so), given that it is before: A's load
    is a tile. Stepped back by 1 it may go below 0, and stays a pointer load (B's alone is a tile)."""
    k = despina.compile(carried, "*fp16:16,*fp16:16,*fp32:16,i32:16+,i32:16+,i32:16+",
                        {"BM": 128, "BN": 256, "BK": 64, "HOW": how}, num_warps=8, num_stages=3, target="sm_90a")
    assert k.asm["gpuir"].count('origin = "pointers"') == tiles


@despina.jit
def doubled(a_ptr, b_ptr, c_ptr, K, stride_am, stride_bk, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
            D: tl.constexpr):
    """A's rows start at the program id doubled D times, each a sum of the value and itself."""
    start = tl.program_id(0)
    for _ in tl.static_range(D):
        start = start + start
    rm, rn, rk = start * BM + tl.arange(0, BM), tl.program_id(1) * BN + tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * stride_bk + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + tl.arange(0, BM)[:, None] * BN + rn[None, :], acc)


def test_a_scalar_is_made_a_polynomial_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each doubling read its value twice: 2^24 polynomials for 24 of them (a compile of minutes), where each
    scalar is now made once."""
    calls = 0
    real = affine.Tiles.scalar

    def counted(self: affine.Tiles, v: Any) -> Any:
        nonlocal calls
        calls += 1
        assert calls < 1000, "Tiles.scalar called 1000 times for 24 doublings"
        return real(self, v)

    monkeypatch.setattr(affine.Tiles, "scalar", counted)
    k = despina.compile(doubled, "*fp16:16,*fp16:16,*fp32:16,i32:16+,i32:16+,i32:16+",
                        {"BM": 128, "BN": 256, "BK": 64, "D": 24}, num_warps=8, num_stages=3, target="sm_90a")
    assert k.asm["gpuir"].count('origin = "pointers"') == 2


def test_stages_of_fewer_bytes_than_tma_pays_for_stay_on_cp_async() -> None:
    """fp8 at 128x128x64: 16 KiB an iteration (`MIN_STAGE_BYTES`), whose tiles cp.async copies sooner."""
    sig = "*fp8e4nv:16,*fp8e4nv:16,*fp16:16,i32:16+,i32:16+,i32:16+,i32:16+,i32:1,i32:1,i32:16+,i32:16+,i32:1"
    assert _pipeline(_tutorial(sig, bn=128, bk=64)).startswith("3 stages, 2 loads by cp.async")
    assert _pipeline(_tutorial(sig, bn=256, bk=64)).startswith("3 stages, 2 loads by TMA")  # 24 KiB


def test_plain_sm_90_keeps_its_pointer_loads() -> None:
    k = _tutorial(target="sm_90")
    assert "descriptor_load" not in k.asm["gpuir"] and not k.metadata.get("tensor_maps")
    assert _pipeline(k).startswith("3 stages, 2 loads by cp.async")


def test_a_pointer_loop_of_tiles_gets_its_producer_warp() -> None:
    """Before, a loop whose loads were pointers could not be specialized (cp.async: every thread copies)."""
    k = despina.compile(ws_pointers, "*fp16:16,*fp16:16,*fp16:16,i32:16+,i32:16+,i32:16+", {"BM": 128, "BN": 128, "BK": 64},
                        num_warps=8, num_stages=3, target="sm_90a")
    (why,) = re.findall(r'warp_specialized = "([^"]*)"', k.asm["gpuir"])
    assert why.startswith("yes: a producer warp issues the copies")
