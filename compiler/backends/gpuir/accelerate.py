"""Choosing how each `dot` runs: on Hopper's warpgroup MMA (`wgmma`, sm_90a) where it fits, else on
tensor cores (`mma.sync`) when one instruction fits, else on CUDA cores (FMA), and with which warps
per tile (Triton's AccelerateMatmul for MMA v3 and v2).

The choice is recorded on the dot as its `engine` attribute, so that the GPU IR dump says
which dots run on tensor cores and why the others do not.

fp8 operands multiply on wgmma (`k32`, both operands K-major in shared memory) where it takes the
dot; elsewhere `upcast_fp8_dots` converts them to fp16 in front of the dot (exact: every fp8 value
is an fp16 one), which then takes the fp16 path, as Triton does on GPUs without fp8 MMA.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir.core import Function, Op, Value
from ...ir.types import ScalarType, elem_of, float16, shape_of, with_elem
from ...passes.rewrite import Subst, rewrite_block
from . import wgmma
from .mma import Mma, MmaOperand, warps_per_tile_v2


@dataclass(frozen=True)
class DotPlan:
    """An MMA plan for one dot: the accumulator's encoding and the operands' k width."""

    acc: Mma
    k_width: int

    def operand(self, i: int) -> MmaOperand:
        return MmaOperand(i, self.acc, self.k_width)


def instruction(op: Op) -> tuple[str, int] | str:
    """The mma.sync shape and k width for this dot, or why none fits."""
    a, c = elem_of(op.operands[0].type), elem_of(op.operands[2].type)
    shape = shape_of(op.operands[0].type)
    assert isinstance(a, ScalarType) and isinstance(c, ScalarType)
    if len(shape) != 2:
        return "batched (3-D) dot: mma.sync lowering covers 2-D tiles"
    if (a.is_fp16() and (c.is_fp32() or c.is_fp16())) or (a.is_bf16() and c.is_fp32()):
        kind = ("m16n8k16", 2)
    elif a.is_fp32() and c.is_fp32() and op.attrs.get("input_precision") in ("tf32", "tf32x3"):
        kind = ("m16n8k8", 1)
    elif a.is_int() and a.primitive_bitwidth == 8 and c.is_int() and c.primitive_bitwidth == 32:
        kind = ("m16n8k32", 4)
    elif a.is_fp32():
        return "input_precision ieee: fp32 products in fp32 (no tensor-core instruction is exact)"
    else:
        return f"no mma.sync instruction for {a} operands into {c}"
    m, k = shape
    n = shape_of(op.operands[1].type)[1]
    if m < 16 or n < 16 or k < 8 * kind[1]:
        return f"tile {m}x{n}x{k} is below one {kind[0]} instruction (M, N >= 16, K >= {8 * kind[1]})"
    return kind


DotFeeds = dict[Op, list[tuple[Op, int]]]
"""Each dot of a kernel, with the other dots (and their operand: 0 = A, 1 = B) its result reaches."""


def dot_feeds(fn: Function) -> DotFeeds:
    """`fn`'s DotFeeds, taken before layout assignment inserts conversions between a dot and its users
    (which it places in the body only at the end: a walk in between would lose the path)."""
    users: dict[Value, list[Op]] = {}
    loops: dict[Op, Op] = {}
    for op in fn.walk():
        for v in op.operands:
            users.setdefault(v, []).append(op)
        if op.name == "for" and op.regions[0].terminator is not None:
            loops[op.regions[0].terminator] = op
    return {op: _fed_operands(users, loops, op) for op in fn.walk() if op.name == "dot"}


def _chained(feeds: DotFeeds, dot: Op) -> bool:
    """Whether `dot` is one of chained dots: its result reaches another dot's A or B, or another
    dot's result reaches its own (attention's second dot, fed P). On mma.sync both take
    [num_warps, 1], as in Triton's warpsPerTileV2, so that P passes from one to the other in registers."""
    return bool(feeds.get(dot)) or any(d is dot for other, fed in feeds.items() if other is not dot for d, _ in fed)


def _a_from_dot(feeds: DotFeeds, dot: Op) -> bool:
    """Whether another dot's result reaches `dot`'s A operand (attention's P)."""
    return any(d is dot and i == 0 for other, fed in feeds.items() if other is not dot for d, i in fed)


def _fed_operands(users: dict[Value, list[Op]], loops: dict[Op, Op], dot: Op) -> list[tuple[Op, int]]:
    """The other dots, with the operand (0 = A, 1 = B), that `dot`'s result reaches (`users`: each value's
    readers), also through a loop that carries it to its next iteration and its end (`loops`: each `for` by
    its body's yield: P, which a deferred product reads there, `defer.py`)."""
    fed: list[tuple[Op, int]] = []
    seen: set[Value] = set()
    work: list[Value] = [dot.result]
    while work:
        v = work.pop()
        for user in users.get(v, []):
            if user.name == "dot" and user is not dot and any(o is v for o in user.operands[:2]):
                fed.append((user, 0 if user.operands[0] is v else 1))
                continue
            loop = loops.get(user)
            nexts = [] if loop is None else [w for j, o in enumerate(user.operands) if o is v
                                             for w in (loop.regions[0].args[j + 1], loop.results[j])]
            for r in [*user.results, *nexts]:
                if r not in seen:
                    seen.add(r)
                    work.append(r)
    return fed


