"""`select` (lower/select.py): a `tl.where` on a compare of index tiles is decided for a thread's whole
tile by one register's compare, and only a tile that is not all true compares and selects element by
element. The language suite's `test_where_on_index_compares` runs the kernels (interpreter and GPU)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "examples"))

import flash_attention  # noqa: E402

import despina  # noqa: E402
import despina.language as tl  # noqa: E402
from despina.compiler.backends.gpuir.encodings import Blocked  # noqa: E402
from despina.compiler.backends.gpuir.linear import LinearLayout  # noqa: E402
from despina.compiler.backends.gpuir.mma import Mma  # noqa: E402
from despina.compiler.backends.nvptx.lower.select import least_register  # noqa: E402

LAYOUTS = {
    "blocked 64x64, 4 warps": (Blocked((1, 4), (8, 4), (4, 1), (1, 0)).linear((64, 64)), 4),
    "blocked 64x64, column-major": (Blocked((4, 2), (4, 8), (1, 4), (0, 1)).linear((64, 64)), 4),
    "mma.sync 128x64, 4x2 warps": (Mma(2, (4, 2)).linear((128, 64)), 8),
    "wgmma 128x64, 2 warpgroups": (Mma(3, (8, 1), (16, 64)).linear((128, 64)), 8),
    "wgmma 128x128, 1 warpgroup": (Mma(3, (4, 1), (16, 128)).linear((128, 128)), 4),
}


@pytest.mark.parametrize("slope", [(1, -1), (-1, 1), (1, 0), (0, -1), (1, 1), (-1, -1)])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_least_register_holds_every_threads_least_sum(layout: str, slope: tuple[int, int]) -> None:
    ll, warps = LAYOUTS[layout]
    r = least_register(ll, slope)
    assert r is not None
    for lane in range(32):
        for warp in range(warps):
            sums = [sum(k * i for k, i in zip(slope, ll.index(s, lane, warp))) for s in range(ll.num_regs)]
            assert sums[r] == min(sums), (lane, warp)


def test_no_least_register_where_a_registers_index_is_xored_into_the_threads() -> None:
    # Lane 0 holds 0 (register 0) and 3 (register 1), lane 1 holds 1 and 2: no register is least in both.
    ll = LinearLayout.distributed((4,), ((3,),), ((1,),), ())
    assert least_register(ll, (1,)) is None
    assert least_register(ll, (0,)) == 0


@despina.jit
def masked_tile(x_ptr, out_ptr, shift, n, BLOCK: tl.constexpr, MODE: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + rows[:, None] * n + cols[None, :])
        if MODE == "index":
            keep = rows[:, None] >= cols[None, :] + shift
        elif MODE == "values":
            keep = x > 0.0
        elif MODE == "unsigned":  # a negative shift wraps inside the tile
            keep = rows[:, None].to(tl.uint32) >= (cols[None, :] + shift).to(tl.uint32)
        else:  # "stride": the rows' side steps by 2, which the analysis does not order
            keep = rows[:, None] * 2 >= cols[None, :] + shift
        tl.store(out_ptr + rows[:, None] * n + cols[None, :], tl.where(keep, x, -float("inf")))


@despina.jit
def masked_once(x_ptr, out_ptr, shift, n, BLOCK: tl.constexpr, MODE: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + rows[:, None] * n + cols[None, :])
    keep = rows[:, None] >= cols[None, :] + shift
    tl.store(out_ptr + rows[:, None] * n + cols[None, :], tl.where(keep, x, -float("inf")))


def _llir(mode: str, block: int = 64) -> str:
    kernel = masked_once if mode == "once" else masked_tile
    k = despina.compile(kernel, "*fp32:16,*fp32:16,i32,i32", {"BLOCK": block, "MODE": mode}, num_warps=4,
                        target="sm_90")
    return str(k.asm["llir"])


def test_a_compare_of_index_tiles_branches_around_the_elementwise_selects() -> None:
    """64x64 on 4 warps: 32 elements a thread. One compare decides (LLVM writes `rows >= cols + shift` as
    `rows < cols + shift` and swaps the select's values); the other 31 compares and their selects sit in
    the block that the branch skips when it is true (where it is false, LLVM folds its own select), with
    32 phis where the two ways meet."""
    text = _llir("index")
    mixed = text[text.index("select.mixed:") : text.index("select.join:")]
    assert len(re.findall(r"= icmp s[lg][te] i32", mixed)) == 31 and len(re.findall(r"= select i1", mixed)) == 31
    branch = re.search(r"br i1 %\S+, label %select\.(join|mixed), label %select\.(mixed|join)", text)
    assert branch is not None
    deciding = text[text.rindex(":", 0, text.rindex("\n\n", 0, branch.start())) : branch.start()]  # its block
    assert len(re.findall(r"= icmp", deciding)) == 1 and "= select i1" not in deciding
    join = text[text.index("select.join:") :]
    assert len(re.findall(r"= phi ", join[: join.index("\n\n")])) == 32


@pytest.mark.parametrize("mode, block", [("values", 64), ("stride", 64), ("unsigned", 64), ("index", 16),
                                         ("once", 64)])
def test_other_selects_stay_elementwise(mode: str, block: int) -> None:
    """A compare of loaded values, an index stepping by 2, an unsigned compare, 2 elements a thread, or a
    select outside a loop: no branch."""
    text = _llir(mode, block)
    assert "select.mixed" not in text and "= select" in text


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_the_causal_attention_loop_masks_only_tiles_that_need_it(target: str) -> None:
    sig = "*fp16:16,*fp16:16,*fp16:16,*fp16:16,fp32,i32:16,i32:16,i32:16"
    consts = {"HEAD_DIM": 64, "BLOCK_M": 128, "BLOCK_N": 64, "CAUSAL": True}
    k = despina.compile(flash_attention.attention_fwd, sig, consts, num_warps=8, num_stages=3, target=target)
    text = str(k.asm["llir"])
    assert text.count("select.mixed:") == 1
    assert k.metadata["spill_stores"] == 0 and not k.metadata["ptxas_warnings"]
