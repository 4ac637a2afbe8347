"""Rows past a matrix's edge that only masked stores read (gpuir/masked_rows.py): which loads a wrap's rows reach,
and along which dimension, where the store's mask drops them, and the refusals (rows shifted, bounded by another
value, unmasked, read by a load's mask, summed over); the maps and guards those give a compiled kernel; a count of
tiles a persistent loop carries that is its tile from one step before the loop (tutorial 09's `tile_id_c`), and
not from 0 or 2 steps."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

from pointer_tile_kernels import edge_reads, k_loop, tile_ir  # noqa: E402

import despina  # noqa: E402
import despina.language as tl  # noqa: E402
from despina.compiler.backends.gpuir.affine import Tiles  # noqa: E402
from despina.compiler.backends.gpuir.masked_rows import Same, masked_loads  # noqa: E402
from despina.compiler.ir.core import Module, Op  # noqa: E402
from despina.compiler.passes.rewrite import users  # noqa: E402

HOWS = ["as written", "B K-major", "rows <=", "rows shifted", "rows and bound shifted", "rows bounded by K", "rows unmasked", "rows read by a mask",
        "summed over rows", "row sums"]


def _edge_ir(how: str) -> Module:
    a, b, c = np.zeros((200, 96), np.float16), np.zeros((96, 144), np.float16), np.zeros((200, 144), np.float32)
    return tile_ir(edge_reads, (a, b, c, 200, 144, 96), {"BM": 64, "BN": 64, "BK": 32, "HOW": how})


@pytest.mark.parametrize("how", HOWS)
def test_the_loads_a_wrap_reaches_where_the_store_drops_its_rows(how: str) -> None:
    """`rm % M` reaches A's load along its rows, `rn % N` B's along its columns (along its rows, B K-major, which
    `trans` makes the columns). None where a store may keep an element computed from rows past M: a sum over the
    rows mixes them into every element (the rows' sums, stored masked by M, keep none); and `c + 1 + i < M + 1`, as
    each side is compared apart (`(cm + d) < (M + d)` is another test where M + d overflows). None for the columns
    where each row's sum mixes them."""
    module = _edge_ir(how)
    fn = module.kernel
    tiles = Tiles(fn, module.attrs)
    rm, rn = [op for op in fn.body.ops if op.name == "rem"]
    loads = [op for op in fn.walk() if op.name == "load"]
    found = []
    for wrap in (rm, rn):
        x, bound = wrap.operands
        c, m = tiles.form(x, (0,)), tiles.form(bound, (0,))
        assert c is not None and m is not None
        found.append(masked_loads(users(fn), tiles, fn.body, wrap, c.const, m.const))
    rows_kept = how in ("as written", "B K-major", "rows <=", "row sums")
    assert found[0] == ({loads[0]: 0} if rows_kept else None)
    assert found[1] == (None if how == "row sums" else {loads[1]: 0 if how == "B K-major" else 1})


EDGE_SIG = "*fp16:16,*fp16:16,*fp32:16,i32,i32:16+,i32:16+"
UNBOUNDED = {"value": 2**31 - 1}


@pytest.mark.parametrize(("how", "rows", "columns"), [
    ("as written", True, True), ("B K-major", True, True), ("rows <=", True, True), ("rows shifted", False, True),
    ("rows and bound shifted", False, True),
    ("rows bounded by K", False, True), ("rows unmasked", False, True), ("rows read by a mask", False, True),
    ("summed over rows", False, True), ("row sums", True, False)])
def test_rows_past_m_are_read_masked_only_where_no_store_keeps_them(how: str, rows: bool, columns: bool) -> None:
    """Compiled: where the store's mask drops every row past M (`c + i < M`, c the same start), the version reads A's rows
    masked, its map ending at M, and the guard does not ask `M - c >= BM`; elsewhere the rows must not wrap. Likewise
    B's columns and N; a sum over the rows refuses the rows, and the rows' sums (stored masked by M) the columns."""
    k = despina.compile(edge_reads, EDGE_SIG, {"BM": 128, "BN": 256, "BK": 64, "HOW": how}, num_warps=8,
                        num_stages=3, target="sm_90a")
    a, b = k.metadata["tensor_maps"]
    gpuir = k.asm["gpuir"]
    assert gpuir[: gpuir.index("= if(")].count("= sub(") == 2 - rows - columns, how  # M - c >= B, for each that must
    assert a["shape"][0] == ({"arg": 3} if rows or how == "rows read by a mask" else UNBOUNDED), how
    n_k = [{"arg": 4}, {"arg": 5}] if how == "B K-major" else [{"arg": 5}, {"arg": 4} if columns else UNBOUNDED]
    assert b["shape"] == n_k, how


@despina.jit
def counted(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
            NUM_SMS: tl.constexpr, FROM: tl.constexpr):
    """A persistent loop whose store's rows come from a count of tiles it carries, FROM steps before the loop's first
    tile and stepped before it is read: from 1 step before, the count is the loop's tile."""
    num_n = tl.cdiv(N, BN)
    count = tl.program_id(0) - FROM * NUM_SMS
    for tile in tl.range(tl.program_id(0), tl.cdiv(M, BM) * num_n, NUM_SMS, flatten=True):
        rm = (tile // num_n) * BM + tl.arange(0, BM)
        rn = (tile % num_n) * BN + tl.arange(0, BN)
        acc = k_loop(a_ptr, b_ptr, tl.where(rm < M, rm, 0), tl.where(rn < N, rn, 0), N, K, BM, BN, BK)
        count += NUM_SMS
        cm = (count // num_n) * BM + tl.arange(0, BM)
        tl.store(c_ptr + cm[:, None] * N + rn[None, :], acc, mask=(cm[:, None] < M) & (rn[None, :] < N))


@pytest.mark.parametrize(("start", "rows_masked"), [(1, True), (0, False), (2, False)])
def test_a_count_of_tiles_is_the_tile_only_from_one_step_before(start: int, rows_masked: bool) -> None:
    """The store's rows are the loads' rows only where the count is the tile: A's rows are then read masked, else
    they must not wrap (B's columns, stored under the loop's own tile, are read masked in each case)."""
    k = despina.compile(counted, EDGE_SIG, {"BM": 128, "BN": 128, "BK": 64, "NUM_SMS": 132, "FROM": start},
                        num_warps=8, num_stages=3, target="sm_90a")
    a, b = k.metadata["tensor_maps"]
    assert a["shape"] == [{"arg": 3} if rows_masked else UNBOUNDED, {"arg": 5}]
    assert b["shape"] == [{"arg": 5}, {"arg": 4}]


@pytest.mark.parametrize(("start", "same"), [(1, True), (0, False), (2, False)])
def test_the_store_s_tile_is_the_loop_s_from_one_step_before(start: int, same: bool) -> None:
    """`Same`: the store's row start, computed from the count, is the loads' (from the loop's tile) only where the
    count starts one step before the loop."""
    a, b, c = np.zeros((200, 96), np.float16), np.zeros((96, 128), np.float16), np.zeros((200, 128), np.float32)
    module = tile_ir(counted, (a, b, c, 200, 128, 96), {"BM": 64, "BN": 64, "BK": 32, "NUM_SMS": 3, "FROM": start})
    tiles = Tiles(module.kernel, module.attrs)
    body = next(op for op in module.kernel.body.ops if op.name == "for").regions[0]
    quotients: list[Op] = [op for op in body.ops if op.name == "floordiv"]  # the tile's row, then the count's
    assert len(quotients) == 2
    assert Same(tiles)(quotients[0].result, quotients[1].result) == same
