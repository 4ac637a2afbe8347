"""Linear layouts: where every element of a tile lives among registers, lanes and warps.

A distributed layout maps a hardware position (register `r`, lane `l`, warp `w`) to a tile index.
Over power-of-two shapes that map is linear over GF(2): each bit of `r`, `l` and `w` has a
*basis* (a tile index), and the index of a position is the XOR of the bases of its set bits.
A zero basis means replication (two positions hold the same element). Blocked, slice,
dot-operand and, later, tensor-core layouts all reduce to this one form, so conversions,
reductions and broadcasts are written once against it (Triton's LinearLayout, simplified).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

Basis = tuple[int, ...]
LANES = 32


def log2(n: int) -> int:
    if n <= 0 or n & (n - 1):
        raise ValueError(f"{n} is not a power of two")
    return n.bit_length() - 1


def _xor(a: Basis, b: Basis) -> Basis:
    return tuple(x ^ y for x, y in zip(a, b))


@dataclass(frozen=True)
class LinearLayout:
    """Bases for each register, lane and warp bit, over a tile of `shape`."""

    shape: tuple[int, ...]
    reg: tuple[Basis, ...]
    lane: tuple[Basis, ...]
    warp: tuple[Basis, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def num_regs(self) -> int:
        return 1 << len(self.reg)

    def _combine(self, bases: tuple[Basis, ...], n: int) -> Basis:
        out: Basis = (0,) * self.rank
        for i, b in enumerate(bases):
            if n >> i & 1:
                out = _xor(out, b)
        return out

    def reg_index(self, r: int) -> Basis:
        """The part of the index fixed by register `r` (known at compile time)."""
        return self._combine(self.reg, r)

    def index(self, r: int, lane: int, warp: int) -> Basis:
        return _xor(_xor(self.reg_index(r), self._combine(self.lane, lane)), self._combine(self.warp, warp))

    @cached_property
    def reg_of_index(self) -> dict[Basis, int]:
        """Register holding each static index (the inverse of `reg_index`)."""
        return {self.reg_index(r): r for r in range(self.num_regs)}

    def lane_free_mask(self) -> int:
        """Lane bits that only replicate data (zero bases)."""
        return sum(1 << i for i, b in enumerate(self.lane) if not any(b))

    def warp_free_mask(self) -> int:
        return sum(1 << i for i, b in enumerate(self.warp) if not any(b))

    def same_threads(self, other: LinearLayout) -> bool:
        """True when both layouts give every lane and warp the same dynamic index part."""
        return self.lane == other.lane and self.warp == other.warp

    def contiguous_regs(self, dim: int) -> int:
        """How many consecutive registers hold consecutive elements along `dim`, aligned."""
        n = 0
        for i, b in enumerate(self.reg):
            if b != tuple((1 << i) if d == dim else 0 for d in range(self.rank)):
                break
            n += 1
        vec = 1 << n
        for b in self.reg[n:] + self.lane + self.warp:
            if b[dim] % vec:
                vec = min(vec, b[dim] & -b[dim])
        return max(vec, 1)

    def project(self, axis: int) -> LinearLayout:
        """Remove dimension `axis` (a slice): registers that only walked it disappear."""

        def drop(b: Basis) -> Basis:
            return b[:axis] + b[axis + 1 :]

        reg = tuple(drop(b) for b in self.reg if any(drop(b)))
        if any(b[axis] and any(drop(b)) for b in self.reg):
            raise ValueError(f"register bases mix dimension {axis} with others: {self.reg}")
        return LinearLayout(
            self.shape[:axis] + self.shape[axis + 1 :], reg, tuple(map(drop, self.lane)), tuple(map(drop, self.warp))
        )

    def __str__(self) -> str:
        def fmt(bases: tuple[Basis, ...]) -> str:
            return "[" + ", ".join("(" + ",".join(map(str, b)) + ")" for b in bases) + "]"

        return f"linear<{list(self.shape)}, reg={fmt(self.reg)}, lane={fmt(self.lane)}, warp={fmt(self.warp)}>"


def scalar_layout(num_warps: int) -> LinearLayout:
    """A scalar: one register, the same value in every thread."""
    return LinearLayout((), (), ((),) * log2(LANES), ((),) * log2(num_warps))
