"""Reductions along an axis: within each thread, then across lanes with butterfly shuffles
(`shfl.sync.bfly`), then across warps through shared memory: each warp writes its partials, and
after one barrier each lane reads one warp's partial and butterfly shuffles fold them, so a
thread holds one value per partial instead of one per warp (fewer live registers).

The combine region is lowered inline on scalars, once per combining step. As in Triton, the
combine function is taken to be associative and commutative.
"""

from __future__ import annotations

from collections.abc import Callable

import llvmlite.ir as ir

from ....ir.core import Op
from ....ir.types import elem_of
from ...gpuir import LinearLayout
from .context import Lowering
from .exchange import check_axis_bases, shuffle_xor, warp_group
from .registry import Regs, lowering
from .smem import arrays, convert, load_elem, numel, row_major, store_elem
from .types import const, i32

Combine = Callable[[list[ir.Value], list[ir.Value]], list[ir.Value]]


def combiner(ctx: Lowering, op: Op) -> Combine:
    region = op.regions[0]

    def combine(x: list[ir.Value], y: list[ir.Value]) -> list[ir.Value]:
        return [r[0] for r in ctx.lower_region(region, [[v] for v in x] + [[v] for v in y])]

    return combine


@lowering("reduce")
def reduce(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    axis = op.attrs["axis"]
    src = ctx.layout(op.operands[0])
    check_axis_bases(src, axis)
    combine = combiner(ctx, op)
    keep = [i for i, b in enumerate(src.reg) if not b[axis]]
    along = [i for i, b in enumerate(src.reg) if b[axis]]

    # 1. In each thread: fold the registers that differ only along `axis`, in index order.
    accs: list[list[ir.Value]] = []
    for j in range(1 << len(keep)):
        base = sum(1 << k for t, k in enumerate(keep) if j >> t & 1)
        members = [base | sum(1 << a for t, a in enumerate(along) if c >> t & 1) for c in range(1 << len(along))]
        members.sort(key=lambda r: src.reg_index(r)[axis])
        acc = [regs[members[0]] for regs in args]
        for r in members[1:]:
            acc = combine(acc, [regs[r] for regs in args])
        accs.append(acc)

    # 2. Across the lanes that hold other elements of the axis.
    for bit, basis in enumerate(src.lane):
        if basis[axis]:
            accs = [combine(acc, [shuffle_xor(ctx, v, 1 << bit) for v in acc]) for acc in accs]

    # 3. Across warps: every warp writes its partials, then every thread folds them all.
    partial = src.project(axis)
    warp_bits = [bit for bit, basis in enumerate(src.warp) if basis[axis]]
    if warp_bits:
        accs = _across_warps(ctx, op, accs, partial, warp_bits, combine)

    out = [[acc[o] for acc in accs] for o in range(len(args))]
    results = []
    for o, result in enumerate(op.results):
        want = ctx.layout(result)
        results.append(out[o] if want == partial else convert(ctx, elem_of(result.type), out[o], partial, want))
    return results


def _across_warps(
    ctx: Lowering, op: Op, accs: list[list[ir.Value]], partial: LinearLayout, warp_bits: list[int], combine: Combine
) -> list[list[ir.Value]]:
    b = ctx.b
    elems = [elem_of(r.type) for r in op.results]
    count = numel(partial.shape)
    groups = 1 << len(warp_bits)
    offsets, size = arrays(elems, count * groups)
    group = b.mul(warp_group(ctx, warp_bits), const(i32, count))
    flats = [row_major(ctx, ctx.index(partial, j), partial.shape) for j in range(len(accs))]
    # Lane bits that hold copies of the same partial: as many as there are warp groups lets
    # each lane of such a set read a different group's partial and the set fold them by shuffles.
    free = [bit for bit, basis in enumerate(partial.lane) if not any(basis)][: len(warp_bits)]
    with ctx.scratch(size) as buffer:
        for flat, acc in zip(flats, accs):
            for e, off, v in zip(elems, offsets, acc):
                store_elem(ctx, e, b.add(group, flat), v, buffer + off)
        ctx.barrier()
        out = []
        if len(free) == len(warp_bits):
            # This lane reads the partial of warp group `mine`: its free lane bits, packed.
            mine: ir.Value | None = None
            for j, bit in enumerate(free):
                on = b.and_(b.lshr(ctx.lane, const(i32, bit)) if bit else ctx.lane, const(i32, 1))
                on = b.shl(on, const(i32, j)) if j else on
                mine = on if mine is None else b.or_(mine, on)
            assert mine is not None
            start = b.mul(mine, const(i32, count))
            for flat in flats:
                at = b.add(start, flat)
                acc = [load_elem(ctx, e, at, buffer + off) for e, off in zip(elems, offsets)]
                for bit in free:
                    acc = combine(acc, [shuffle_xor(ctx, v, 1 << bit) for v in acc])
                out.append(acc)
            return out
        for flat in flats:
            acc = [load_elem(ctx, e, flat, buffer + off) for e, off in zip(elems, offsets)]
            for g in range(1, groups):
                at = b.add(flat, const(i32, g * count))
                acc = combine(acc, [load_elem(ctx, e, at, buffer + off) for e, off in zip(elems, offsets)])
            out.append(acc)
    return out
