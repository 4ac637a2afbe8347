"""Inclusive scans along an axis, for any layout whose bases along the axis are one-hot.

The axis index is a sum of powers of two, each held by a register, lane or warp bit. Taking
those bits from the lowest power up, every element keeps its prefix inside its aligned block
and the block's total; merging a block with its partner (the block across the next bit) needs
only the partner's total: another register, a `shfl.sync.bfly` for a lane bit, or shared
memory for a warp bit. The combine region keeps its order, so it need not be commutative.
"""

from __future__ import annotations

from typing import TypeAlias

import llvmlite.ir as ir

from ....ir.core import Op
from ....ir.types import ElemType, elem_of
from ...gpuir import LinearLayout
from .context import Lowering
from .exchange import check_axis_bases, shuffle_xor
from .reduce import combiner
from .registry import Regs, lowering
from .smem import arrays, load_elem, numel, row_major, store_elem
from .types import const, i32

Flag: TypeAlias = "bool | ir.Value"


def _select(ctx: Lowering, flag: Flag, yes: list[ir.Value], no: list[ir.Value]) -> list[ir.Value]:
    if isinstance(flag, bool):
        return yes if flag else no
    return [ctx.b.select(flag, y, n) for y, n in zip(yes, no)]


@lowering("scan")
def scan(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    axis, reverse = op.attrs["axis"], bool(op.attrs.get("reverse", False))
    ll = ctx.layout(op.operands[0])
    check_axis_bases(ll, axis)
    combine = combiner(ctx, op)
    elems = [elem_of(v.type) for v in op.operands]
    b = ctx.b
    n = ll.num_regs
    pre = [[regs[r] for regs in args] for r in range(n)]
    tot = [list(p) for p in pre]
    levels = sorted(
        (basis[axis], kind, bit)
        for kind, bases in (("reg", ll.reg), ("lane", ll.lane), ("warp", ll.warp))
        for bit, basis in enumerate(bases)
        if basis[axis]
    )
    for power, kind, bit in levels:
        upper: list[Flag]
        if kind == "reg":
            partner = [tot[r ^ (1 << bit)] for r in range(n)]
            upper = [bool(r >> bit & 1) for r in range(n)]
        elif kind == "lane":
            partner = [[shuffle_xor(ctx, v, 1 << bit) for v in t] for t in tot]
            on = b.icmp_unsigned("!=", b.and_(ctx.lane, const(i32, 1 << bit)), const(i32, 0))
            upper = [on] * n
        else:
            partner = _partner_via_smem(ctx, elems, tot, ll, axis, power)
            on = b.icmp_unsigned("!=", b.and_(ctx.warp, const(i32, 1 << bit)), const(i32, 0))
            upper = [on] * n
        for r in range(n):
            # The block with the bit clear comes first in index order; a forward scan adds the
            # partner's total to the prefix of the later block, a reverse scan to the earlier.
            u = upper[r]
            receives: Flag = (not u if reverse else u) if isinstance(u, bool) else (b.not_(u) if reverse else u)
            if receives is not False:
                merged = combine(pre[r], partner[r]) if reverse else combine(partner[r], pre[r])
                pre[r] = _select(ctx, receives, merged, pre[r])
            if isinstance(u, bool):
                tot[r] = combine(partner[r], tot[r]) if u else combine(tot[r], partner[r])
            else:
                tot[r] = _select(ctx, u, combine(partner[r], tot[r]), combine(tot[r], partner[r]))
    return [[p[o] for p in pre] for o in range(len(args))]


def _partner_via_smem(
    ctx: Lowering, elems: list[ElemType], tot: list[list[ir.Value]], ll: LinearLayout, axis: int, power: int
) -> list[list[ir.Value]]:
    b = ctx.b
    offsets, size = arrays(elems, numel(ll.shape))
    with ctx.scratch(size) as buffer:
        for r, t in enumerate(tot):
            flat = row_major(ctx, ctx.index(ll, r), ll.shape)
            for e, off, v in zip(elems, offsets, t):
                store_elem(ctx, e, flat, v, buffer + off)
        ctx.barrier()
        out = []
        for r in range(len(tot)):
            idx = ctx.index(ll, r)
            idx[axis] = b.xor(idx[axis], const(i32, power))
            flat = row_major(ctx, idx, ll.shape)
            out.append([load_elem(ctx, e, flat, buffer + off) for e, off in zip(elems, offsets)])
    return out
