"""A dot whose product is added to a tile accumulates into it: `c + tl.dot(a, b)` becomes
`tl.dot(a, b, c)` (Triton's CombineDotAdd patterns).

Attention's `acc * alpha[:, None] + tl.dot(p, v)` otherwise multiplies into a fresh zero
accumulator, a second accumulator tile live beside `acc` (64 more registers a thread at 128x128
on 8 warps) and a tile of additions every iteration. The rewrite applies when the dot's own
accumulator is a zero constant, the addition is its only use, in the same block, and the types
agree; the dot moves to where the addition was. The tensor cores then add the products into `c`
as they go: the same sum, rounded in another order (the interpreter keeps the written order).
"""

from __future__ import annotations

from ...ir.core import Block, Function, Op, Value


def _zero(v: Value) -> bool:
    owner = v.owner
    if isinstance(owner, Op) and owner.name == "splat":
        return _zero(owner.operands[0])
    return isinstance(owner, Op) and owner.name == "constant" and owner.attrs.get("value") in (0, 0.0)


def _block(block: Block, uses: dict[Value, int]) -> None:
    for op in list(block.ops):
        for region in op.regions:
            _block(region, uses)
        if op.name != "add":
            continue
        for i in (0, 1):
            dot = op.operands[i].owner
            if not (isinstance(dot, Op) and dot.name == "dot" and uses.get(dot.result) == 1):
                continue
            if dot not in block.ops or not _zero(dot.operands[2]) or dot.result.type != op.result.type:
                continue
            block.ops.remove(dot)
            block.ops[block.ops.index(op)] = dot
            dot.operands[2] = op.operands[1 - i]
            dot.results = op.results
            for r in dot.results:
                r.owner = dot
            break


def accumulate_dot_adds(fn: Function) -> None:
    """Fold each `add(c, dot(a, b, 0))` of `fn` into `dot(a, b, c)` (in place)."""
    uses: dict[Value, int] = {}
    for op in fn.walk():
        for v in op.operands:
            uses[v] = uses.get(v, 0) + 1
    _block(fn.body, uses)
