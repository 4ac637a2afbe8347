"""Arithmetic, comparison, bitwise and math builtins."""

from __future__ import annotations

from typing import Any

from despina.compiler.ir import types as _t
from despina.compiler.ir.ops import NAN_MODES

from .core import builder, builtin, tensor, unwrap
from .semantic import (
    binary_operands,
    broadcast_shapes,
    broadcast_to,
    cast,
    constant,
    elementwise,
    scalar_elem,
    to_tensor,
)


def _addptr(ptr: tensor, offset: Any, negate: bool = False) -> tensor:
    off = to_tensor(offset)
    if not scalar_elem(off, "pointer arithmetic").is_int():
        raise TypeError(f"pointer offsets must be integers, got {off.dtype}; convert the offset with .to(tl.int32)")
    if negate:
        off = neg(off)
    shape = broadcast_shapes(ptr.shape, off.shape)
    ptr, off = broadcast_to(ptr, shape), broadcast_to(off, shape)
    return tensor(builder().value("addptr", [ptr.handle, off.handle]))


def _is_ptr(x: Any) -> bool:
    return isinstance(x, tensor) and x.dtype.is_ptr()


@builtin
def add(x: Any, y: Any) -> tensor:
    """x + y, elementwise with broadcasting; a pointer plus an integer offset is a pointer (offsets count elements,
    not bytes)."""
    if _is_ptr(x):
        return _addptr(x, y)
    if _is_ptr(y):
        return _addptr(y, x)
    a, b = binary_operands(x, y)
    return elementwise("add", a, b)


@builtin
def sub(x: Any, y: Any) -> tensor:
    """x - y, elementwise with broadcasting; a pointer minus an integer offset is a pointer."""
    if _is_ptr(x) and not _is_ptr(y):
        return _addptr(x, y, negate=True)
    a, b = binary_operands(x, y)
    return elementwise("sub", a, b)


@builtin
def mul(x: Any, y: Any) -> tensor:
    """x * y, elementwise with broadcasting; integers wrap around as on the GPU."""
    a, b = binary_operands(x, y)
    return elementwise("mul", a, b)


@builtin
def truediv(x: Any, y: Any) -> tensor:
    a, b = binary_operands(x, y, div=True)
    return elementwise("div", a, b)


@builtin
def floordiv(x: Any, y: Any) -> tensor:
    """Integer division truncating toward zero (C semantics); `floor(x / y)` for floats."""
    a, b = binary_operands(x, y)
    if a.dtype.is_floating():
        return elementwise("floor", elementwise("div", a, b))
    return elementwise("floordiv", a, b)


@builtin
def mod(x: Any, y: Any) -> tensor:
    """Remainder with the sign of the dividend (C `%` and `fmod`)."""
    a, b = binary_operands(x, y)
    return elementwise("rem", a, b)


@builtin
def pow(x: Any, y: Any) -> tensor:
    y = unwrap(y)
    if isinstance(y, int) and not isinstance(y, bool) and 0 <= y <= 16 and isinstance(x, tensor):
        result = constant(1, x.type)
        base = x
        n = y
        while n:
            if n & 1:
                result = mul(result, base)
            n >>= 1
            if n:
                base = mul(base, base)
        return result
    a, b = binary_operands(x, y, div=True)
    return elementwise("pow", a, b)


_SYMBOLS = {"and": "&", "or": "|", "xor": "^", "shl": "<<", "shr": ">>"}


def _int_binary(name: str, x: Any, y: Any) -> tensor:
    a, b = binary_operands(x, y)
    if not scalar_elem(a, name).is_int():
        raise TypeError(f"'{_SYMBOLS.get(name, name)}' needs integer operands, got {a.dtype}; convert them with "
                        ".to(tl.int32) (with bitcast=True to work on a float's bits)")
    return elementwise(name, a, b)


@builtin
def and_(x: Any, y: Any) -> tensor:
    return _int_binary("and", x, y)


@builtin
def or_(x: Any, y: Any) -> tensor:
    return _int_binary("or", x, y)


@builtin
def xor_(x: Any, y: Any) -> tensor:
    return _int_binary("xor", x, y)


@builtin
def lshift(x: Any, y: Any) -> tensor:
    return _int_binary("shl", x, y)


@builtin
def rshift(x: Any, y: Any) -> tensor:
    """Arithmetic shift for signed types, logical for unsigned."""
    return _int_binary("shr", x, y)


def compare(pred: str, x: Any, y: Any) -> tensor:
    a, b = binary_operands(x, y)
    return tensor(builder().value("cmp", [a.handle, b.handle], pred=pred))


@builtin
def neg(x: Any) -> tensor:
    x = to_tensor(x)
    return elementwise("neg", x)


@builtin
def invert(x: Any) -> tensor:
    x = to_tensor(x)
    if not scalar_elem(x, "~").is_int():
        raise TypeError(f"'~' needs an integer tensor, got {x.dtype}; convert it with .to(tl.int32) "
                        "(with bitcast=True to work on a float's bits)")
    return elementwise("not", x)


@builtin
def logical_not(x: Any) -> tensor:
    return compare("eq", to_tensor(x), 0)


@builtin
def logical_and(x: Any, y: Any) -> tensor:
    return and_(cast(x, _t.int1), cast(y, _t.int1))


@builtin
def logical_or(x: Any, y: Any) -> tensor:
    return or_(cast(x, _t.int1), cast(y, _t.int1))


@builtin
def where(condition: Any, x: Any, y: Any) -> tensor:
    """`x` where `condition` is true, else `y`, elementwise with broadcasting."""
    c = cast(to_tensor(condition), _t.int1)
    a, b = binary_operands(x, y)
    shape = broadcast_shapes(c.shape, a.shape)
    c, a, b = broadcast_to(c, shape), broadcast_to(a, shape), broadcast_to(b, shape)
    return tensor(builder().value("select", [c.handle, a.handle, b.handle]))


