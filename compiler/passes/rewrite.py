"""What every pass shares: replacing uses of values, rewriting blocks op by op, cloning regions.

The IR keeps no use lists, so uses are replaced by walking. A pass records `old -> new` in a
`Subst` and the walk rewrites each operand when it reaches it; since every use of a value comes
after its definition in program order, a single forward walk sees every replacement in time.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from ..ir.core import Block, Function, Loc, Module, Op, Value
from ..ir.ops import OPS, infer
from ..ir.types import Type

Subst = dict[Value, Value]

# Called on an op once its operands are substituted and its regions rewritten. Returns the ops
# to put in its place (`[]` to drop it; replaced results go in the `Subst`), or None to keep it.
Visit = Callable[[Op, Subst], list[Op] | None]


def resolve(subst: Subst, v: Value) -> Value:
    """The value that replaces `v`, following chains of replacements."""
    while v in subst:
        v = subst[v]
    return v


def replace_results(subst: Subst, op: Op, values: list[Value]) -> None:
    """Record that `values` replace the results of `op`, one for one."""
    for old, new in zip(op.results, values, strict=True):
        subst[old] = new


def rewrite_block(block: Block, visit: Visit, subst: Subst) -> None:
    """Rewrite `block` in place: substitute operands, recurse into regions, then `visit` each op."""
    out: list[Op] = []
    for op in block.ops:
        op.operands = [resolve(subst, v) for v in op.operands]
        for region in op.regions:
            rewrite_block(region, visit, subst)
        new = visit(op, subst)
        out.extend([op] if new is None else new)
    block.ops = out


def rewrite_module(module: Module, visit: Visit) -> Module:
    """Apply `visit` to every op of every function (post-order, program order); returns `module`."""
    for fn in module.functions:
        rewrite_block(fn.body, visit, {})
    return module


def replace_all_uses(fn: Function, subst: Subst) -> None:
    """Make every operand in `fn` that `subst` maps (transitively) use the replacement instead."""
    for op in fn.walk():
        op.operands = [resolve(subst, v) for v in op.operands]


def has_side_effects(op: Op) -> bool:
    """Whether `op` or anything in its regions writes memory, synchronises or traps.

    An op missing from the catalogue counts as having side effects, so no pass deletes or
    merges what it does not understand; a volatile load must happen even when unused, and
    inline assembly not declared pure (`is_pure=False`) runs as written.
    """
    opdef = OPS.get(op.name)
    if opdef is None or opdef.side_effects:
        return True
    if op.name == "load" and op.attrs.get("volatile"):
        return True
    if op.name == "inline_asm" and not op.attrs.get("pure"):
        return True
    return any(has_side_effects(inner) for region in op.regions for inner in region.ops)


def constant_op(value: bool | int | float, ty: Type, loc: Loc | None) -> Op:
    """A new `constant` op (a splat when `ty` is a tile)."""
    return Op("constant", [], [ty], {"value": value, "type": ty}, loc=loc)


def constant_value(v: Value) -> Any | None:
    """The `value` attribute of the `constant` op defining `v`, or None when `v` is not one."""
    owner = v.owner
    if isinstance(owner, Op) and owner.name == "constant":
        return owner.attrs.get("value")
    return None


def users(fn: Function) -> dict[Value, list[Op]]:
    """Each value of `fn` that an op reads -> those ops, in program order."""
    found: dict[Value, list[Op]] = {}
    for op in fn.walk():
        for v in op.operands:
            found.setdefault(v, []).append(op)
    return found


def feeding(ops: list[Op], roots: list[Value]) -> list[Op]:
    """The ops of `ops` (in program order) that compute `roots`, directly or through each other."""
    made = {r: op for op in ops for r in op.results}
    need: set[Op] = set()
    work = list(roots)
    while work:
        op = made.get(work.pop())
        if op is not None and op not in need:
            need.add(op)
            work.extend(op.operands)
    return [op for op in ops if op in need]


def clone_block(block: Block, mapping: Subst) -> Block:
    """A deep copy of `block`; operands are looked up in `mapping`, which gains the copy's values."""
    new = Block([a.type for a in block.args], [a.hint for a in block.args])
    for old_arg, new_arg in zip(block.args, new.args):
        mapping[old_arg] = new_arg
    new.ops = [clone_op(op, mapping) for op in block.ops]
    return new


def clone_op(op: Op, mapping: Subst) -> Op:
    """A deep copy of `op` and its regions, with operands remapped through `mapping`."""
    operands = [mapping.get(v, v) for v in op.operands]
    regions = [clone_block(r, mapping) for r in op.regions]
    new = Op(op.name, operands, [r.type for r in op.results], copy.deepcopy(op.attrs), regions, op.loc)
    for old, res in zip(op.results, new.results):
        res.hint = old.hint
        mapping[old] = res
    return new


def clone_function(fn: Function) -> Function:
    """A deep copy of `fn` (the backend's own copy of the kernel, which its passes change in place)."""
    body = clone_block(fn.body, {})
    return Function(fn.name, body, list(fn.arg_names), list(fn.result_types), fn.kernel, fn.loc)


class Emitter:
    """Appends new ops to `ops` at `loc`, typed by the op catalogue (for passes that build arithmetic)."""

    def __init__(self, ops: list[Op], loc: Loc | None) -> None:
        self.ops, self.loc = ops, loc

    def op(self, name: str, *operands: Value, **attrs: Any) -> Value:
        self.ops.append(Op(name, list(operands), infer(name, [v.type for v in operands], dict(attrs), ()), dict(attrs),
                           (), self.loc))
        return self.ops[-1].result

    def const(self, value: bool | int | float, ty: Type) -> Value:
        self.ops.append(constant_op(value, ty, self.loc))
        return self.ops[-1].result
