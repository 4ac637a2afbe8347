"""Shape ops: broadcast, expand_dims, reshape, trans, cat, join, split and layout conversion.

Broadcast and expand_dims between related layouts (the same encoding, or its slice) only
rename registers; everything else moves data through shared memory (`smem.gather`).
"""

from __future__ import annotations

import llvmlite.ir as ir

from ....ir.core import Op
from ...gpuir import LinearLayout
from ...gpuir.mma import Mma, MmaOperand
from . import ldmatrix
from .context import Lowering
from .registry import Regs, lowering
from .smem import Index, convert, elem_bytes, gather, numel, row_major
from .types import const, i32


@lowering("convert_layout")
def convert_layout(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    src, dst, elem = ctx.layout(op.operands[0]), ctx.layout(op.result), ctx.elem(op.result)
    enc = ctx.gpu.encoding(op.result)
    if isinstance(enc, MmaOperand) and enc.parent.version == 3:  # wgmma reads its ring slot, or A's source registers
        return [[ir.Constant(ctx.ltype(op.result), None)] * dst.num_regs]
    if ldmatrix.fits(enc, elem) and not (src.same_threads(dst) and set(dst.reg_of_index) <= set(src.reg_of_index)):
        assert isinstance(enc, MmaOperand)
        return [ldmatrix.to_operand(ctx, elem, args[0], src, dst, enc)]
    source = ctx.gpu.encoding(op.operands[0])
    if isinstance(source, Mma) and source.version == 3 and src.rank == 2:
        # A wgmma accumulator's warp writes 8 rows at once, a few bytes each: unpadded rows of
        # 128 bytes or more put them all in one bank (8-way conflicts on every store of the
        # matmul epilogue); rows 16 bytes longer start 4 banks apart.
        return [convert(ctx, elem, args[0], src, dst, pad=16 // elem_bytes(elem))]
    return [convert(ctx, elem, args[0], src, dst)]


def _zeroed(ll: LinearLayout, dims: set[int]) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]:
    def z(b: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(0 if d in dims else x for d, x in enumerate(b))

    return tuple(map(z, ll.lane)), tuple(map(z, ll.warp))


@lowering("broadcast")
def broadcast(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    src, dst = ctx.layout(op.operands[0]), ctx.layout(op.result)
    dims = {d for d, (s, t) in enumerate(zip(src.shape, dst.shape)) if s != t}
    if (src.lane, src.warp) == _zeroed(dst, dims):
        wanted = [tuple(0 if d in dims else x for d, x in enumerate(dst.reg_index(r))) for r in range(dst.num_regs)]
        if all(w in src.reg_of_index for w in wanted):
            return [[args[0][src.reg_of_index[w]] for w in wanted]]

    def address(idx: Index) -> ir.Value:
        return row_major(ctx, [const(i32, 0) if d in dims else x for d, x in enumerate(idx)], src.shape)

    return [gather(ctx, ctx.elem(op.result), [(args[0], src)], dst, address)]


@lowering("expand_dims")
def expand_dims(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    src, dst = ctx.layout(op.operands[0]), ctx.layout(op.result)
    axis = op.attrs["axis"]
    if src.rank == 0:
        return [args[0] * dst.num_regs]
    if dst.project(axis) == src:
        return [list(args[0])]
    return [
        gather(
            ctx,
            ctx.elem(op.result),
            [(args[0], src)],
            dst,
            lambda idx: row_major(ctx, idx[:axis] + idx[axis + 1 :], src.shape),
        )
    ]


@lowering("reshape", "cat")
def reshape(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    # Row-major order is kept by both: a reshape reads the same flat index, and cat along
    # dim 0 is the first tile's elements followed by the second's.
    dst = ctx.layout(op.result)
    sources = [(regs, ctx.layout(v)) for regs, v in zip(args, op.operands)]
    if op.name == "reshape" and numel(dst.shape) == 1:
        return [[args[0][0]] * dst.num_regs]
    return [gather(ctx, ctx.elem(op.result), sources, dst)]


@lowering("trans")
def trans(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    src, dst = ctx.layout(op.operands[0]), ctx.layout(op.result)
    perm = op.attrs["perm"]

    def address(idx: Index) -> ir.Value:
        src_idx: list = [None] * len(perm)
        for i, p in enumerate(perm):
            src_idx[p] = idx[i]
        return row_major(ctx, src_idx, src.shape)

    return [gather(ctx, ctx.elem(op.result), [(args[0], src)], dst, address)]


@lowering("join")
def join(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    dst = ctx.layout(op.result)
    src = ctx.layout(op.operands[0])
    n = numel(src.shape)

    def address(idx: Index) -> ir.Value:
        flat = row_major(ctx, idx[:-1], src.shape)
        return ctx.b.add(flat, ctx.b.mul(idx[-1], const(i32, n)))

    sources = [(args[0], src), (args[1], ctx.layout(op.operands[1]))]
    return [gather(ctx, ctx.elem(op.result), sources, dst, address)]


@lowering("split")
def split(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    src = ctx.layout(op.operands[0])
    out = []
    for j, result in enumerate(op.results):
        dst = ctx.layout(result)

        def address(idx: Index, j: int = j) -> ir.Value:
            return row_major(ctx, list(idx) + [const(i32, j)], src.shape)

        out.append(gather(ctx, ctx.elem(result), [(args[0], src)], dst, address))
    return out
