"""Tensor-core operands through swizzled shared memory: 16-byte stores, `ldmatrix` loads.

A 16-bit operand tile is stored along its contiguous dimension (the one its source registers
walk in vectors) in the swizzled layout of `gpuir.shared.operand_swizzle`, then read with
`ldmatrix.x4` (K contiguous) or `ldmatrix.x4.trans` (M or N contiguous): each lane gives the
address of one 8-element row of one of four 8x8 matrices and receives, per matrix, the two
elements of its fragment, so one instruction fills four 32-bit registers of the operand.
Both sides are conflict-free by the swizzle (tests/compiler/backends/test_gpuir_shared.py).
"""

from __future__ import annotations

import llvmlite.ir as ir

from ....ir.types import ElemType
from ...gpuir import LinearLayout
from ...gpuir.mma import MmaOperand
from ...gpuir.shared import SwizzledShared, operand_swizzle
from .context import Lowering
from .registry import Regs
from .smem import elem_bytes, numel, store_elems, vector_groups
from .types import const, i8, i32, llvm_type, sptr

LDMATRIX = "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x{n}{trans}.b16.p3"


def fits(enc: object, elem: ElemType) -> bool:
    """Whether `ldmatrix` can produce this operand: 16-bit elements in 32-bit pairs."""
    return isinstance(enc, MmaOperand) and enc.k_width == 2 and elem_bytes(elem) == 2


def _contig_dim(src: LinearLayout, kdim: int) -> int:
    """The dimension the source registers walk in the longest vectors (K on ties)."""
    other = 1 - kdim
    return other if src.contiguous_regs(other) > src.contiguous_regs(kdim) else kdim


def swizzled_offset(ctx: Lowering, enc: SwizzledShared, shape: tuple[int, ...], row: ir.Value, col: ir.Value) -> ir.Value:
    """Element offset of (row, col) in the buffer: `row` walks `order[1]`, `col` `order[0]`."""
    b = ctx.b
    cols = shape[enc.order[0]]
    vec_bits = enc.vec.bit_length() - 1
    phase = b.and_(b.lshr(row, const(i32, enc.per_phase.bit_length() - 1)), const(i32, enc.max_phase - 1))
    chunk = b.xor(b.lshr(col, const(i32, vec_bits)), phase)
    inner = b.or_(b.shl(chunk, const(i32, vec_bits)), b.and_(col, const(i32, enc.vec - 1)))
    return b.add(b.mul(row, const(i32, cols)), inner)


def to_operand(ctx: Lowering, elem: ElemType, regs: Regs, src: LinearLayout, dst: LinearLayout, enc: MmaOperand) -> Regs:
    """`regs` (layout `src`) as the tensor-core operand `enc` (layout `dst`)."""
    shape = dst.shape
    kdim = 1 if enc.op_idx == 0 else 0
    contig = _contig_dim(src, kdim)
    rows_dim = 1 - contig
    swz = operand_swizzle((shape[0], shape[1]), (contig, rows_dim), 2)
    b = ctx.b
    with ctx.scratch(numel(shape) * 2) as buffer:
        base = b.gep(ctx.smem_base(), [const(i32, buffer)], source_etype=i8) if buffer else ctx.smem_base()
        for group in vector_groups(src, elem, dim=contig):
            idx = ctx.index(src, group[0])
            off = swizzled_offset(ctx, swz, shape, idx[rows_dim], idx[contig])
            store_elems(ctx, elem, off, [regs[r] for r in group], buffer)
        ctx.barrier()
        return _ldmatrix(ctx, elem, dst, swz, base, contig, ".trans" if contig != kdim else "")


def _ldmatrix(
    ctx: Lowering, elem: ElemType, dst: LinearLayout, swz: SwizzledShared, base: ir.Value, contig: int, trans: str
) -> Regs:
    b = ctx.b
    rows_dim = 1 - contig
    pair_bits = min(2, len(dst.reg) - 1)
    count = 1 << pair_bits
    name = LDMATRIX.format(n=count, trans=trans)
    # Per lane: row `lane % 8` of matrix `lane / 8`; matrix j's origin steps by the bases of
    # register bits 1 and 2 (the operand's second and third element pairs).
    p = ctx.prologue
    lane_row: ir.Value = p.and_(ctx.lane, const(i32, 7))
    lane_col: ir.Value = const(i32, 0)
    for j in range(pair_bits):
        on = p.and_(p.lshr(ctx.lane, const(i32, 3 + j)), const(i32, 1))
        basis = dst.reg[1 + j]
        if basis[rows_dim]:
            lane_row = p.add(lane_row, p.mul(on, const(i32, basis[rows_dim])))
        if basis[contig]:
            lane_col = p.add(lane_col, p.mul(on, const(i32, basis[contig])))
    for w, basis in enumerate(dst.warp):
        if any(basis):
            on = p.and_(p.lshr(ctx.warp, const(i32, w)), const(i32, 1))
            lane_row = p.add(lane_row, p.mul(on, const(i32, basis[rows_dim])))
            lane_col = p.add(lane_col, p.mul(on, const(i32, basis[contig])))
    out: dict[int, ir.Value] = {}
    half = llvm_type(elem)
    mask = (1 << (1 + pair_bits)) - 1
    for g in range(dst.num_regs):
        if g & mask:
            continue
        static = dst.reg_index(g)
        row = b.add(lane_row, const(i32, static[rows_dim])) if static[rows_dim] else lane_row
        col = b.add(lane_col, const(i32, static[contig])) if static[contig] else lane_col
        off = swizzled_offset(ctx, swz, dst.shape, row, col)
        ptr = b.gep(base, [off], source_etype=half)
        ret = ir.LiteralStructType([i32] * count)
        res = ctx.call(name, ret, [b.bitcast(ptr, sptr)] if ptr.type != sptr else [ptr])
        for j in range(count):
            pair = b.bitcast(b.extract_value(res, j), ir.VectorType(half, 2))
            out[g | (j << 1)] = b.extract_element(pair, const(i32, 0))
            out[g | (j << 1) | 1] = b.extract_element(pair, const(i32, 1))
    return [out[r] for r in range(dst.num_regs)]
