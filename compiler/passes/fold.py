"""Constant folding: ops on constants become constants, with the GPU's exact arithmetic.

    %0 = constant() {type = type(int8), value = 100} : int8
    %1 = add(%0, %0) : int8         ->  %1 = constant() {type = type(int8), value = -56} : int8

A `constant` of tile type is a splat, so elementwise ops on splats fold to splats. Besides
arithmetic (see `numerics` for what is folded and what is left to the GPU) this pass folds
`select`, `if` on a constant condition (the taken region replaces it), `for` loops that run
zero times, shape ops of constants, and integer identities such as `x + 0`, `x * 0`, `x & -1`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ir.core import Module, Op, Value
from ..ir.registry import OpRegistry
from ..ir.types import ScalarType, elem_of
from . import numerics as nm
from .numerics import Num
from .rewrite import Subst, constant_op, constant_value, replace_results, rewrite_module


def fold(module: Module) -> Module:
    """Fold constants in every function of `module`; returns it, changed in place."""
    return rewrite_module(module, _visit)


def _visit(op: Op, subst: Subst) -> list[Op] | None:
    rule = RULES.get(op.name)
    return rule(op, subst) if rule is not None else None


def _elem(v: Value) -> ScalarType | None:
    e = elem_of(v.type)
    return e if isinstance(e, ScalarType) else None


def _num(v: Value) -> Num | None:
    """The value of `v` in its own type when a `constant` defines it."""
    value, ty = constant_value(v), _elem(v)
    return None if value is None or ty is None else nm.normalize(value, ty)


def _to_constant(op: Op, subst: Subst, value: Num) -> list[Op]:
    new = constant_op(value, op.result.type, op.loc)
    new.result.hint = op.result.hint
    replace_results(subst, op, [new.result])
    return [new]


def _forward(op: Op, subst: Subst, values: list[Value]) -> list[Op]:
    replace_results(subst, op, values)
    return []


# ---- elementwise ------------------------------------------------------------------------------


def _evaluate(op: Op, args: list[Num], ty: ScalarType) -> Num | None:
    name = op.name
    if name == "cmp":
        return nm.compare(op.attrs["pred"], args[0], args[1], ty)
    if name in ("cast", "bitcast"):
        to = op.attrs["to"]
        if not isinstance(to, ScalarType):
            return None
        if name == "bitcast":
            return nm.bitcast(args[0], ty, to)
        return nm.cast(args[0], ty, to, op.attrs.get("rounding"))
    if ty.is_int():
        if len(args) == 2 and name in nm.INT_BINARY:
            return nm.int_binary(name, int(args[0]), int(args[1]), ty)
        if len(args) == 1 and name in nm.INT_UNARY:
            return nm.int_unary(name, int(args[0]), ty)
        return None
    if name == "fdiv" and op.attrs.get("ieee_rounding"):
        name = "div_rn"
    a = [float(x) for x in args]
    if len(a) == 2 and name in nm.FLOAT_BINARY:
        return nm.float_binary(name, a[0], a[1], ty)
    if len(a) == 1 and name in nm.FLOAT_UNARY:
        return nm.float_unary(name, a[0], ty)
    return None


def _elementwise(op: Op, subst: Subst) -> list[Op] | None:
    ty = _elem(op.operands[0])
    if ty is None:
        return None
    args = [_num(v) for v in op.operands]
    known = [a for a in args if a is not None]
    if len(known) < len(args):
        return _identity(op, subst, args, ty)
    value = _evaluate(op, known, ty)
    return None if value is None else _to_constant(op, subst, value)


def _identity(op: Op, subst: Subst, args: list[Num | None], ty: ScalarType) -> list[Op] | None:
    """Integer identities with one unknown operand; floats have none (NaN, -0.0)."""
    if len(args) != 2 or not ty.is_int() or (ty.is_bool() and op.name not in nm.BOOL_OPS):
        return None
    (x, y), (a, b) = op.operands, args
    zero, one, ones = nm.wrap(0, ty), nm.wrap(1, ty), nm.wrap(-1, ty)
    keep_x: dict[str, bool] = {
        "add": b == zero,
        "sub": b == zero,
        "mul": b == one,
        "floordiv": b == one,
        "and": b == ones or x is y,
        "or": b == zero or x is y,
        "xor": b == zero,
        "shl": b == zero,
        "shr": b == zero,
        "maximum": x is y,
        "minimum": x is y,
    }
    keep_y = {"add": a == zero, "mul": a == one, "and": a == ones, "or": a == zero, "xor": a == zero}
    to_zero = {
        "mul": zero in (a, b),
        "and": zero in (a, b),
        "sub": x is y,
        "xor": x is y,
        "rem": b == one,
    }
    if keep_x.get(op.name):
        return _forward(op, subst, [x])
    if keep_y.get(op.name):
        return _forward(op, subst, [y])
    if to_zero.get(op.name):
        return _to_constant(op, subst, zero)
    if op.name == "or" and ones in (a, b):
        return _to_constant(op, subst, ones)
    return None


def _select(op: Op, subst: Subst) -> list[Op] | None:
    cond = _num(op.operands[0])
    if cond is None:
        return None
    return _forward(op, subst, [op.operands[1] if cond else op.operands[2]])


# ---- shape ops: a splat stays a splat ---------------------------------------------------------


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b and (not isinstance(a, float) or str(a) == str(b))


def _reshaped(op: Op, subst: Subst) -> list[Op] | None:
    values = [constant_value(v) for v in op.operands]
    if values[0] is None or not all(_same(values[0], v) for v in values[1:]):
        return None
    news = [constant_op(values[0], r.type, op.loc) for r in op.results]
    replace_results(subst, op, [n.result for n in news])
    return news


# ---- control flow -----------------------------------------------------------------------------


def _if(op: Op, subst: Subst) -> list[Op] | None:
    cond = _num(op.operands[0])
    if cond is None:
        return None
    region = op.regions[0 if cond else 1]
    replace_results(subst, op, list(region.ops[-1].operands))
    return region.ops[:-1]


def _for(op: Op, subst: Subst) -> list[Op] | None:
    bounds = [_num(v) for v in op.operands[:3]]
    ty = _elem(op.operands[0])
    if ty is None or any(b is None for b in bounds):
        return None
    lb, ub, step = (int(b) for b in bounds if b is not None)
    # Zero trips however the bounds are compared: signed and unsigned readings agree.
    s, u = ty.with_signedness(True), ty.with_signedness(False)
    if nm.wrap(step, s) > 0 and nm.wrap(lb, s) >= nm.wrap(ub, s) and nm.wrap(lb, u) >= nm.wrap(ub, u):
        return _forward(op, subst, list(op.operands[3:]))
    return None


_ELEMENTWISE = (
    nm.FLOAT_UNARY + nm.FLOAT_BINARY + tuple(nm.INT_BINARY) + tuple(nm.INT_UNARY) + ("cmp", "cast", "bitcast", "fdiv")
)
# Folding is optional: an op without a rule is kept as it is.
RULES: OpRegistry[Callable[[Op, Subst], list[Op] | None]] = OpRegistry("fold", complete=False)
RULES.register(*dict.fromkeys(_ELEMENTWISE))(_elementwise)
RULES.register("splat", "broadcast", "expand_dims", "reshape", "trans", "cat", "join", "split")(_reshaped)
RULES.register("select")(_select)
RULES.register("if")(_if)
RULES.register("for")(_for)
