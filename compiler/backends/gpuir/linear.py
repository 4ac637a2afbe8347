"""Linear layouts: where every element of a tile lives, as a linear map over GF(2).

A layout maps the bits of its named *input dimensions* to a tile index. For a distributed
layout the inputs are `reg` (register), `lane` and `warp`; for a shared-memory layout the one
input is `offset` (the element's position in the buffer). Over power-of-two shapes the map is
linear over GF(2): each input bit has a *basis* (a tile index), and the index of a position is
the XOR of the bases of its set bits. A zero basis means replication (two positions hold the
same element). Blocked, slice, dot-operand, tensor-core and swizzled shared layouts all reduce
to this one form, so conversions, reductions and address computations are written once against
it (Triton's LinearLayout, simplified: the outputs are the tile's dimensions, by position).

`invert`, `compose` and `product` make layouts out of layouts: the inverse of a bijective
layout maps tile indices back to its inputs (its outputs are the input dimensions, in order,
and its inputs are named `dim0`, `dim1`, ...), so a register layout composed with the inverse
of a shared layout gives, for each register, lane and warp bit, the shared-memory offset bits.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

Basis = tuple[int, ...]
Bases = tuple[Basis, ...]
LANES = 32


def log2(n: int) -> int:
    if n <= 0 or n & (n - 1):
        raise ValueError(f"{n} is not a power of two")
    return n.bit_length() - 1


def _xor(a: Basis, b: Basis) -> Basis:
    return tuple(x ^ y for x, y in zip(a, b))


@dataclass(frozen=True)
class LinearLayout:
    """Bases for each bit of each named input dimension, over a tile of `shape`."""

    shape: tuple[int, ...]
    ins: tuple[tuple[str, Bases], ...]

    @staticmethod
    def distributed(shape: tuple[int, ...], reg: Bases, lane: Bases, warp: Bases) -> LinearLayout:
        """A layout over registers, lanes and warps (what every tile value has)."""
        return LinearLayout(tuple(shape), (("reg", tuple(reg)), ("lane", tuple(lane)), ("warp", tuple(warp))))

    def bases(self, name: str) -> Bases:
        for n, b in self.ins:
            if n == name:
                return b
        return ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.ins)

    @property
    def reg(self) -> Bases:
        return self.bases("reg")

    @property
    def lane(self) -> Bases:
        return self.bases("lane")

    @property
    def warp(self) -> Bases:
        return self.bases("warp")

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def num_regs(self) -> int:
        return 1 << len(self.reg)

    def in_size(self, name: str) -> int:
        return 1 << len(self.bases(name))

    def _combine(self, bases: Bases, n: int) -> Basis:
        out: Basis = (0,) * self.rank
        for i, b in enumerate(bases):
            if n >> i & 1:
                out = _xor(out, b)
        return out

    def apply(self, **inputs: int) -> Basis:
        """The tile index of the position given by one value per input dimension (absent: 0)."""
        out: Basis = (0,) * self.rank
        for name, bases in self.ins:
            out = _xor(out, self._combine(bases, inputs.get(name, 0)))
        return out

    def reg_index(self, r: int) -> Basis:
        """The part of the index fixed by register `r` (known at compile time)."""
        return self._reg_indices[r & (self.num_regs - 1)]

    @cached_property
    def _reg_indices(self) -> tuple[Basis, ...]:
        """`reg_index` of every register, computed once: the lowering asks for each many times."""
        out: list[Basis] = [(0,) * self.rank]
        for b in self.reg:
            out += [_xor(x, b) for x in out]
        return tuple(out)

    def index(self, r: int, lane: int, warp: int) -> Basis:
        return self.apply(reg=r, lane=lane, warp=warp)

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
        return LinearLayout.distributed(
            self.shape[:axis] + self.shape[axis + 1 :], reg, tuple(map(drop, self.lane)), tuple(map(drop, self.warp))
        )

    # ---- the algebra ---------------------------------------------------------------------------

    def _out_bits(self) -> list[tuple[int, int]]:
        """(dimension, bit) of every output bit, dimension 0's low bits first."""
        return [(d, i) for d, size in enumerate(self.shape) for i in range(log2(size))]

    def _column(self, basis: Basis) -> int:
        return sum(((basis[d] >> i) & 1) << j for j, (d, i) in enumerate(self._out_bits()))

    def is_bijective(self) -> bool:
        bits = [self._column(b) for _, bases in self.ins for b in bases]
        return len(bits) == len(self._out_bits()) and _rank(bits) == len(bits)

    def invert(self) -> LinearLayout:
        """The inverse of a bijective layout: inputs `dim0`, `dim1`, ... (the tile's dimensions),
        outputs this layout's input dimensions by position (shape: their sizes)."""
        if not self.is_bijective():
            raise ValueError(f"{self} is not a bijection; only bijective layouts have an inverse")
        cols = [self._column(b) for _, bases in self.ins for b in bases]
        owners = [(k, i) for k, (_, bases) in enumerate(self.ins) for i in range(len(bases))]
        n = len(cols)
        # Solve for each output bit e_j: which input bits XOR to it (Gauss-Jordan over GF(2)).
        rows = [(cols[i], 1 << i) for i in range(n)]
        pivots: dict[int, tuple[int, int]] = {}
        for value, combo in rows:
            for bit, (pv, pc) in pivots.items():
                if value >> bit & 1:
                    value, combo = value ^ pv, combo ^ pc
            if value:
                bit = value.bit_length() - 1
                for b2, (pv, pc) in list(pivots.items()):
                    if pv >> bit & 1:
                        pivots[b2] = (pv ^ value, pc ^ combo)
                pivots[bit] = (value, combo)
        shape = tuple(1 << len(bases) for _, bases in self.ins)
        out_bits = self._out_bits()
        ins: list[tuple[str, Bases]] = []
        for d, size in enumerate(self.shape):
            dim_bases = []
            for i in range(log2(size)):
                combo = pivots[out_bits.index((d, i))][1]
                basis = [0] * len(self.ins)
                for j in range(n):
                    if combo >> j & 1:
                        k, bit = owners[j]
                        basis[k] ^= 1 << bit
                dim_bases.append(tuple(basis))
            ins.append((f"dim{d}", tuple(dim_bases)))
        return LinearLayout(shape, tuple(ins))

    def compose(self, outer: LinearLayout) -> LinearLayout:
        """`outer` after `self`: `self`'s outputs (dimension d) feed `outer`'s input `dim{d}`."""
        if outer.names != tuple(f"dim{d}" for d in range(self.rank)):
            raise ValueError(f"cannot compose: {outer} does not take this layout's {self.rank} dimensions")
        ins = tuple((name, tuple(outer.apply(**_dims(b)) for b in bases)) for name, bases in self.ins)
        return LinearLayout(outer.shape, ins)

    def product(self, other: LinearLayout) -> LinearLayout:
        """Both layouts side by side on distinct dimensions: the output is `self`'s dimensions
        then `other`'s; inputs of one name have `self`'s bits first, then `other`'s."""
        zero_s, zero_o = (0,) * self.rank, (0,) * other.rank
        names = list(self.names) + [n for n in other.names if n not in self.names]
        ins = tuple(
            (n, tuple(b + zero_o for b in self.bases(n)) + tuple(zero_s + b for b in other.bases(n))) for n in names
        )
        return LinearLayout(self.shape + other.shape, ins)

    def __str__(self) -> str:
        def fmt(bases: Bases) -> str:
            return "[" + ", ".join("(" + ",".join(map(str, b)) + ")" for b in bases) + "]"

        parts = ", ".join(f"{name}={fmt(bases)}" for name, bases in self.ins)
        return f"linear<{list(self.shape)}, {parts}>"


def _dims(basis: Basis) -> dict[str, int]:
    return {f"dim{d}": x for d, x in enumerate(basis)}


def _rank(vectors: list[int]) -> int:
    pivots: dict[int, int] = {}
    for v in vectors:
        for bit, p in pivots.items():
            if v >> bit & 1:
                v ^= p
        if v:
            pivots[v.bit_length() - 1] = v
    return len(pivots)


def scalar_layout(num_warps: int) -> LinearLayout:
    """A scalar: one register, the same value in every thread."""
    return LinearLayout.distributed((), (), ((),) * log2(LANES), ((),) * log2(num_warps))
