"""Loop-carried and merged values: one phi per register."""

from __future__ import annotations

import llvmlite.ir as ir

from .context import Lowering
from .registry import Regs


def phis(ctx: Lowering, values: list[Regs], pred: ir.Block) -> list[list[ir.PhiInstr]]:
    """A phi for each register of each value, at the builder's position, with `values` coming from `pred`."""
    out = []
    for regs in values:
        row = []
        for v in regs:
            phi = ctx.b.phi(v.type)
            phi.add_incoming(v, pred)
            row.append(phi)
        out.append(row)
    return out


def close_phis(rows: list[list[ir.PhiInstr]], values: list[Regs], block: ir.Block) -> None:
    """Add `values` coming from `block` to the phis of `phis`."""
    for row, regs in zip(rows, values):
        for phi, v in zip(row, regs):
            phi.add_incoming(v, block)


def less(ctx: Lowering, signed: bool, a: ir.Value, b: ir.Value) -> ir.Value:
    return ctx.b.icmp_signed("<", a, b) if signed else ctx.b.icmp_unsigned("<", a, b)


def for_header(ctx: Lowering, values: list[Regs], signed: bool, hi: ir.Value) -> tuple[ir.Block, ir.Block, list[list[ir.PhiInstr]]]:
    """A counted loop's header: a branch there from here, a phi for each register of `values` (the first
    value is the induction variable) and `iv < hi` branching to a new body block, where the builder is
    left, or to the exit block. The header, the exit block and the phis."""
    b = ctx.b
    header, body, exit_ = (ctx.func.append_basic_block(f"for.{part}") for part in ("header", "body", "exit"))
    pre = b.block
    b.branch(header)
    b.position_at_end(header)
    rows = phis(ctx, values, pre)
    b.cbranch(less(ctx, signed, rows[0][0], hi), body, exit_)
    b.position_at_end(body)
    return header, exit_, rows
