"""Deep copies of functions, so the backend can insert ops without touching the caller's IR."""

from __future__ import annotations

from ...ir.core import Block, Function, Op, Value


def clone_block(block: Block, vmap: dict[Value, Value]) -> Block:
    new = Block([a.type for a in block.args], [a.hint for a in block.args])
    for old, arg in zip(block.args, new.args):
        vmap[old] = arg
    for op in block.ops:
        new.ops.append(clone_op(op, vmap))
    return new


def clone_op(op: Op, vmap: dict[Value, Value]) -> Op:
    regions = [clone_block(r, vmap) for r in op.regions]
    operands = [vmap.get(v, v) for v in op.operands]
    new = Op(op.name, operands, [r.type for r in op.results], dict(op.attrs), regions, op.loc)
    for old, res in zip(op.results, new.results):
        res.hint = old.hint
        vmap[old] = res
    return new


def clone_function(fn: Function) -> Function:
    body = clone_block(fn.body, {})
    return Function(fn.name, body, list(fn.arg_names), list(fn.result_types), fn.kernel, fn.loc)
