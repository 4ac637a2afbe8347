"""Tensor-core layouts: the accumulator of `mma.sync` and its two operands, as linear layouts.

`Mma(version=2, warps_per_cta=(wm, wn))` is the result layout of a dot on `mma.sync.m16n8kK`:
one instruction covers a 16x8 tile, each lane holding (g, 2t), (g, 2t+1), (g+8, 2t),
(g+8, 2t+1) with g = lane / 4, t = lane % 4 (the PTX ISA's C fragment). Warps tile the result
N-fastest; repetitions cover the rest, N first. `MmaOperand(op_idx, parent, k_width)` is an
operand of such a dot: `k_width` consecutive K elements per register pair (32 bits: 2 for 16-bit
types, 4 for 8-bit, 1 for tf32), the A fragment (g, k) with rows g, g+8, and the B fragment
(k, g); warps along the other result dimension hold copies. These are Triton's
`#nvidia_mma<{versionMajor = 2}>` and `#dot_op<{kWidth}>` (LinearLayoutConversions.cpp).
Version 3 (wgmma, m64nNk16) has its instruction shape here already; its lowering is part 2.
"""

from __future__ import annotations

from dataclasses import dataclass

from .linear import Bases, Basis, LinearLayout, log2


def _at(rank: int, m: int, n: int) -> Basis:
    return (0,) * (rank - 2) + (m, n)


def _fit(bases: list[Basis], shape: tuple[int, ...]) -> list[Basis]:
    """Zero the bases that fall outside the tile (replication: the tile is smaller than the
    hardware's)."""
    return [b if all(x < s for x, s in zip(b, shape)) else (0,) * len(shape) for b in bases]


def _reps(shape: tuple[int, ...], covered: tuple[int, int], dims: tuple[int, int]) -> list[Basis]:
    """Register bases that repeat a covered [m, n] tile over the rest of `shape`, in `dims`
    order (the first listed dimension fastest)."""
    rank = len(shape)
    out: list[Basis] = []
    for d in dims:
        size = covered[d]
        while size < shape[rank - 2 + d]:
            out.append(_at(rank, size, 0) if d == 0 else _at(rank, 0, size))
            size *= 2
    return out


@dataclass(frozen=True)
class Mma:
    """The accumulator of a tensor-core dot: `version` 2 is mma.sync, 3 wgmma."""

    version: int
    warps_per_cta: tuple[int, int]
    instr_shape: tuple[int, int] = (16, 8)

    rank = 2

    def warp_bases(self, rank: int) -> list[Basis]:
        wm, wn = self.warps_per_cta
        im, in_ = self.instr_shape
        if self.version == 3:  # warpgroups stack along M
            return [_at(rank, 16 << i, 0) for i in range(log2(wm))] + [_at(rank, 0, in_ << i) for i in range(log2(wn))]
        return [_at(rank, 0, in_ << i) for i in range(log2(wn))] + [_at(rank, im << i, 0) for i in range(log2(wm))]

    def linear(self, shape: tuple[int, ...]) -> LinearLayout:
        rank = len(shape)
        im, in_ = self.instr_shape
        lane = [_at(rank, 0, 2), _at(rank, 0, 4), _at(rank, 1, 0), _at(rank, 2, 0), _at(rank, 4, 0)]
        reg = [_at(rank, 0, 1), _at(rank, 8, 0)] + [_at(rank, 0, 8 << i) for i in range(log2(in_ // 8))]
        wm, wn = self.warps_per_cta
        reg += _reps(shape, (im * wm, in_ * wn), (1, 0))
        warp = _fit(self.warp_bases(rank), shape)
        return LinearLayout.distributed(shape, _regs(reg, shape), tuple(_fit(lane, shape)), tuple(warp))

    def __str__(self) -> str:
        return f"mma<v{self.version}, warps={list(self.warps_per_cta)}, instr={list(self.instr_shape)}>"


@dataclass(frozen=True)
class MmaOperand:
    """Operand `op_idx` (0 = A, 1 = B) of a tensor-core dot whose result has layout `parent`."""

    op_idx: int
    parent: Mma
    k_width: int

    rank = 2

    @property
    def instr_k(self) -> int:
        """K of one instruction: 16 for 16-bit types (m16n8k16), 32 for 8-bit, 8 for tf32."""
        return 8 * self.k_width

    def linear(self, shape: tuple[int, ...]) -> LinearLayout:
        rank = len(shape)
        kw = self.k_width
        wm, wn = self.parent.warps_per_cta
        k_bits = [1 << i for i in range(log2(kw))]
        pw = self.parent.warp_bases(rank)
        if self.op_idx == 0:
            reg = [_at(rank, 0, k) for k in k_bits] + [_at(rank, 8, 0), _at(rank, 0, 4 * kw)]
            lane = [_at(rank, 0, kw), _at(rank, 0, 2 * kw), _at(rank, 1, 0), _at(rank, 2, 0), _at(rank, 4, 0)]
            warp = [_at(rank, b[-2], 0) for b in pw]
            reg += _reps(shape, (16 * wm, 8 * kw), (1, 0))
        else:
            reg = [_at(rank, k, 0) for k in k_bits] + [_at(rank, 4 * kw, 0)]
            lane = [_at(rank, kw, 0), _at(rank, 2 * kw, 0), _at(rank, 0, 1), _at(rank, 0, 2), _at(rank, 0, 4)]
            warp = [_at(rank, 0, b[-1]) for b in pw]
            reg += _reps(shape, (8 * kw, 8 * wn), (0, 1))
        return LinearLayout.distributed(
            shape, _regs(reg, shape), tuple(_fit(lane, shape)), tuple(_fit(warp, shape))
        )

    def __str__(self) -> str:
        return f"dot_op<{self.op_idx}, parent={self.parent}, kWidth={self.k_width}>"


def _regs(reg: list[Basis], shape: tuple[int, ...]) -> Bases:
    """The register bases inside the tile. Those outside (a tile smaller than one instruction,
    as the size-1 dimension of a row of the accumulator) are dropped, as a blocked layout drops
    them, where Triton keeps them as zero bases: the same placement of every element, and
    `expand_dims` and `broadcast` find the registers they expect. A dot's own operands always
    cover whole instructions, so their fragments keep their register positions."""
    return tuple(b for b in reg if all(x < s for x, s in zip(b, shape)))


def warps_per_tile_v2(m: int, n: int, num_warps: int) -> tuple[int, int]:
    """Warps along M and N for an mma.sync dot of an m x n result (Triton's warpsPerTileV2):
    double the dimension with more work per warp, counted in m16 rows and n8 columns (one
    instruction's), M on ties, until every warp has a tile. 128x128 on 8 warps is 2x4 as in Triton
    (counted in 16x16, it was 4x2: 207 registers a thread instead of 179 for the tutorial matmul,
    and 2-6% slower on an H100)."""
    ret = [1, 1]
    while ret[0] * ret[1] < num_warps:
        if m // 16 // ret[0] >= n // 8 // ret[1]:
            if ret[0] < m // 16:
                ret[0] *= 2
            else:
                ret[1] *= 2
        else:
            ret[1] *= 2
    return ret[0], ret[1]
