"""Data-dependent indexing through shared memory: `gather` and `histogram`.

`gather` writes its source row-major into scratch shared memory, then every thread reads, for
each of its result registers, the element its index register names along the gathered axis (the
result has its index's layout). An index outside the source is undefined, as in Triton; here it
wraps around the axis' extent, so that it never reads outside the buffer.

`histogram` zeroes one int32 counter per bin in shared memory, adds one with a shared-memory atomic
for every element in range (and not masked off), counting each element once however many threads
hold it, and reads the counters back in the result's layout.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ....ir.core import Op
from ....ir.types import ScalarType, int32
from .context import Lowering
from .registry import Regs, lowering
from .smem import elem_bytes, load_elem, numel, row_major, slot, store_elem, store_elems, vector_groups
from .types import const, i32, i64


def _widen(ctx: Lowering, x: ir.Value, elem: ScalarType, to: ir.IntType) -> ir.Value:
    """Integer `x` of type `elem` as `to`: truncated, or extended by its signedness."""
    bits = elem.primitive_bitwidth
    if bits > to.width:
        return ctx.b.trunc(x, to)
    if bits < to.width:
        return ctx.b.zext(x, to) if elem.is_int_unsigned() or elem.is_bool() else ctx.b.sext(x, to)
    return x


def _index_i32(ctx: Lowering, x: ir.Value, elem: ScalarType, extent: int) -> ir.Value:
    x = _widen(ctx, x, elem, i32)
    if extent & (extent - 1) == 0:
        return ctx.b.and_(x, const(i32, extent - 1))
    return ctx.b.urem(x, const(i32, extent))


@lowering("gather")
def gather(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    src_v, index_v = op.operands
    src, dst = ctx.layout(src_v), ctx.layout(op.result)
    if ctx.layout(index_v) != dst:
        raise ctx.error(op, "gather's index and result must share a layout (the layout pass relates them)")
    elem, index_elem = ctx.elem(op.result), ctx.elem(index_v)
    assert isinstance(index_elem, ScalarType)
    axis = op.attrs["axis"]
    extent = src.shape[axis]
    with ctx.scratch(numel(src.shape) * elem_bytes(elem)) as buffer:
        for group in vector_groups(src, elem):
            offset = row_major(ctx, ctx.index(src, group[0]), src.shape)
            store_elems(ctx, elem, offset, [args[0][r] for r in group], buffer)
        ctx.barrier()
        out = []
        for r in range(dst.num_regs):
            idx = ctx.index(dst, r)
            idx[axis] = _index_i32(ctx, args[1][r], index_elem, extent)
            out.append(load_elem(ctx, elem, row_major(ctx, idx, src.shape), buffer))
    return [out]


def _in_range(ctx: Lowering, x: ir.Value, elem: ScalarType, bins: int) -> ir.Value:
    # Negative values of a signed type become huge unsigned ones: one unsigned compare covers both ends.
    return ctx.b.icmp_unsigned("<", _widen(ctx, x, elem, i64), const(i64, bins))


@lowering("histogram")
def histogram(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    src, dst = ctx.layout(op.operands[0]), ctx.layout(op.result)
    elem = ctx.elem(op.operands[0])
    assert isinstance(elem, ScalarType)
    bins = op.attrs["num_bins"]
    b = ctx.b
    with ctx.scratch(bins * 4) as buffer:
        for first in range(0, bins, ctx.num_threads):
            counter = b.add(ctx.tid, const(i32, first)) if first else ctx.tid
            if first + ctx.num_threads <= bins:
                store_elem(ctx, int32, counter, const(i32, 0), buffer)
                continue
            with b.if_then(b.icmp_unsigned("<", counter, const(i32, bins))):
                store_elem(ctx, int32, counter, const(i32, 0), buffer)
        ctx.barrier()
        owner = ctx.owner(src)
        for r in range(src.num_regs):
            if src.reg_of_index[src.reg_index(r)] != r:
                continue  # the same element again in this thread's registers
            x = args[0][r]
            pred = ctx.and_preds(owner, _in_range(ctx, x, elem, bins))
            if len(args) == 2:
                pred = ctx.and_preds(pred, args[1][r])
            assert pred is not None
            with b.if_then(pred):
                bin_ = _widen(ctx, x, elem, i32)
                b.atomic_rmw("add", slot(ctx, int32, bin_, buffer), const(i32, 1), "monotonic")
        ctx.barrier()
        out = [load_elem(ctx, int32, row_major(ctx, ctx.index(dst, r), dst.shape), buffer) for r in range(dst.num_regs)]
    return [out]
