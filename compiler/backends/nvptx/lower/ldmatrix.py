"""Tensor-core operands through swizzled shared memory: 16-byte stores, `ldmatrix` loads.

A 16-bit operand tile is stored along its contiguous dimension (the one its source registers
walk in vectors) in the swizzled layout of `gpuir.shared.operand_shared`, then read with
`ldmatrix.x4` (K contiguous) or `ldmatrix.x4.trans` (M or N contiguous): each lane gives the
address of one 8-element row of one of four 8x8 matrices and receives, per matrix, the two
elements of its fragment, so one instruction fills four 32-bit registers of the operand.
Both sides are conflict-free by the swizzle (tests/compiler/backends/test_gpuir_shared.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import llvmlite.ir as ir

from ....ir.types import ElemType
from ...gpuir import LinearLayout
from ...gpuir.mma import MmaOperand
from ...gpuir.shared import SwizzledShared, operand_shared
from .context import Lowering
from .registry import Regs
from .smem import elem_bytes, numel, store_elems, vector_groups
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

    @property
    def group_mask(self) -> int:
        """The register bits one `ldmatrix.x4` fills: a 32-bit pair and two matrix bits."""
        return (1 << (1 + min(2, len(self.layout.reg) - 1))) - 1


def to_operand(ctx: Lowering, elem: ElemType, regs: Regs, src: LinearLayout, dst: LinearLayout, enc: MmaOperand) -> Regs:
    """`regs` (layout `src`) as the tensor-core operand `enc` (layout `dst`)."""
    shape = dst.shape
    swz = operand_shared(src, enc.op_idx, 2)
    contig, rows_dim = swz.order
    b = ctx.b
    with ctx.scratch(numel(shape) * 2) as buffer:
        base = b.gep(ctx.smem_base(), [const(i32, buffer)], source_etype=i8) if buffer else ctx.smem_base()
        for group in vector_groups(src, elem, dim=contig):
            idx = ctx.index(src, group[0])
            off = swizzled_offset(ctx, swz, shape, idx[rows_dim], idx[contig])
            store_elems(ctx, elem, off, [regs[r] for r in group], buffer)
        ctx.barrier()
        operand = SharedOperand(elem, dst, swz, base, enc.op_idx)
        out: dict[int, ir.Value] = {}
        for g in range(0, dst.num_regs, operand.group_mask + 1):
            out.update(read_group(ctx, operand, g))
        return [out[r] for r in range(dst.num_regs)]


def _lane_origin(ctx: Lowering, dst: LinearLayout, contig: int) -> list[ir.Value]:
    """This lane's row and column in the operand (computed once, at entry): row `lane % 8` of
    matrix `lane / 8`, whose origin steps by the bases of register bits 1 and 2 (the operand's
    second and third element pairs), plus the warp's part."""
    rows_dim = 1 - contig

    def make(p: ir.IRBuilder) -> list[ir.Value]:
        lane_row: ir.Value = p.and_(ctx.lane, const(i32, 7))
        lane_col: ir.Value = const(i32, 0)
        steps = [(ctx.lane, 3 + j, dst.reg[1 + j]) for j in range(min(2, len(dst.reg) - 1))]
        steps += [(ctx.warp, w, basis) for w, basis in enumerate(dst.warp)]
        for source, bit, basis in steps:
            on = p.and_(p.lshr(source, const(i32, bit)), const(i32, 1))
            if basis[rows_dim]:
                lane_row = p.add(lane_row, p.mul(on, const(i32, basis[rows_dim])))
            if basis[contig]:
                lane_col = p.add(lane_col, p.mul(on, const(i32, basis[contig])))
        return [lane_row, lane_col]

    return ctx.at_entry(("ldmatrix", contig, dst.reg[1:3], dst.warp), make)


def read_group(ctx: Lowering, operand: SharedOperand, reg: int) -> dict[int, ir.Value]:
    """The registers of the `ldmatrix` group that holds register `reg` of the operand."""
    b = ctx.b
    dst, swz = operand.layout, operand.shared
    contig, rows_dim = swz.order
    kdim = 1 if operand.op_idx == 0 else 0
    count = (operand.group_mask + 1) // 2
    name = LDMATRIX.format(n=count, trans=".trans" if contig != kdim else "")
    lane_row, lane_col = _lane_origin(ctx, dst, contig)
    g = reg & ~operand.group_mask
    static = dst.reg_index(g)
    row = b.add(lane_row, const(i32, static[rows_dim])) if static[rows_dim] else lane_row
    col = b.add(lane_col, const(i32, static[contig])) if static[contig] else lane_col
    off = swizzled_offset(ctx, swz, dst.shape, row, col)
    half = llvm_type(operand.elem)
    ptr = b.gep(operand.base, [off], source_etype=half)
    res = ctx.call(name, ir.LiteralStructType([i32] * count), [ptr])
    out: dict[int, ir.Value] = {}
    for j in range(count):
        pair = b.bitcast(b.extract_value(res, j), ir.VectorType(half, 2))
        out[g | (j << 1)] = b.extract_element(pair, const(i32, 0))
        out[g | (j << 1) | 1] = b.extract_element(pair, const(i32, 1))
    return out
