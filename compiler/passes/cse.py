"""Common-subexpression elimination: a pure op equal to an earlier one reuses its results.

Two ops are equal when they have the same name, operands, attributes and result types. An op
is pure when the catalogue gives it no side effects, it has no regions and it is not a `load`
(memory may change between two loads; telling when it cannot is left to a later analysis).

Scopes follow regions: an op in a region may reuse one from an enclosing block, earlier in
program order; ops in a region are never reused outside it, nor in a sibling region. The
combine regions of `reduce` and `scan` start from an empty scope: they are run on their own
(the interpreter evaluates them apart from the enclosing function), so they must not come to
use values from outside.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Hashable
from typing import Any

from ..ir.core import Block, Module, Op
from ..ir.ops import OPS
from .rewrite import Subst, replace_results, resolve

Scope = ChainMap[Hashable, Op]

_ISOLATED = ("reduce", "scan")


def cse(module: Module) -> Module:
    """Merge equal pure ops throughout `module`; returns it, changed in place."""
    for fn in module.functions:
        _block(fn.body, ChainMap(), {})
    return module


def _block(block: Block, scope: Scope, subst: Subst) -> None:
    out: list[Op] = []
    for op in block.ops:
        op.operands = [resolve(subst, v) for v in op.operands]
        for region in op.regions:
            _block(region, ChainMap() if op.name in _ISOLATED else scope.new_child(), subst)
        if _pure(op):
            key = _key(op)
            earlier = scope.get(key)
            if earlier is not None:
                replace_results(subst, op, earlier.results)
                continue
            scope[key] = op
        out.append(op)
    block.ops = out


def _pure(op: Op) -> bool:
    opdef = OPS.get(op.name)
    return (
        opdef is not None
        and not opdef.side_effects
        and not opdef.terminator
        and not op.regions
        and op.name not in ("load", "descriptor_load")  # memory may change between two
        and not (op.name == "inline_asm" and not op.attrs.get("pure"))
        and bool(op.results)
    )


def _key(op: Op) -> Hashable:
    attrs = tuple(sorted((k, _freeze(v)) for k, v in op.attrs.items()))
    return op.name, tuple(op.operands), attrs, tuple(r.type for r in op.results)


def _freeze(value: Any) -> Hashable:
    # 0.0 == -0.0 and 1 == 1.0 == True in Python; constants of those must stay apart.
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, (list, tuple)):
        return ("list", tuple(_freeze(v) for v in value))
    return (type(value).__name__, value)
