"""Inclusive scans along an axis, for any layout whose bases along the axis are one-hot.

The axis index is a sum of powers of two, each held by a register, lane or warp bit. Taking
those bits from the lowest power up, every element keeps its prefix inside its aligned block
and the block's total; merging a block with its partner (the block across the next bit) needs
only the partner's total: another register, a `shfl.sync.bfly` for a lane bit, or shared
memory for a warp bit. The combine region keeps its order, so it need not be commutative:
`combine(acc, x)` always has the elements that come earlier in scan order (index order, or
reversed for `reverse=True`) on the left, as in the interpreter's flip-scan-flip.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

import llvmlite.ir as ir

from ....ir.core import Op
from ....ir.types import ElemType, elem_of
from ...gpuir import LinearLayout
from .context import Lowering
from .exchange import check_axis_bases, shuffle_xor
from .reduce import Combine, combiner
from .registry import Regs, lowering
from .smem import arrays, load_elem, numel, row_major, store_elem
from .types import const, i32

Flag: TypeAlias = "bool | ir.Value"


Values: TypeAlias = "list[ir.Value]"
Pick: TypeAlias = "Callable[[Flag, Callable[[], Values], Callable[[], Values]], Values]"


def _picker(ctx: Lowering) -> Pick:
    """`pick(flag, yes, no)`: `yes()` or `no()`, or both behind a `select` when `flag` is known only at run time."""

    def pick(flag: Flag, yes: Callable[[], Values], no: Callable[[], Values]) -> Values:
        if isinstance(flag, bool):
            return yes() if flag else no()
        return [ctx.b.select(flag, y, n) for y, n in zip(yes(), no())]

    return pick


def merge_level(
    pick: Pick, combine: Combine, pre: Values, tot: Values, partner: Values, upper: Flag, reverse: bool
) -> tuple[Values, Values]:
    """One level of the scan, for the values one register holds: (prefix, block total) after
    merging its block (`pre`, `tot`) with the partner block across this level's bit, of total
    `partner`; `upper` says whether its block is the one with the bit set, the later in index order.

    In scan order the earlier block's total goes on the left of the later block's values: a
    forward scan adds the lower block's total to the upper block's prefixes, a reverse scan the
    upper block's total to the lower block's prefixes."""
    if reverse:
        new_pre = pick(upper, lambda: pre, lambda: combine(partner, pre))
        new_tot = pick(upper, lambda: combine(tot, partner), lambda: combine(partner, tot))
    else:
        new_pre = pick(upper, lambda: combine(partner, pre), lambda: pre)
        new_tot = pick(upper, lambda: combine(partner, tot), lambda: combine(tot, partner))
    return new_pre, new_tot


@lowering("scan")
def scan(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    axis, reverse = op.attrs["axis"], bool(op.attrs.get("reverse", False))
    ll = ctx.layout(op.operands[0])
    check_axis_bases(ll, axis)
    combine = combiner(ctx, op)
    pick = _picker(ctx)
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
        merged = [merge_level(pick, combine, pre[r], tot[r], partner[r], upper[r], reverse) for r in range(n)]
        pre, tot = [m[0] for m in merged], [m[1] for m in merged]
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