def wgmma_fit(fn: Function, op: Op, num_warps: int) -> tuple[int, tuple[int, int]] | str:
    """wgmma's N and warps per tile for `op`, or why wgmma does not take it."""
    a, c = elem_of(op.operands[0].type), elem_of(op.operands[2].type)
    assert isinstance(a, ScalarType) and isinstance(c, ScalarType)
    if not ((a.is_fp16() or a.is_bf16() or a.is_fp8()) and c.is_fp32()):
        return f"wgmma takes fp16, bf16 and fp8 into fp32 here, not {a} into {c}"
    if len(shape_of(op.result.type)) != 2:
        return "batched (3-D) dot: wgmma lowering covers 2-D tiles"
    m, n = shape_of(op.result.type)
    return wgmma.fit(m, n, shape_of(op.operands[0].type)[1], num_warps, wgmma.instr_k(a.itemsize))


def _wgmma(fn: Function, op: Op, num_warps: int, feeds: DotFeeds) -> tuple[str, DotPlan] | str:
    """The engine and wgmma plan of `op`, or why wgmma does not take it."""
    found = wgmma_fit(fn, op, num_warps)
    if isinstance(found, str):
        return found
    width, warps = found
    a = elem_of(op.operands[0].type)
    k = wgmma.instr_k(a.itemsize)
    engine = f"wgmma.m64n{width}k{k}"
    op.attrs.pop("operand_a", None)
    if _a_from_dot(feeds, op) and a.itemsize == 2:
        # Another dot's result, in registers already (attention's P): the instruction reads it there
        # instead of from shared memory, where it would be stored, fenced and waited for every time.
        op.attrs["operand_a"] = "registers"
        engine += ", A in registers"
    return engine, DotPlan(Mma(3, warps, (16, width)), k // 8)


def plan_dot(fn: Function, op: Op, num_warps: int, feeds: DotFeeds, has_wgmma: bool = False) -> DotPlan | None:
    """The MMA plan of `op` (recorded as its `engine` attribute), or None for the FMA path. With
    `has_wgmma` (the target is sm_90a) a dot that wgmma takes goes there; one it does not take
    says why in its engine, as does one whose fp8 operands `upcast_fp8_dots` converted."""
    upcast = op.attrs.pop("engine", None)
    engine, plan = _plan(fn, op, num_warps, feeds, has_wgmma)
    op.attrs["engine"] = engine + (f" ({upcast})" if upcast else "")
    return plan


def _plan(fn: Function, op: Op, num_warps: int, feeds: DotFeeds, has_wgmma: bool) -> tuple[str, DotPlan | None]:
    kind = instruction(op)
    if isinstance(kind, str) and not _is_fp8(op):
        return f"fma: {kind}", None
    not_wgmma = ""
    if has_wgmma:
        found = _wgmma(fn, op, num_warps, feeds)
        if not isinstance(found, str):
            return found
        not_wgmma = f" (not wgmma: {found})"
    assert not isinstance(kind, str), "fp8 dots that wgmma does not take have fp16 operands (upcast_fp8_dots)"
    m, n = shape_of(op.result.type)
    warps = (num_warps, 1) if _chained(feeds, op) else warps_per_tile_v2(m, n, num_warps)
    return f"mma.sync.{kind[0]}{not_wgmma}", DotPlan(Mma(2, warps), kind[1])


def _is_fp8(dot: Op) -> bool:
    a = elem_of(dot.operands[0].type)
    return isinstance(a, ScalarType) and a.is_fp8()


def upcast_fp8_dots(fn: Function, num_warps: int, has_wgmma: bool) -> None:
    """Convert the fp8 operands of each dot that wgmma does not take to fp16, in front of the dot (in
    place), and note why in its `engine`: the dot then takes the fp16 path."""

    def visit(op: Op, subst: Subst) -> list[Op] | None:
        if op.name != "dot" or not _is_fp8(op):
            return None
        found = wgmma_fit(fn, op, num_warps) if has_wgmma else "no fp8 MMA on this target (fp8 wgmma needs sm_90a)"
        if not isinstance(found, str):
            return None
        casts = [Op("cast", [v], [with_elem(v.type, float16)], {"to": float16}, loc=op.loc) for v in op.operands[:2]]
        op.operands[:2] = [c.result for c in casts]
        op.attrs["engine"] = f"fp8 operands upcast to fp16: {found}"
        return [*casts, op]

    rewrite_block(fn.body, visit, {})
