"""Structured control flow: `for`, `if`, `while`, `return`; tiles are carried as one phi per
register, in the layout the carried value has on both sides of the back edge."""

from __future__ import annotations

import llvmlite.ir as ir

from ....ir.core import Op
from ....ir.types import ScalarType, elem_of
from . import wgmma
from .context import Lowering
from .phis import close_phis, for_header, phis
from .pipeline import pipelined_for
from .registry import Regs, lowering
from .wgmma import ZeroStart


@lowering("for")
def for_loop(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    plan = ctx.gpu.pipelines.get(op)
    if plan is not None:
        return pipelined_for(ctx, op, args, plan)
    b = ctx.b
    lo, hi, step = args[0][0], args[1][0], args[2][0]
    bound = elem_of(op.operands[0].type)
    signed = isinstance(bound, ScalarType) and bound.is_int_signed()
    zero = ZeroStart(ctx, op)
    header, exit_, ((iv,), *carried) = for_header(ctx, [[lo], *zero.inits(args[3:])], signed, hi)
    zero.enter(iv, lo)
    ctx.shared.loop_begin()
    yields = ctx.lower_region(op.regions[0], [[iv], *carried])
    ctx.loop_body_end()
    latch = b.block
    close_phis([[iv]], [[b.add(iv, step)]], latch)
    close_phis(carried, yields, latch)
    b.branch(header)
    b.position_at_end(exit_)
    return zero.leave([list(row) for row in carried], iv, lo, hi)


@lowering("if")
def if_op(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    b = ctx.b
    then_bb = ctx.func.append_basic_block("if.then")
    else_bb = ctx.func.append_basic_block("if.else")
    merge = ctx.func.append_basic_block("if.end")
    b.cbranch(args[0][0], then_bb, else_bb)
    ends: list[tuple[ir.Block, list[Regs]]] = []
    entry, states = ctx.shared.branch(), []
    for region, block in zip(op.regions, (then_bb, else_bb)):
        ctx.shared.set_state(entry)
        b.position_at_end(block)
        read = {v for o in region.walk() if o is not region.terminator for v in o.operands}
        saved = {v: ctx.values[v] for v in ctx.settle_in.get(op, ()) if v in read}
        for v, regs in saved.items():  # an asynchronous dot's accumulator: its group done first
            ctx.values[v] = wgmma.wait(ctx, 0, regs)
        values = ctx.lower_region(region, [])
        ctx.values.update(saved)
        ends.append((b.block, values))
        states.append(ctx.shared.state)
        b.branch(merge)
    ctx.shared.join(states)
    b.position_at_end(merge)
    (then_end, then_vals), (else_end, else_vals) = ends
    merged = phis(ctx, then_vals, then_end)
    close_phis(merged, else_vals, else_end)
    after = ctx.after_branch.pop(op, None)
    if after is not None:
        after()
    return [list(row) for row in merged]


@lowering("while")
def while_loop(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    b = ctx.b
    before_bb = ctx.func.append_basic_block("while.before")
    after_bb = ctx.func.append_basic_block("while.after")
    exit_ = ctx.func.append_basic_block("while.exit")
    pre = b.block
    b.branch(before_bb)
    b.position_at_end(before_bb)
    carried = phis(ctx, args, pre)
    ctx.shared.loop_begin()
    cond, *passed = ctx.lower_region(op.regions[0], [list(r) for r in carried])
    b.cbranch(cond[0], after_bb, exit_)
    b.position_at_end(after_bb)
    yields = ctx.lower_region(op.regions[1], passed)
    ctx.loop_body_end()
    close_phis(carried, yields, b.block)
    b.branch(before_bb)
    b.position_at_end(exit_)
    return passed


@lowering("return")
def return_op(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    if not ctx.b.block.is_terminated:
        ctx.b.ret_void()
    return []
