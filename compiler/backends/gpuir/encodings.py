"""Layout encodings: how a tile is spread over a CTA, independent of the tile's exact shape.

An encoding is a small parametric description (Triton's `#blocked`, `#slice`, `#dot_op`) that
yields a `LinearLayout` for any shape of its rank. Tensor-core encodings (`Mma` and its
operands, `MmaOperand`) live in `mma.py`, shared-memory ones in `shared.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .linear import LANES, Basis, LinearLayout, log2
from .mma import Mma, MmaOperand


def _unit(rank: int, dim: int, value: int) -> Basis:
    return tuple(value if d == dim else 0 for d in range(rank))


@dataclass(frozen=True)
class Blocked:
    """Each thread holds `size_per_thread` elements; `order` lists dims fastest first."""

    size_per_thread: tuple[int, ...]
    threads_per_warp: tuple[int, ...]
    warps_per_cta: tuple[int, ...]
    order: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.order)

    def linear(self, shape: tuple[int, ...]) -> LinearLayout:
        rank = self.rank
        reg: list[Basis] = []
        lane: list[Basis] = []
        warp: list[Basis] = []

        def add(out: list[Basis], dim: int, start: int, count: int, drop: bool) -> int:
            for i in range(log2(count)):
                value = start << i
                if value < shape[dim]:
                    out.append(_unit(rank, dim, value))
                elif not drop:
                    out.append((0,) * rank)
            return start * count

        tile = [1] * rank
        for d in self.order:
            tile[d] = add(reg, d, 1, self.size_per_thread[d], True)
        for d in self.order:
            tile[d] = add(lane, d, tile[d], self.threads_per_warp[d], False)
        for d in self.order:
            tile[d] = add(warp, d, tile[d], self.warps_per_cta[d], False)
        for d in self.order:
            if shape[d] > tile[d]:
                add(reg, d, tile[d], shape[d] // tile[d], True)
        return LinearLayout.distributed(tuple(shape), tuple(reg), tuple(lane), tuple(warp))

    def __str__(self) -> str:
        return (
            f"blocked<spt={list(self.size_per_thread)}, tpw={list(self.threads_per_warp)}, "
            f"wpc={list(self.warps_per_cta)}, order={list(self.order)}>"
        )


@dataclass(frozen=True)
class Slice:
    """`parent` with dimension `dim` removed: the layout of a reduction's result."""

    dim: int
    parent: Encoding

    @property
    def rank(self) -> int:
        return self.parent.rank - 1

    def linear(self, shape: tuple[int, ...]) -> LinearLayout:
        full = shape[: self.dim] + (1,) + shape[self.dim :]
        return self.parent.linear(full).project(self.dim)

    def __str__(self) -> str:
        return f"slice<dim={self.dim}, parent={self.parent}>"


@dataclass(frozen=True)
class DotOperand:
    """Operand `op_idx` (0 = A, 1 = B) of an FMA dot whose result has encoding `parent`.

    Each thread holds whole rows of A (all of K) for its result rows, and whole columns of B
    for its result columns; lanes and warps that spread the other result dim replicate.
    """

    op_idx: int
    parent: Encoding

    @property
    def rank(self) -> int:
        return self.parent.rank

    def linear(self, shape: tuple[int, ...]) -> LinearLayout:
        rank = len(shape)
        kdim = rank - 1 if self.op_idx == 0 else rank - 2
        pshape = list(shape)
        pshape[kdim] = 1  # the parent's other dim, replicated: only its own dims matter
        base = self.parent.linear(tuple(pshape))
        k_bases = tuple(_unit(rank, kdim, 1 << i) for i in range(log2(shape[kdim])))
        return LinearLayout.distributed(tuple(shape), k_bases + base.reg, base.lane, base.warp)

    def __str__(self) -> str:
        return f"dot_op<{self.op_idx}, parent={self.parent}>"


Encoding = Blocked | Slice | DotOperand | Mma | MmaOperand


def _distribute(shape: tuple[int, ...], spt: list[int], order: tuple[int, ...], num_warps: int) -> Blocked:
    rank = len(shape)
    tpw, wpc = [1] * rank, [1] * rank
    lanes, warps = LANES, num_warps
    for d in order:
        tpw[d] = max(1, min(lanes, shape[d] // spt[d]))
        lanes //= tpw[d]
    tpw[order[0]] *= lanes
    for d in order:
        wpc[d] = max(1, min(warps, shape[d] // (spt[d] * tpw[d])))
        warps //= wpc[d]
    wpc[order[0]] *= warps
    return Blocked(tuple(spt), tuple(tpw), tuple(wpc), order)


def default_blocked(shape: tuple[int, ...], num_warps: int) -> Blocked:
    """One element per thread, last dim fastest: the layout of a tile nothing constrains."""
    rank = len(shape)
    return _distribute(shape, [1] * rank, tuple(reversed(range(rank))), num_warps)


def coalesced_blocked(shape: tuple[int, ...], order: tuple[int, ...], per_thread: int, num_warps: int) -> Blocked:
    """`per_thread` consecutive elements along `order[0]` per thread, threads then warps along
    `order`: a warp's accesses cover contiguous memory, and each thread's are one vector."""
    numel = 1
    for d in shape:
        numel *= d
    per_thread = max(1, min(per_thread, numel // (LANES * num_warps), shape[order[0]]))
    spt = [1] * len(shape)
    spt[order[0]] = per_thread
    return _distribute(shape, spt, order, num_warps)
