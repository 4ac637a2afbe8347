"""Positive scales taken out of max and min: a tile scaled by a positive number s has its maximum at
the maximum of the unscaled tile, so the reduction reads the tile as it is and one number per row is
scaled instead of every element.

    reduce max(x * splat(s))                   ->  reduce max(x) * s
    select(c, x * splat(s), splat(-inf))       ->  select(c, x, splat(-inf)) * splat(s)

Both are exact for every s > 0 (+inf included) and every x:
- rounding is monotone, so max_i round(x_i s) = round(max_i x_i s), and the same for min;
- (-inf) s = -inf and (+inf) s = +inf, so a select with an infinity commutes with the scale.

The second rule lets the first see through a mask: attention's softmax masks Q K^T scaled, then takes
its row maximum. Where the product then only feeds a subtraction, LLVM fuses the two into one FMA, so
the tile costs one instruction an element where it cost two (`max(x s)` and `x s - m` each read x s).

The reductions are those whose combine region is one `maximum` or `minimum` with NaNs not propagated
(`tl.max`, `tl.min`): a NaN operand may be dropped, which covers the one case where the scaled and the
unscaled order differ (s = +inf, where 0 s is NaN). A select's product is moved only when the select is
its one use, so no product is computed twice.

s > 0 is known of a float argument a launch specialized as positive (the module's `positive`, as
`divisibility` holds the arguments divisible by 16), of a positive float constant, and of a product of
one such value and a constant >= 1 (which can round up to +inf but never down to 0):
`qk_scale = sm_scale * 1.44269504` is positive when `sm_scale` is.
"""

from __future__ import annotations

import math
from collections import Counter

from ..ir.core import Block, Module, Op, Value
from ..ir.types import TileType, Type, elem_of
from .rewrite import Emitter, Subst, constant_value, replace_results, rewrite_block


def take_out_scales(module: Module) -> Module:
    """Apply the rewrites above throughout `module` (the specialization's `positive` names arguments of its
    kernel); returns it, changed in place (`dce` removes the products left unused)."""
    args = set(module.attrs.get("positive", []) or [])
    for fn in module.functions:
        positive = {a for i, a in enumerate(fn.args) if i in args} if fn.kernel else set()
        scales = _Scales(positive, Counter(v for op in fn.walk() for v in op.operands))
        rewrite_block(fn.body, scales.visit, {})
    return module


class _Scales:
    def __init__(self, positive: set[Value], uses: Counter[Value]) -> None:
        self.positive, self.uses = positive, uses

    def visit(self, op: Op, subst: Subst) -> list[Op] | None:
        if op.name == "select":
            return self.select(op, subst)
        return self.reduce(op, subst) if op.name == "reduce" else None

    def select(self, op: Op, subst: Subst) -> list[Op] | None:
        """select(c, x * S, inf) -> select(c, x, inf) * S, either way round."""
        cond, a, b = op.operands
        for scaled, other, first in ((a, b, True), (b, a, False)):
            product = _producer(scaled, "mul")
            inf = constant_value(other)
            if product is None or self.uses[scaled] != 1 or not (isinstance(inf, float) and math.isinf(inf)):
                continue
            split = self.split(product)
            if split is None:
                continue
            x, scale, _ = split
            emit = Emitter([], op.loc)
            picked = emit.op("select", cond, x, other) if first else emit.op("select", cond, other, x)
            replace_results(subst, op, [emit.op("mul", picked, scale)])
            return emit.ops
        return None

    def reduce(self, op: Op, subst: Subst) -> list[Op] | None:
        """reduce max(x * S) -> reduce max(x) * s, with s splat to the result's shape."""
        if len(op.operands) != 1 or not _max_or_min(op.regions[0]):
            return None
        product = _producer(op.operands[0], "mul")
        split = self.split(product) if product is not None else None
        if split is None:
            return None
        x, _, number = split
        emit = Emitter([], op.loc)
        inner = Op("reduce", [x], [op.result.type], dict(op.attrs), op.regions, op.loc)
        emit.ops.append(inner)
        replace_results(subst, op, [emit.op("mul", inner.result, _shaped(emit, number, op.result.type))])
        return emit.ops

    def split(self, product: Op) -> tuple[Value, Value, Value | float] | None:
        """(x, S, s) of a float product x * S (or S * x) whose S holds one positive number s in every element (a
        value, or a constant's number)."""
        for x, scale in (product.operands, reversed(product.operands)):
            number = self.uniform(scale) if elem_of(x.type).is_floating() else None
            if number is not None:
                return x, scale, number
        return None

    def uniform(self, v: Value) -> Value | float | None:
        """The positive scalar (a value, or a constant's number) that every element of `v` holds."""
        value = constant_value(v)
        if isinstance(value, float):
            return value if value > 0 else None
        splat = _producer(v, "splat")
        return splat.operands[0] if splat is not None and self.is_positive(splat.operands[0]) else None

    def is_positive(self, v: Value) -> bool:
        if v in self.positive:
            return True
        value = constant_value(v)
        if value is not None:
            return isinstance(value, float) and value > 0
        product = _producer(v, "mul")
        if product is None:
            return False
        a, b = product.operands
        return any(self.is_positive(p) and isinstance(c := constant_value(q), float) and c >= 1
                   for p, q in ((a, b), (b, a)))


def _shaped(emit: Emitter, number: Value | float, ty: Type) -> Value:
    """The scale `number` (a value, or a constant's number) as a value of type `ty` (the reduction's result: a
    scalar or a tile)."""
    if isinstance(number, float):
        return emit.const(number, ty)
    return emit.op("splat", number, shape=list(ty.shape)) if isinstance(ty, TileType) else number


def _producer(v: Value, name: str) -> Op | None:
    owner = v.owner
    return owner if isinstance(owner, Op) and owner.name == name else None


def _max_or_min(region: Block) -> bool:
    """Whether `region` combines its two arguments with `maximum` or `minimum` alone, NaNs not propagated."""
    if len(region.ops) != 2:
        return False
    combine, done = region.ops
    return (combine.name in ("maximum", "minimum") and combine.attrs.get("propagate_nan", "none") == "none"
            and set(combine.operands) == set(region.args) and list(done.operands) == combine.results)
