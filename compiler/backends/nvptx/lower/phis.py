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
