"""Dead-code elimination: ops without side effects whose results nothing uses are removed.

One backward walk suffices: every use of a value comes after its definition, so by the time
the walk reaches an op it has seen all the ops that could use it (those later in its block and
in the regions of later ops). An op with regions (`for`, `while`, `if`, `reduce`) goes as a
whole when none of its results is used and nothing inside it has side effects; otherwise it
stays and its regions are cleaned the same way. Terminators always stay, so loop-carried values
are kept; an unused load goes, a volatile one stays.
"""

from __future__ import annotations

from ..ir.core import Block, Module, Op, Value
from ..ir.ops import OPS
from .rewrite import has_side_effects


def dce(module: Module) -> Module:
    """Remove dead ops throughout `module`; returns it, changed in place."""
    for fn in module.functions:
        _block(fn.body, set())
    return module


def _block(block: Block, used: set[Value]) -> None:
    kept: list[Op] = []
    for op in reversed(block.ops):
        if not _live(op, used):
            continue
        kept.append(op)
        used.update(op.operands)
        for region in op.regions:
            _block(region, used)
    kept.reverse()
    block.ops = kept


def _live(op: Op, used: set[Value]) -> bool:
    opdef = OPS.get(op.name)
    if opdef is not None and opdef.terminator:
        return True
    return any(r in used for r in op.results) or has_side_effects(op)
