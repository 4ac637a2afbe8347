"""Cheap tiles made where they are used: an `arange`, a tile `constant` or the `splat` of a scalar that several
ops read gets a copy of its own for each reader after the first, right before it.

Layout assignment puts a value in one layout. A tile two readers need in different layouts (one `arange` for a
tile's rows and its columns, `tl.arange(0, BLOCK_M)` and `tl.arange(0, BLOCK_N)` merged where the two sizes
are equal) then reaches one of them through a conversion, which moves the data through shared memory between
two CTA barriers. Each copy takes its reader's layout instead, and where two copies land in the same layout,
LLVM merges what they compute. Tutorial 09's persistent matmul through pointers at 128x128 carries a tile's row
and column offsets through its flattened loop, and converted one of them on every K step (two shared-memory
round trips, four CTA barriers) before its copies had one each.
"""

from __future__ import annotations

from ...ir.core import Block, Function, Op, Value
from ...ir.types import TileType
from ...passes.rewrite import clone_op

_CHEAP = frozenset({"arange", "constant", "splat"})


def _cheap(v: Value) -> Op | None:
    """The op that makes tile `v` from scalars alone (no tile operand), when it is cheap to make again."""
    op = v.owner
    if not isinstance(op, Op) or op.name not in _CHEAP or not isinstance(v.type, TileType):
        return None
    return None if any(isinstance(w.type, TileType) for w in op.operands) else op


def rematerialize(fn: Function) -> Function:
    """Give every reader but the first of a cheap tile of `fn` its own copy, in place; returns `fn`."""
    seen: set[Value] = set()

    def block(b: Block) -> None:
        ops: list[Op] = []
        for op in b.ops:
            for region in op.regions:
                block(region)
            copies: dict[Value, Value] = {}
            for i, v in enumerate(op.operands):
                maker = _cheap(v)
                if maker is None:
                    continue
                if v not in copies:
                    if v in seen:
                        clone = clone_op(maker, {})
                        ops.append(clone)
                        copies[v] = clone.result
                    else:
                        seen.add(v)
                        copies[v] = v
                op.operands[i] = copies[v]
            ops.append(op)
        b.ops = ops

    block(fn.body)
    return fn
