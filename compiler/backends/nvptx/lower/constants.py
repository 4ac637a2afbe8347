"""Constants, grid indices, `arange`, and the ops that only carry facts (hints, `assume`)."""

from __future__ import annotations

from ....ir.core import Op
from .context import Lowering
from .registry import Regs, lowering
from .types import const, i32, void

_GRID = {"program_id": "ctaid", "num_programs": "nctaid"}


@lowering("constant")
def constant(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    value = op.attrs["value"]
    c = const(ctx.ltype(op.result), value)
    return [[c] * ctx.layout(op.result).num_regs]


@lowering("program_id", "num_programs")
def grid_index(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    axis = "xyz"[op.attrs["axis"]]
    return [[ctx.program_scalar(f"{_GRID[op.name]}.{axis}")]]


@lowering("arange")
def arange(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    ll = ctx.layout(op.result)
    start = op.attrs["start"]
    out = []
    for r in range(ll.num_regs):
        (idx,) = ctx.index(ll, r)
        out.append(ctx.b.add(idx, const(i32, start)) if start else idx)
    return [out]


@lowering("splat")
def splat(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    return [args[0] * ctx.layout(op.result).num_regs]


@lowering("multiple_of", "max_contiguous", "max_constancy")
def hint(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    return [args[0]]


@lowering("assume")
def assume(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    fn = ctx.declare("llvm.assume", void, [args[0][0].type])
    for cond in args[0]:
        ctx.b.call(fn, [cond])
    return []


@lowering("barrier")
def barrier(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    ctx.barrier()
    return []
