"""Choosing how each `dot` runs: on tensor cores (`mma.sync`) when one instruction fits, else on
CUDA cores (FMA), and with which warps per tile (Triton's AccelerateMatmul for MMA v2).

The choice is recorded on the dot as its `engine` attribute, so that the GPU IR dump says
which dots run on tensor cores and why the others do not.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir.core import Function, Op, Value
from ...ir.types import ScalarType, elem_of, shape_of
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


def _feeds_a_dot(fn: Function, dot: Op) -> bool:
    """Whether `dot`'s result reaches an operand of another dot (attention's chained dots)."""
    users: dict[int, list[Op]] = {}
    for op in fn.walk():
        for v in op.operands:
            users.setdefault(id(v), []).append(op)
    seen: set[int] = set()
    work: list[Value] = [dot.result]
    while work:
        v = work.pop()
        for user in users.get(id(v), []):
            if user.name == "dot" and user is not dot and any(o is v for o in user.operands[:2]):
                return True
            for r in user.results:
                if id(r) not in seen:
                    seen.add(id(r))
                    work.append(r)
    return False


def plan_dot(fn: Function, op: Op, num_warps: int) -> DotPlan | None:
    """The MMA plan of `op` (recorded as its `engine` attribute), or None for the FMA path."""
    kind = instruction(op)
    if isinstance(kind, str):
        op.attrs["engine"] = f"fma: {kind}"
        return None
    m, n = shape_of(op.result.type)
    warps = (num_warps, 1) if _feeds_a_dot(fn, op) else warps_per_tile_v2(m, n, num_warps)
    op.attrs["engine"] = f"mma.sync.{kind[0]}"
    return DotPlan(Mma(2, warps), kind[1])
