"""Tensor-core operands through swizzled shared memory: 16-byte stores, `ldmatrix` loads.

A 16-bit operand tile is stored along its contiguous dimension (the one its source registers
walk in vectors) in the swizzled layout of `gpuir.shared.operand_shared`, then read with
`ldmatrix.x4` (K contiguous) or `ldmatrix.x4.trans` (M or N contiguous): each lane gives the
address of one 8-element row of one of four 8x8 matrices and receives, per matrix, the two
elements of its fragment, so one instruction fills four 32-bit registers of the operand.
Both sides are conflict-free by the swizzle (tests/compiler/backends/test_gpuir_shared.py).

8- and 32-bit operands (int8, tf32) of a pipelined loop's ring are read the same way where K is
contiguous: an 8x8 matrix of b16 pairs is 8 rows of 16 bytes, and a lane's 32-bit register is the
4 int8 or the one fp32 element of its fragment (as in Triton). Where M or N is contiguous no
`ldmatrix.trans` fits (it moves 16-bit halves), and each element is read by itself: its offset
is the lane's, computed once, XOR a constant (the swizzle is linear), as Triton's B of tf32.

Element reads, and `ldmatrix` reads where `split_addresses` says so, address the buffer as a linear
layout of the offset over registers, lanes and warps: a lane's part is taken once at entry, and of a
register's constant offset the bits some lane sets are XORed into it there, the others added last,
so each load is `[base + imm]` and a loop over a ring adds the stage's base to a few lane offsets
only (as Triton's `LDSM [R+imm]`). Other `ldmatrix` reads add the group's row and column to the
lane's and swizzle them (`_row_column`): fewer registers live across the loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import llvmlite.ir as ir

from ....ir.types import ElemType
from ...gpuir import LinearLayout
from ...gpuir.linear import log2
from ...gpuir.mma import MmaOperand
from ...gpuir.shared import SwizzledShared, operand_shared
from .context import Lowering
from .registry import Regs
from .smem import elem_bytes, load_elems, numel, store_elems, vector_groups
from .types import const, i8, i32, llvm_type

LDMATRIX = "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x{n}{trans}.b16.p3"


def fits(enc: object, elem: ElemType) -> bool:
    """Whether `ldmatrix` can produce this operand: 16-bit elements in 32-bit pairs."""
    return isinstance(enc, MmaOperand) and enc.k_width == 2 and elem_bytes(elem) == 2


def swizzled_offset(ctx: Lowering, enc: SwizzledShared, shape: tuple[int, ...], row: ir.Value, col: ir.Value) -> ir.Value:
    """Element offset of (row, col) in the buffer: `row` walks `order[1]`, `col` `order[0]` (in the
    atom of `col` when the layout has atoms)."""
    b = ctx.b
    cols = shape[enc.order[0]]
    width = min(enc.block or cols, cols)
    vec_bits = enc.vec.bit_length() - 1
    phase = b.and_(b.lshr(row, const(i32, enc.per_phase.bit_length() - 1)), const(i32, enc.max_phase - 1))
    atom, col = (b.and_(col, const(i32, cols - width)), b.and_(col, const(i32, width - 1))) if width < cols else (None, col)
    chunk = b.xor(b.lshr(col, const(i32, vec_bits)), phase)
    inner = b.or_(b.shl(chunk, const(i32, vec_bits)), b.and_(col, const(i32, enc.vec - 1)))
    offset = b.add(b.mul(row, const(i32, width)), inner)
    return offset if atom is None else b.add(b.mul(atom, const(i32, shape[enc.order[1]])), offset)


@dataclass(frozen=True)
class SharedOperand:
    """A tensor-core operand that lies in shared memory (layout `shared` from `base`), read into
    registers of `layout` by `ldmatrix` a group of four 8x8 matrices at a time: eagerly after a
    conversion (`to_operand`), or as the dot needs them (a pipelined load's ring slot)."""

    elem: ElemType
    layout: LinearLayout
    shared: SwizzledShared
    base: ir.Value
    op_idx: int
    # `ldmatrix` addresses as lane offsets taken at entry plus immediates (`lane_address`), else a row and
    # column per read (`_row_column`): see `split_addresses`.
    split: bool = False

    @property
    def pair_bits(self) -> int:
        """The register bits of the elements one 32-bit register holds (k_width of them)."""
        return log2(4 // elem_bytes(self.elem))

    @property
    def group_mask(self) -> int:
        """The register bits one `ldmatrix.x4` fills: a 32-bit register and two matrix bits."""
        return (1 << (self.pair_bits + min(2, len(self.layout.reg) - self.pair_bits))) - 1

    @property
    def by_ldmatrix(self) -> bool:
        """Whether `ldmatrix` reads it: 16-bit elements, or K contiguous (no `.trans`)."""
        return self.pair_bits == 1 or self.shared.order[0] == (1 if self.op_idx == 0 else 0)


def store_swizzled(ctx: Lowering, elem: ElemType, regs: Regs, src: LinearLayout, swz: SwizzledShared,
                   buffer: int) -> ir.Value:
    """Store `regs` (layout `src`) at byte `buffer` of shared memory in layout `swz`, a vector of
    its contiguous dimension at a time; the buffer's address."""
    contig, rows_dim = swz.order
    b = ctx.b
    base = b.gep(ctx.smem_base(), [const(i32, buffer)], source_etype=i8) if buffer else ctx.smem_base()
    for group in vector_groups(src, elem, dim=contig):
        idx = ctx.index(src, group[0])
        off = swizzled_offset(ctx, swz, src.shape, idx[rows_dim], idx[contig])
        store_elems(ctx, elem, off, [regs[r] for r in group], buffer)
    return base


def load_swizzled(ctx: Lowering, elem: ElemType, dst: LinearLayout, swz: SwizzledShared, buffer: int,
                  skip: ir.Value | None = None) -> Regs:
    """Read the tile at byte `buffer` of shared memory (and `skip` elements on), in layout `swz`, into registers
    of layout `dst`, a vector of its contiguous dimension at a time."""
    contig, rows_dim = swz.order
    out: list[ir.Value] = [ir.Constant(llvm_type(elem), None)] * dst.num_regs
    for group in vector_groups(dst, elem, dim=contig):
        idx = ctx.index(dst, group[0])
        off = swizzled_offset(ctx, swz, dst.shape, idx[rows_dim], idx[contig])
        off = off if skip is None else ctx.b.add(off, skip)
        for r, v in zip(group, load_elems(ctx, elem, off, len(group), buffer)):
            out[r] = v
    return out


def _stage(ctx: Lowering, elem: ElemType, regs: Regs, src: LinearLayout, dst: LinearLayout, enc: MmaOperand,
           buffer: int) -> SharedOperand:
    """Store `regs` (layout `src`) swizzled at byte `buffer` of shared memory, to be read as `enc`."""
    swz = operand_shared(src, enc.op_idx, 2)
    return SharedOperand(elem, dst, swz, store_swizzled(ctx, elem, regs, src, swz, buffer), enc.op_idx)


def to_operand(ctx: Lowering, elem: ElemType, regs: Regs, src: LinearLayout, dst: LinearLayout, enc: MmaOperand) -> Regs:
    """`regs` (layout `src`) as the tensor-core operand `enc` (layout `dst`)."""
    with ctx.scratch(numel(dst.shape) * 2) as buffer:
        operand = _stage(ctx, elem, regs, src, dst, enc, buffer)
        ctx.barrier()
        out: dict[int, ir.Value] = {}
        for g in range(0, dst.num_regs, operand.group_mask + 1):
            out.update(read_group(ctx, operand, g))
        return [out[r] for r in range(dst.num_regs)]


def lane_rows(dst: LinearLayout, shared: SwizzledShared, pair_bits: int) -> LinearLayout:
    """The offset in the buffer of the row each lane gives `ldmatrix` for register 0's group: row
    `lane % 8` of matrix `lane / 8`, whose origin steps by the bases of the two register bits above
    a 32-bit register's (`pair_bits`), plus the warp's part. Register `r`'s group XORs in the offset
    of `reg_index(r)` (the swizzle is linear)."""
    rows_dim = shared.order[1]
    matrix_bits = dst.reg[pair_bits : pair_bits + 2]
    matrix_bits += ((0,) * dst.rank,) * (2 - len(matrix_bits))
    lanes = tuple(tuple(1 << i if d == rows_dim else 0 for d in range(dst.rank)) for i in range(3)) + matrix_bits
    rows = LinearLayout.distributed(dst.shape, dst.reg, lanes, dst.warp)
    return rows.compose(shared.linear(dst.shape).invert())


def read_group(ctx: Lowering, operand: SharedOperand, reg: int) -> dict[int, ir.Value]:
    """The registers of the `ldmatrix` group that holds register `reg` of the operand (of its 32-bit
    register where `ldmatrix` does not fit)."""
    if not operand.by_ldmatrix:
        return _read_elements(ctx, operand, reg)
    b = ctx.b
    kdim = 1 if operand.op_idx == 0 else 0
    pair_bits = operand.pair_bits
    count = (operand.group_mask + 1) >> pair_bits
    name = LDMATRIX.format(n=count, trans=".trans" if operand.shared.order[0] != kdim else "")
    g = reg & ~operand.group_mask
    if operand.split:
        ptr = lane_address(ctx, operand.base, operand.elem, lane_rows(operand.layout, operand.shared, pair_bits), g)
    else:
        ptr = _row_column(ctx, operand, g)
    elem = llvm_type(operand.elem)
    res = ctx.call(name, ir.LiteralStructType([i32] * count), [ptr])
    out: dict[int, ir.Value] = {}
    for j in range(count):
        word, first = b.extract_value(res, j), g | (j << pair_bits)
        if not pair_bits:
            out[first] = b.bitcast(word, elem)
            continue
        pair = b.bitcast(word, ir.VectorType(elem, 1 << pair_bits))
        for e in range(1 << pair_bits):
            out[first | e] = b.extract_element(pair, const(i32, e))
    return out


def _read_elements(ctx: Lowering, operand: SharedOperand, reg: int) -> dict[int, ir.Value]:
    """The elements of the 32-bit register that holds register `reg`, one load each: the offsets of
    the operand's elements in the buffer are a linear layout of its registers, lanes and warps."""
    dst = operand.layout
    offsets = dst.compose(operand.shared.linear(dst.shape).invert())
    elem = llvm_type(operand.elem)
    first = reg & ~((1 << operand.pair_bits) - 1)
    out: dict[int, ir.Value] = {}
    for r in range(first, first + (1 << operand.pair_bits)):
        out[r] = ctx.b.load(lane_address(ctx, operand.base, operand.elem, offsets, r), typ=elem, align=elem_bytes(operand.elem))
    return out


def split_addresses(acc: LinearLayout) -> bool:
    """Whether a dot's ring reads take `lane_address`'s split: each read is `[lane base + imm]`, but
    more lane bases stay live across the loop. A win where the dot's accumulator is at most 64
    registers a thread: the 128x128x64 matmul on 8 warps (179 -> 128 registers, two blocks an SM,
    1.09-1.12x Triton's mma.sync path against 1.00-1.02x, H100) and attention's chained dots (warps
    along M; at head dim 128 the row-and-column reads left 28 swizzled V offsets live across the loop,
    255 registers with spills, and ptxas ran each 16x8 tile of S through its K steps back to back:
    203 registers split, causal 0.99x -> 1.015x Triton, d64 full 1.065x -> 1.10x, H200). A loss where
    the accumulator alone is 128 registers (128x256x64: 255 registers, 0.97-1.01x against 1.01-1.04x)."""
    return acc.num_regs <= 64


def _row_column(ctx: Lowering, operand: SharedOperand, g: int) -> ir.Value:
    """The address of group `g`'s row in this lane: the lane's row and column in the operand (taken at
    entry), plus the group's, swizzled (`swizzled_offset`)."""
    b, dst, swz = ctx.b, operand.layout, operand.shared
    contig, rows_dim = swz.order
    lane_row, lane_col = _lane_origin(ctx, dst, contig, operand.pair_bits)
    static = dst.reg_index(g)
    row = b.add(lane_row, const(i32, static[rows_dim])) if static[rows_dim] else lane_row
    col = b.add(lane_col, const(i32, static[contig])) if static[contig] else lane_col
    off = swizzled_offset(ctx, swz, dst.shape, row, col)
    return b.gep(operand.base, [off], source_etype=llvm_type(operand.elem))


def _lane_origin(ctx: Lowering, dst: LinearLayout, contig: int, pair_bits: int) -> list[ir.Value]:
    """This lane's row and column in the operand (computed once, at entry): row `lane % 8` of
    matrix `lane / 8`, whose origin steps by the bases of the two register bits above a 32-bit
    register's (`pair_bits`), plus the warp's part."""
    rows_dim = 1 - contig
    matrix_bits = dst.reg[pair_bits : pair_bits + 2]

    def make(p: ir.IRBuilder) -> list[ir.Value]:
        lane_row: ir.Value = p.and_(ctx.lane, const(i32, 7))
        lane_col: ir.Value = const(i32, 0)
        steps = [(ctx.lane, 3 + j, basis) for j, basis in enumerate(matrix_bits)]
        steps += [(ctx.warp, w, basis) for w, basis in enumerate(dst.warp)]
        for source, bit, basis in steps:
            on = p.and_(p.lshr(source, const(i32, bit)), const(i32, 1))
            if basis[rows_dim]:
                lane_row = p.add(lane_row, p.mul(on, const(i32, basis[rows_dim])))
            if basis[contig]:
                lane_col = p.add(lane_col, p.mul(on, const(i32, basis[contig])))
        return [lane_row, lane_col]

    return ctx.at_entry(("ldmatrix", contig, matrix_bits, dst.warp), make)


def lane_address(ctx: Lowering, base: ir.Value, elem_type: ElemType, offsets: LinearLayout, reg: int) -> ir.Value:
    """The address of register `reg` in this lane, in a buffer of `elem_type` at `base` (`offsets`: a linear
    layout of the element offset over registers, lanes and warps).

    The register's constant offset is split: its bits that no lane or warp sets are added last (the
    load's immediate), the others are XORed into the lane's offset at entry. Few constants remain
    (the swizzle's bits), so a loop over a ring adds the stage's base to a few lane offsets only."""
    lane_bits = 0
    for basis in offsets.lane + offsets.warp:
        lane_bits |= basis[0]
    static = offsets.reg_index(reg)[0]
    mixed, added = static & lane_bits, static & ~lane_bits
    elem = llvm_type(elem_type)
    ptr = ctx.b.gep(base, [_lane_offset(ctx, offsets, mixed)], source_etype=elem)
    return ctx.b.gep(ptr, [const(i32, added)], source_etype=elem) if added else ptr


def _lane_offset(ctx: Lowering, offsets: LinearLayout, mixed: int) -> ir.Value:
    """This lane's offset XOR `mixed` (computed once, at entry)."""
    (dyn,) = ctx.dyn_index(offsets)
    if not mixed:
        return dyn
    key = ("lane offset", tuple(map(tuple, offsets.lane)), tuple(map(tuple, offsets.warp)), mixed)
    return ctx.at_entry(key, lambda p: [p.xor(dyn, const(i32, mixed))])[0]
