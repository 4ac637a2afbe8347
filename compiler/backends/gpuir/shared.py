"""Swizzled shared-memory layouts: where each element of a tile lies in a shared buffer.

A tile is stored row by row along its contiguous dimension (`order[0]`), in vectors of `vec`
elements (16 bytes). Rows are XOR-swizzled: vector `c` of row `r` is stored at vector
`c ^ ((r // per_phase) % max_phase)`, so that 8 consecutive rows read at one column (an
`ldmatrix` phase) or written a vector per thread land in 8 distinct 16-byte bank groups.
With 128-byte rows that is the 128-byte swizzle of the hardware (byte bits [4:6] ^= [7:9]);
64- and 32-byte rows take the 64- and 32-byte modes. As a linear layout the one input is
`offset` (the element's position in the buffer); its inverse gives the offset of an index.

Rows wider than the swizzle (`vec * max_phase` elements) may be cut into *atoms* (`block`): column
block `j` of every row is stored as a [rows x block] array of its own, after blocks `0 .. j-1`. That
is what the hardware's swizzle modes address (a 128-byte-swizzled atom is 8 rows of 128 bytes,
the swizzle a function of the address), so TMA boxes and wgmma descriptors read such buffers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .linear import Basis, LinearLayout, log2


@dataclass(frozen=True)
class SwizzledShared:
    """`vec` elements a vector, `per_phase` rows share a phase, `max_phase` phases;
    `order[0]` is the contiguous dimension; `block`, when set, the elements of a row an atom holds."""

    vec: int
    per_phase: int
    max_phase: int
    order: tuple[int, int]
    block: int = 0

    rank = 2

    def linear(self, shape: tuple[int, ...]) -> LinearLayout:
        contig, rows = self.order
        cols = shape[contig]
        if self.vec * self.max_phase > cols:
            raise ValueError(f"{self} needs rows of at least {self.vec * self.max_phase} elements, got {cols}")

        def at(r: int, c: int) -> Basis:
            out = [0, 0]
            out[rows], out[contig] = r, c
            return tuple(out)

        width = min(self.block or cols, cols)
        bases = [at(0, 1 << i) for i in range(log2(width))]
        phase_lo = log2(self.per_phase)
        for j in range(log2(shape[rows])):
            swz = 0
            if phase_lo <= j < phase_lo + log2(self.max_phase):
                swz = self.vec << (j - phase_lo)
            bases.append(at(1 << j, swz))
        bases += [at(0, width << i) for i in range(log2(cols // width))]  # atom after atom
        return LinearLayout(tuple(shape), (("offset", tuple(bases)),))

    def atoms(self) -> SwizzledShared:
        """This layout with rows cut into atoms of the swizzle's width (`block`)."""
        return replace(self, block=self.vec * self.max_phase)

    @property
    def swizzle_bytes_per_row(self) -> int:
        return self.vec * self.max_phase

    def __str__(self) -> str:
        block = f", block={self.block}" if self.block else ""
        return (
            f"swizzled_shared<vec={self.vec}, perPhase={self.per_phase}, maxPhase={self.max_phase}, "
            f"order={list(self.order)}{block}>"
        )


def operand_swizzle(shape: tuple[int, int], order: tuple[int, int], elem_bytes: int) -> SwizzledShared:
    """The swizzle of a tensor-core operand tile stored with `order[0]` contiguous: 16-byte
    vectors, and the widest mode (32, 64 or 128 bytes) that its rows allow."""
    vec = max(16 // elem_bytes, 1)
    row_bytes = shape[order[0]] * elem_bytes
    per_phase = max(128 // row_bytes, 1)
    max_phase = max(min(8, row_bytes // 16, 8 // per_phase), 1)
    return SwizzledShared(vec, per_phase, max_phase, order)


def operand_shared(src: LinearLayout, op_idx: int, elem_bytes: int, k_major: bool = False) -> SwizzledShared:
    """Where a tensor-core operand (0 = A, 1 = B) held in registers of layout `src` is staged in
    shared memory: contiguous along the dimension its registers walk in the longest vectors (K on
    ties), so that each thread writes whole 16-byte vectors, swizzled for `ldmatrix`; along K
    whatever the registers with `k_major` (wgmma reads 8-bit operands K-major only)."""
    kdim = 1 if op_idx == 0 else 0
    other = 1 - kdim
    contig = other if src.contiguous_regs(other) > src.contiguous_regs(kdim) and not k_major else kdim
    shape = (src.shape[0], src.shape[1])
    return operand_swizzle(shape, (contig, 1 - contig), elem_bytes)