_NAN_MODES = {None: "none", False: "none", True: "all", "none": "none", "all": "all", "NONE": "none", "ALL": "all"}


def _nan_mode(propagate_nan: Any) -> str:
    value = getattr(unwrap(propagate_nan), "value", unwrap(propagate_nan))
    if value not in _NAN_MODES:
        raise ValueError(f"propagate_nan must be tl.PropagateNan.NONE or .ALL, got {propagate_nan!r}")
    return _NAN_MODES[value]


class PropagateNan:
    """How `tl.maximum`, `tl.minimum`, `tl.clamp` and float `tl.max` / `tl.min` treat NaN: `NONE` (the default: a
    NaN operand may be dropped, as the hardware's min/max do) or `ALL` (any NaN operand gives NaN)."""
    NONE = NAN_MODES[0]
    ALL = NAN_MODES[1]


@builtin
def maximum(x: Any, y: Any, propagate_nan: Any = PropagateNan.NONE) -> tensor:
    """The larger of x and y, elementwise; for floats, `propagate_nan` says whether a NaN operand wins
    (`tl.PropagateNan.ALL`)."""
    a, b = binary_operands(x, y)
    attrs = {"propagate_nan": _nan_mode(propagate_nan)} if a.dtype.is_floating() else {}
    return elementwise("maximum", a, b, **attrs)


@builtin
def minimum(x: Any, y: Any, propagate_nan: Any = PropagateNan.NONE) -> tensor:
    """The smaller of x and y, elementwise; for floats, `propagate_nan` says whether a NaN operand wins
    (`tl.PropagateNan.ALL`)."""
    a, b = binary_operands(x, y)
    attrs = {"propagate_nan": _nan_mode(propagate_nan)} if a.dtype.is_floating() else {}
    return elementwise("minimum", a, b, **attrs)


@builtin
def clamp(x: Any, min: Any, max: Any, propagate_nan: Any = PropagateNan.NONE) -> tensor:
    """`x` limited to `[min, max]`."""
    return minimum(maximum(x, min, propagate_nan), max, propagate_nan)


@builtin
def abs(x: Any) -> tensor:
    """|x|, elementwise; unsigned integers and booleans are returned unchanged."""
    x = to_tensor(x)
    if x.dtype.is_bool() or x.dtype.is_int_unsigned():
        return x
    return elementwise("abs", x)


def _float_operand(x: Any, name: str) -> tensor:
    x = to_tensor(x)
    dt = scalar_elem(x, name)
    return x if dt.is_floating() else cast(x, _t.float32)


def _math(name: str, doc: str) -> Any:
    def fn(x: Any) -> tensor:
        return elementwise(name, _float_operand(x, name))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return builtin(fn)


exp = _math("exp", "e**x, elementwise.")
exp2 = _math("exp2", "2**x, elementwise.")
log = _math("log", "Natural logarithm, elementwise.")
log2 = _math("log2", "Base-2 logarithm, elementwise.")
sqrt = _math("sqrt", "Square root, elementwise.")
rsqrt = _math("rsqrt", "1 / sqrt(x), elementwise.")
sin = _math("sin", "Sine, elementwise.")
cos = _math("cos", "Cosine, elementwise.")
erf = _math("erf", "The error function, elementwise.")
floor = _math("floor", "Largest integer not above x, elementwise.")
ceil = _math("ceil", "Smallest integer not below x, elementwise.")


@builtin
def sqrt_rn(x: Any) -> tensor:
    """Square root rounded to nearest even (IEEE), elementwise; `sqrt` may be approximate."""
    x = to_tensor(x)
    if scalar_elem(x, "sqrt_rn") not in (_t.float32, _t.float64):
        raise TypeError(f"sqrt_rn needs fp32 or fp64 values, got {x.dtype}; convert them with .to(tl.float32)")
    return elementwise("sqrt_rn", x)


@builtin
def sigmoid(x: Any) -> tensor:
    """1 / (1 + exp(-x)), elementwise, on floats."""
    x = _float_operand(x, "sigmoid")
    return truediv(1.0, add(1.0, exp(neg(x))))


@builtin
def fma(x: Any, y: Any, z: Any) -> tensor:
    """x * y + z with a single rounding."""
    a, b = binary_operands(x, y)
    a, c = binary_operands(a, z)
    b, c = binary_operands(b, c)
    a = broadcast_to(cast(a, c.dtype), c.shape)
    if not c.dtype.is_floating():
        raise TypeError(f"fma needs floating-point operands, got {c.dtype}; convert them with .to(tl.float32)")
    return elementwise("fma", a, b, c)


@builtin
def umulhi(x: Any, y: Any) -> tensor:
    """The high half of the full-width product of two integers."""
    return _int_binary("umulhi", x, y)


@builtin
def div_rn(x: Any, y: Any) -> tensor:
    """IEEE division rounded to nearest even."""
    a, b = binary_operands(x, y, div=True)
    return elementwise("div_rn", a, b)


@builtin
def fdiv(x: Any, y: Any, ieee_rounding: bool = False) -> tensor:
    """Floating-point division; approximate unless `ieee_rounding`."""
    a, b = binary_operands(x, y, div=True)
    return elementwise("fdiv", a, b, ieee_rounding=bool(unwrap(ieee_rounding)))


@builtin
def cdiv(x: Any, div: Any) -> Any:
    """Ceiling division `(x + div - 1) // div` for ints, constexprs and tensors (also on the host)."""
    x, div = unwrap(x), unwrap(div)
    if isinstance(x, int) and isinstance(div, int):
        return -(-x // div)
    return floordiv(sub(add(x, div), 1), div)
