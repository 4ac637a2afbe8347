"""`select` (`tl.where`), register by register; where its condition compares index tiles, a branch
first decides it for all of a thread's elements at once.

A causal mask `offs_m[:, None] >= start_n + offs_n[None, :]` is true on every element of most of
an attention loop's tiles, and false on every element of some: per element it costs a compare
and a select, a fifth of the softmax's instructions. Axis analysis knows each side of the
compare as `first + Σ slope_d * index_d`, with slope 1 along a dimension that is one run of
consecutive integers and 0 along one that is constant. The difference of the two sides then
moves monotonically with the tile index, and where the layout adds a register's part of the
index to the thread's (their bits disjoint), this thread's least difference sits in a register
known at compile time, whose compare decides whether all of the thread's are true: then the
select is `x`, and only other tiles (the diagonal's) compare and select element by element. FlashAttention and Triton's tutorial split the loop for the same saving;
here it needs no change to the kernel.

Compares may be ANDed (`cols < N_CTX` with the causal compare) and broadcast. Only signed ones are
taken: an unsigned tile of consecutive indices wraps where a negative offset reaches zero, so its
values are not in its indices' order. A signed one is assumed not to pass its type's largest value
inside a tile, as the index arithmetic's `nsw` does.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ....ir.core import Op, Value
from ....ir.types import ScalarType, elem_of, shape_of
from ...gpuir.axis import AxisInfo
from ...gpuir.linear import LinearLayout
from .context import Lowering, dyn_bits
from .registry import Regs, lowering
from .types import i32

MIN_SELECTS = 8
"""Below this many distinct selects a thread, the two branches cost about what they save.

Only selects in loops branch: what a branch saves, it saves every iteration. Once in a kernel, it split the
straight code ptxas schedules as one: the 16-warp layer norm of 16384 columns took 79 registers, not 64, and
lost its second CTA per SM."""

LIKELY = 64
"""The weight of all true against 1: the tiles of a causal loop of 64 iterations but its diagonal."""

_RISING = {"ge": True, "gt": True, "le": False, "lt": False}
"""Compares whose truth rises (True) or falls (False) as the left side grows past the right."""


@lowering("select")
def select(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    cond, x, y = args
    deciding = _deciding(ctx, op.operands[0])
    distinct = {(id(c), id(a), id(z)) for c, a, z in zip(cond, x, y)}
    if deciding is None or len(distinct) < MIN_SELECTS or not ctx.in_loop(op):
        return [[ctx.b.select(c, a, z) for c, a, z in zip(cond, x, y)]]
    return [_branched(ctx, deciding, cond, x, y)]


def _branched(ctx: Lowering, deciding: list[tuple[Value, int]], cond: Regs, x: Regs, y: Regs) -> Regs:
    """All true: `x`; else select element by element. The compares before the branch then feed
    only the deciding registers, and LLVM sinks the others into the selecting block.

    A third way, all false to `y` without a compare, cost ptxas 7 registers in the specialized d128
    attention (168, with 8 bytes of spills) and 14 in the plain d64 one (the constant materialized into every
    register of the tile); it is not taken."""
    b = ctx.b
    all_true = None
    for v, r in deciding:
        c = ctx.get(v)[r]
        all_true = c if all_true is None else b.and_(all_true, c)
    assert all_true is not None
    entry = b.block
    mixed, join = (ctx.func.append_basic_block(f"select.{n}") for n in ("mixed", "join"))
    branch = b.cbranch(all_true, join, mixed)
    # Likely all true (a causal loop's tiles but the diagonal's): LLVM lays the selects out of line.
    branch.set_metadata("prof", ctx.module.add_metadata(["branch_weights", i32(LIKELY), i32(1)]))
    b.position_at_end(mixed)
    made: dict[tuple[int, int, int], tuple[ir.Value, ir.Value]] = {}
    for c, a, z in zip(cond, x, y):
        if (id(c), id(a), id(z)) not in made:
            made[(id(c), id(a), id(z))] = a, b.select(c, a, z)
    b.branch(join)
    b.position_at_end(join)
    phis: dict[tuple[int, int, int], ir.Value] = {}
    for key, (a, picked) in made.items():
        phi = b.phi(a.type)
        phi.add_incoming(a, entry)
        phi.add_incoming(picked, mixed)
        phis[key] = phi
    return [phis[(id(c), id(a), id(z))] for c, a, z in zip(cond, x, y)]


def _deciding(ctx: Lowering, cond: Value) -> list[tuple[Value, int]] | None:
    """Compares, and a register of each, that are all true only where all of this thread's elements
    of `cond` are: one per compare of index tiles that `cond` ANDs, through broadcasts (a thread holds
    the source of each element it broadcasts); None where a term is anything else."""
    op = cond.owner
    if isinstance(op, Op) and op.name == "and":
        terms = [_deciding(ctx, v) for v in op.operands]
        return None if None in terms else [t for term in terms if term is not None for t in term]
    if isinstance(op, Op) and op.name == "broadcast":
        return _deciding(ctx, op.operands[0])
    r = _deciding_register(ctx, cond)
    return None if r is None else [(cond, r)]


def _deciding_register(ctx: Lowering, cond: Value) -> int | None:
    """The register whose element of `cond` is true only where all of this thread's are; None
    where `cond` is not a compare of index tiles in this layout."""
    cmp = cond.owner
    if not isinstance(cmp, Op) or cmp.name != "cmp" or cmp.attrs["pred"] not in _RISING:
        return None
    e = elem_of(cmp.operands[0].type)
    if not isinstance(e, ScalarType) or not e.is_int_signed() or e.is_bool():
        return None  # unsigned, `cols - 3` wraps inside a tile: consecutive indices, unordered values
    shape = shape_of(cond.type)
    ll = ctx.layout(cond)
    if not shape or any(ctx.layout(v) != ll for v in cmp.operands):
        return None
    lhs, rhs = (_slopes(ctx.gpu.axis.info(v), shape) for v in cmp.operands)
    if lhs is None or rhs is None:
        return None
    sign = 1 if _RISING[cmp.attrs["pred"]] else -1
    return least_register(ll, tuple(sign * (p - q) for p, q in zip(lhs, rhs)))


def least_register(ll: LinearLayout, slope: tuple[int, ...]) -> int | None:
    """The register where, in every thread, `Σ slope[d] * index[d]` over the thread's elements is
    least; None where the layout XORs a register's part of the index into the thread's along a
    dimension with a slope (the order of the sums then differs between threads)."""
    for d, k in enumerate(slope):
        reg_bits = 0
        for basis in ll.reg:
            reg_bits |= basis[d]
        if k and reg_bits & dyn_bits(ll, d):
            return None
    # The parts are added: the thread's own sum plus the register's, least where the register's is.
    sums = [sum(k * i for k, i in zip(slope, ll.reg_index(r))) for r in range(ll.num_regs)]
    return sums.index(min(sums))


def _slopes(info: AxisInfo, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """Per dimension, what a step along it adds to the value: 0 (constant) or 1 (one run of
    consecutive integers); None where neither holds over the whole tile."""
    out = []
    for contig, const, n in zip(info.contig, info.const, shape):
        if const >= n:
            out.append(0)
        elif contig >= n:
            out.append(1)
        else:
            return None
    return tuple(out)
