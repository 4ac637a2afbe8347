"""Tensor-core layouts, element by element against the PTX ISA's fragment tables and Triton's
linear-layout bases (Triton 3.6, LinearLayoutConversions.cpp)."""

from __future__ import annotations

import pytest

from despina.compiler.backends.gpuir.mma import Mma, MmaOperand, warps_per_tile_v2


def _t(bases: list[list[int]]) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(b) for b in bases)


def test_mma_v2_accumulator_matches_triton() -> None:
    ll = Mma(2, (2, 2)).linear((32, 32))
    assert ll.reg == _t([[0, 1], [8, 0], [0, 16]])
    assert ll.lane == _t([[0, 2], [0, 4], [1, 0], [2, 0], [4, 0]])
    assert ll.warp == _t([[0, 8], [16, 0]])


def test_mma_v3_accumulator_matches_triton() -> None:
    ll = Mma(3, (4, 1), (16, 64)).linear((64, 64))
    assert ll.reg == _t([[0, 1], [8, 0], [0, 8], [0, 16], [0, 32]])
    assert ll.warp == _t([[16, 0], [32, 0]])


def test_dot_operands_match_triton() -> None:
    parent = Mma(2, (2, 2))
    a = MmaOperand(0, parent, 2).linear((32, 32))
    assert a.reg == _t([[0, 1], [8, 0], [0, 8], [0, 16]])
    assert a.warp == _t([[0, 0], [16, 0]])
    b = MmaOperand(1, parent, 2).linear((32, 32))
    assert b.reg == _t([[1, 0], [8, 0], [16, 0], [0, 16]])
    assert b.lane == _t([[2, 0], [4, 0], [0, 1], [0, 2], [0, 4]])
    assert b.warp == _t([[0, 8], [0, 0]])
    a8 = MmaOperand(0, Mma(2, (1, 1)), 8).linear((16, 32))
    # Triton keeps the fifth register base, outside the 16x32 tile, as a zero basis; it is dropped
    # here (the same elements in the same places, without the copy).
    assert a8.reg == _t([[0, 1], [0, 2], [0, 4], [8, 0]])
    assert a8.lane == _t([[0, 8], [0, 16], [1, 0], [2, 0], [4, 0]])


def _ptx_a(kind: str, lane: int, i: int) -> tuple[int, int]:
    """(row, col) of A fragment register element `i` of `lane` (PTX ISA, mma.m16n8kK)."""
    g, t = lane >> 2, lane % 4
    if kind == "f16":  # m16n8k16, a0..a7
        return g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2)
    if kind == "s8":  # m16n8k32, a0..a15
        return g + 8 * ((i >> 2) & 1), 4 * t + (i & 3) + 16 * (i >> 3)
    return g + 8 * (i & 1), t + 4 * (i >> 1)  # tf32 m16n8k8, a0..a3


def _ptx_b(kind: str, lane: int, i: int) -> tuple[int, int]:
    g, t = lane >> 2, lane % 4
    if kind == "f16":
        return 2 * t + (i & 1) + 8 * (i >> 1), g
    if kind == "s8":
        return 4 * t + (i & 3) + 16 * (i >> 2), g
    return t + 4 * i, g


@pytest.mark.parametrize("kind,k_width,k", [("f16", 2, 16), ("s8", 4, 32), ("tf32", 1, 8)])
def test_one_instruction_fragments_match_the_ptx_tables(kind: str, k_width: int, k: int) -> None:
    parent = Mma(2, (1, 1))
    a = MmaOperand(0, parent, k_width).linear((16, k))
    b = MmaOperand(1, parent, k_width).linear((k, 8))
    c = parent.linear((16, 8))
    for lane in range(32):
        assert [a.index(r, lane, 0) for r in range(a.num_regs)] == [_ptx_a(kind, lane, i) for i in range(a.num_regs)]
        assert [b.index(r, lane, 0) for r in range(b.num_regs)] == [_ptx_b(kind, lane, i) for i in range(b.num_regs)]
        g, t = lane >> 2, lane % 4
        assert [c.index(r, lane, 0) for r in range(4)] == [(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1)]


@pytest.mark.parametrize("shape,warps", [((128, 128), (4, 2)), ((64, 256), (2, 4)), ((16, 64), (1, 4)), ((128, 64), (8, 1))])
def test_layouts_cover_every_element_once_per_copy(shape: tuple[int, int], warps: tuple[int, int]) -> None:
    parent = Mma(2, warps)
    nw = warps[0] * warps[1]
    for ll in (parent.linear(shape), MmaOperand(0, parent, 2).linear((shape[0], 64)), MmaOperand(1, parent, 2).linear((64, shape[1]))):
        seen = [ll.index(r, lane, w) for r in range(ll.num_regs) for lane in range(32) for w in range(nw)]
        assert set(seen) == {(i, j) for i in range(ll.shape[0]) for j in range(ll.shape[1])}


def test_acc_of_one_dot_is_the_a_operand_of_the_next() -> None:
    """Attention's P stays in registers: with warps only along M, the fp32 accumulator's layout is
    the A operand's (kWidth 2) over the same tile."""
    parent = Mma(2, (4, 1))
    assert parent.linear((64, 64)) == MmaOperand(0, parent, 2).linear((64, 64))


@pytest.mark.parametrize(
    "m,n,warps,expected",
    [(128, 128, 8, (2, 4)), (128, 256, 8, (2, 4)), (64, 64, 4, (2, 2)), (16, 16, 4, (1, 4)), (256, 128, 8, (4, 2)), (32, 32, 8, (2, 4))],
)
def test_warps_per_tile_v2(m: int, n: int, warps: int, expected: tuple[int, int]) -> None:
    assert warps_per_tile_v2(m, n, warps) == expected
