"""Each memory access gets its own copy of its address computation (Triton's Coalesce pass, done
by rematerialization before layout assignment).

Layout assignment gives one layout to every value that elementwise ops relate. Two loads whose
addresses share index tiles would then share one layout, and only one of them could read memory
in wide vectors along its own contiguous dimension: attention's K (read transposed, contiguous
along its rows) and V (contiguous along its columns) share `cols`, and a dot's result masked with
the tile that also masks K was converted out of its MMA layout. So before assignment each load
and store gets private copies of the cheap, pure tile ops that compute its pointers, mask and
`other` (index arithmetic, integer casts, comparisons, broadcasts, constants), inserted just before it. The
copies stop at scalars, region arguments (loop-carried pointers) and anything costly (a load,
a reduction), which stay shared. The access's layout class then holds its own address alone and
takes that access's coalesced layout; LLVM folds the copies that come out alike.

A loop's carried pointers are computed before it, so each initial value of a `for` gets its own
copies too: the tutorial matmul with BLOCK_K == BLOCK_M (one `tl.arange` for A's rows and both
operands' K) and B read K-major tied A's and B's pointer tiles into one layout, and B's loads lost
their vectors and cp.async (255 registers and 76 bytes of spills at 128x128x128 fp16 on sm_90a).
A block pointer's or tensor descriptor's indices are widened to int64 before they are multiplied by
the strides: without its own copy of that cast, a causal attention whose Q tile came through a
descriptor (its column index the `tl.arange(0, 64)` of the mask's columns too) put the mask, and so
the scores it selects, in the load's blocked layout, converted from and back to the MMA layout
every iteration (0.25-0.30x Triton on an H200).

Leaves (an `arange`, a constant, the splat of a scalar: cheap ops of no tile) are also copied for every
other reader after their first (`private_leaves`): a tile two readers need in different layouts then
reaches neither through a conversion, which moves the data through shared memory between two CTA barriers.
Tutorial 09's persistent matmul through pointers at BLOCK_M = BLOCK_N (one `tl.arange` for its rows and its
columns, merged by the frontend) carries a tile's row and column offsets through its flattened loop, and
converted one of them on every K step (two shared-memory round trips, four CTA barriers) before its
readers had a copy each.
"""

from __future__ import annotations

from ...ir.core import Block, Function, Op, Value
from ...ir.types import ScalarType, TileType, elem_of

_CHEAP = frozenset(
    """constant arange splat expand_dims broadcast addptr add sub mul shl shr and or xor not cmp select
    minimum maximum multiple_of max_contiguous max_constancy cast""".split()
)
# The operands that are addresses: a store's value (operand 1) is data, not address.
_ADDRESS = {"load": (0, 1, 2), "store": (0, 2)}


def _cheap(op: Op) -> bool:
    if op.name not in _CHEAP or op.regions or len(op.results) != 1 or not isinstance(op.result.type, TileType):
        return False
    elem = elem_of(op.result.type)
    if isinstance(elem, ScalarType) and elem.is_fp8() and op.name == "splat":
        return True  # how an fp8 constant tile looks (`other=0.0`): the IR has no fp8 constants
    return op.name == "constant" or not (isinstance(elem, ScalarType) and elem.is_floating())


def _copy(v: Value, memo: dict[Value, Value], out: list[Op]) -> Value:
    owner = v.owner
    if not isinstance(owner, Op) or not _cheap(owner):
        return v
    if v in memo:
        return memo[v]
    operands = [_copy(o, memo, out) for o in owner.operands]
    new = Op(owner.name, operands, [owner.result.type], dict(owner.attrs), [], owner.loc)
    new.result.hint = owner.result.hint
    out.append(new)
    # A leaf (an arange, a constant, a splat of a scalar) is copied for each use: one `tl.arange`
    # may index rows in one place and columns in another, which no single layout serves.
    if any(isinstance(o.type, TileType) for o in owner.operands):
        memo[v] = new.result
    return new.result


def _block(block: Block) -> None:
    ops: list[Op] = []
    for op in block.ops:
        for region in op.regions:
            _block(region)
        memo: dict[Value, Value] = {}
        for i in _ADDRESS.get(op.name, ()):
            if i < len(op.operands):
                op.operands[i] = _copy(op.operands[i], memo, ops)
        if op.name == "for":
            for i in range(3, len(op.operands)):
                op.operands[i] = _copy(op.operands[i], {}, ops)
        ops.append(op)
    block.ops = ops


def _leaf(v: Value) -> bool:
    """A cheap tile made from scalars alone (no tile operand)."""
    owner = v.owner
    return isinstance(owner, Op) and _cheap(owner) and not any(isinstance(o.type, TileType) for o in owner.operands)


def _uses(fn: Function) -> set[Value]:
    return {v for op in fn.walk() for v in op.operands}


def _drop_replaced(fn: Function, used_before: set[Value]) -> None:
    """Remove the cheap ops that the copies left without users (the originals of private copies),
    and then those that only they used; ops the kernel itself left unused stay."""

    def sweep(block: Block, used: set[Value]) -> bool:
        kept: list[Op] = []
        dropped = False
        for op in block.ops:
            for region in op.regions:
                dropped |= sweep(region, used)
            if _cheap(op) and op.result in used_before and op.result not in used:
                dropped = True
                continue
            kept.append(op)
        block.ops = kept
        return dropped

    while sweep(fn.body, _uses(fn)):
        pass


def private_addresses(fn: Function) -> None:
    """Give every load and store of `fn` its own copy of its address computation (in place)."""
    used_before = _uses(fn)
    _block(fn.body)
    _drop_replaced(fn, used_before)


def private_leaves(fn: Function) -> None:
    """Give every reader but the first of a leaf of `fn` its own copy, just before it (in place); an op that
    reads a leaf twice reads one copy."""
    seen: set[Value] = set()

    def block(b: Block) -> None:
        ops: list[Op] = []
        for op in b.ops:
            for region in op.regions:
                block(region)
            copies: dict[Value, Value] = {}
            for i, v in enumerate(op.operands):
                if not _leaf(v):
                    continue
                if v not in copies:
                    copies[v] = _copy(v, {}, ops) if v in seen else v
                    seen.add(v)
                op.operands[i] = copies[v]
            ops.append(op)
        b.ops = ops

    block(fn.body)
