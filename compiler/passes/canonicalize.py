"""Canonicalization: small local rewrites, one pattern per op, that leave fewer or simpler ops.

    broadcast/reshape/cast/bitcast to the operand's type  ->  the operand
    trans with the identity permutation                   ->  the operand
    broadcast/expand_dims/reshape/trans of a splat        ->  one splat
    trans(trans(x))                                       ->  one trans, permutations composed
    reshape(reshape(x))                                   ->  one reshape
    select(c, x, x)                                       ->  x
    not(not(x)), neg(neg(x))                              ->  x

Ops a rewrite leaves unused are removed by `dce`.
"""

from __future__ import annotations

from collections.abc import Callable

from ..ir.core import Module, Op, Value
from ..ir.registry import OpRegistry
from ..ir.types import TileType
from .rewrite import Subst, replace_results, rewrite_module

Pattern = Callable[[Op, Subst], list[Op] | None]


def canonicalize(module: Module) -> Module:
    """Apply the rewrites above throughout `module`; returns it, changed in place."""
    return rewrite_module(module, _visit)


def _visit(op: Op, subst: Subst) -> list[Op] | None:
    pattern = PATTERNS.get(op.name)
    return pattern(op, subst) if pattern is not None else None


def _producer(v: Value, name: str) -> Op | None:
    owner = v.owner
    return owner if isinstance(owner, Op) and owner.name == name else None


def _forward(op: Op, subst: Subst, value: Value) -> list[Op]:
    replace_results(subst, op, [value])
    return []


def _new(op: Op, name: str, operand: Value, attrs: dict[str, object]) -> list[Op]:
    # Replacing an op by one with the same result type keeps the op's own result value.
    new = Op(name, [operand], [], attrs, loc=op.loc)
    new.results = op.results
    for r in new.results:
        r.owner = new
    return [new]


def _splat_of(op: Op, subst: Subst) -> list[Op] | None:
    """A shape op applied to a splat is a splat of the result's shape."""
    splat = _producer(op.operands[0], "splat")
    ty = op.result.type
    if splat is None or not isinstance(ty, TileType):
        return None
    return _new(op, "splat", splat.operands[0], {"shape": list(ty.shape)})


def _same_type(op: Op, subst: Subst) -> list[Op] | None:
    if op.result.type == op.operands[0].type:
        return _forward(op, subst, op.operands[0])
    return None


def _reshape_reshape(op: Op, subst: Subst) -> list[Op] | None:
    inner = _producer(op.operands[0], "reshape")
    if inner is None:
        return None
    source = inner.operands[0]
    if op.result.type == source.type:
        return _forward(op, subst, source)
    attrs: dict[str, object] = {"shape": list(op.attrs["shape"])}
    if op.attrs.get("can_reorder") or inner.attrs.get("can_reorder"):
        attrs["can_reorder"] = True
    return _new(op, "reshape", source, attrs)


def _identity_perm(op: Op, subst: Subst) -> list[Op] | None:
    perm = list(op.attrs["perm"])
    return _forward(op, subst, op.operands[0]) if perm == sorted(perm) else None


def _trans_trans(op: Op, subst: Subst) -> list[Op] | None:
    inner = _producer(op.operands[0], "trans")
    if inner is None:
        return None
    composed = [inner.attrs["perm"][p] for p in op.attrs["perm"]]
    if composed == sorted(composed):
        return _forward(op, subst, inner.operands[0])
    return _new(op, "trans", inner.operands[0], {"perm": composed})


def _select(op: Op, subst: Subst) -> list[Op] | None:
    _, x, y = op.operands
    return _forward(op, subst, x) if x is y else None


def _involution(op: Op, subst: Subst) -> list[Op] | None:
    inner = _producer(op.operands[0], op.name)
    return _forward(op, subst, inner.operands[0]) if inner is not None else None


def _first(*patterns: Pattern) -> Pattern:
    """The first of `patterns` that applies."""

    def apply(op: Op, subst: Subst) -> list[Op] | None:
        for pattern in patterns:
            done = pattern(op, subst)
            if done is not None:
                return done
        return None

    return apply


# Canonicalization is optional: an op without a pattern is kept as it is.
PATTERNS: OpRegistry[Pattern] = OpRegistry("canonicalize", complete=False)
PATTERNS.register("broadcast")(_first(_same_type, _splat_of))
PATTERNS.register("expand_dims")(_splat_of)
PATTERNS.register("reshape")(_first(_same_type, _splat_of, _reshape_reshape))
PATTERNS.register("trans")(_first(_identity_perm, _splat_of, _trans_trans))
PATTERNS.register("cast", "bitcast")(_same_type)
PATTERNS.register("select")(_select)
PATTERNS.register("not", "neg")(_involution)
