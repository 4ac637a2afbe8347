"""Operators and methods of `tensor`, attached here so each builtin has one definition."""

from __future__ import annotations

from typing import Any

from . import arith, indexing, reduction, shape
from .core import tensor, unwrap
from .semantic import cast


def _binary(fn: Any, reflected: bool = False) -> Any:
    if reflected:
        return lambda self, other: fn(other, self)
    return lambda self, other: fn(self, other)


def _compare(pred: str, reflected: str) -> tuple[Any, Any]:
    return (lambda self, other: arith.compare(pred, self, other)), (lambda self, other: arith.compare(reflected, other, self))


_OPERATORS = {
    "add": arith.add, "sub": arith.sub, "mul": arith.mul, "truediv": arith.truediv,
    "floordiv": arith.floordiv, "mod": arith.mod, "pow": arith.pow, "lshift": arith.lshift,
    "rshift": arith.rshift, "and": arith.and_, "or": arith.or_, "xor": arith.xor_,
}

for _name, _fn in _OPERATORS.items():
    setattr(tensor, f"__{_name}__", _binary(_fn))
    setattr(tensor, f"__r{_name}__", _binary(_fn, reflected=True))

for _pred, _py, _refl in (("lt", "lt", "gt"), ("le", "le", "ge"), ("gt", "gt", "lt"), ("ge", "ge", "le"),
                          ("eq", "eq", "eq"), ("ne", "ne", "ne")):
    setattr(tensor, f"__{_py}__", _compare(_pred, _refl)[0])
tensor.__hash__ = object.__hash__  # type: ignore[method-assign]
tensor.__neg__ = lambda self: arith.neg(self)  # type: ignore[method-assign]
tensor.__pos__ = lambda self: self  # type: ignore[method-assign]
tensor.__invert__ = lambda self: arith.invert(self)  # type: ignore[method-assign]
tensor.__abs__ = lambda self: arith.abs(self)  # type: ignore[method-assign]
tensor.__getitem__ = lambda self, index: shape.getitem(self, index)  # type: ignore[method-assign]


def _to(self: tensor, dtype: Any, fp_downcast_rounding: Any = None, bitcast: bool = False) -> tensor:
    return cast(self, unwrap(dtype), bitcast=bool(unwrap(bitcast)), fp_downcast_rounding=unwrap(fp_downcast_rounding))


_METHODS = {
    "to": _to,
    "reshape": shape.reshape, "view": shape.view, "trans": shape.trans, "permute": shape.permute,
    "expand_dims": shape.expand_dims, "broadcast_to": shape.broadcast_to, "ravel": shape.ravel,
    "split": shape.split,
    "sum": reduction.sum, "max": reduction.max, "min": reduction.min, "argmax": reduction.argmax,
    "argmin": reduction.argmin, "cumsum": reduction.cumsum, "cumprod": reduction.cumprod,
    "reduce": reduction.reduce, "associative_scan": reduction.associative_scan, "xor_sum": reduction.xor_sum,
    "exp": arith.exp, "exp2": arith.exp2, "log": arith.log, "log2": arith.log2, "sqrt": arith.sqrt,
    "rsqrt": arith.rsqrt, "sin": arith.sin, "cos": arith.cos, "abs": arith.abs, "erf": arith.erf,
    "floor": arith.floor, "ceil": arith.ceil, "sigmoid": arith.sigmoid, "sqrt_rn": arith.sqrt_rn,
    "cdiv": arith.cdiv, "flip": indexing.flip, "gather": indexing.gather, "histogram": indexing.histogram,
    "sort": indexing.sort, "softmax": reduction.softmax, "reduce_or": reduction.reduce_or,
}
for _name, _fn in _METHODS.items():
    setattr(tensor, _name, _fn)
tensor.T = property(lambda self: shape.trans(self))  # type: ignore[attr-defined]
