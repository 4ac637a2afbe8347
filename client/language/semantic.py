"""Type promotion, broadcasting and casts: how Python-level operands become typed IR operands.

These follow Triton's rules: a Python literal is "weak" (an `int` next to an `int8` tensor stays
`int8`, a `float` next to an `fp16` tensor stays `fp16`), floats beat ints, mixed fp16/bf16
gives fp32, and integer promotion keeps the wider type (unsigned wins at equal width).
"""

from __future__ import annotations

from typing import Any

from despina.compiler.ir import types as _t
from despina.compiler.ir.core import Value
from despina.compiler.ir.ops import ROUNDINGS

from .core import builder, tensor, unwrap

Operand = tensor | int | float | bool


def _is_literal(x: Any) -> bool:
    return isinstance(unwrap(x), (bool, int, float)) and not isinstance(x, tensor)


def literal_type(value: bool | int | float) -> _t.ScalarType:
    """The IR type a Python literal takes on its own."""
    if isinstance(value, bool):
        return _t.int1
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return _t.int32
        if -(2**63) <= value < 2**63:
            return _t.int64
        if 0 <= value < 2**64:
            return _t.uint64
        raise ValueError(f"integer literal {value} does not fit in 64 bits")
    if isinstance(value, float):
        return _t.float32
    raise TypeError(f"cannot use {type(value).__name__} value {value!r} as a kernel value")


def _fits(value: bool | int | float, ty: _t.ScalarType) -> bool:
    if ty.is_floating() or isinstance(value, float):
        return True
    bits = ty.primitive_bitwidth
    if ty.is_bool():
        return value in (0, 1)
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1)) if ty.is_int_signed() else (0, 2**bits)
    return lo <= value < hi


def constant(value: bool | int | float, ty: _t.Type) -> tensor:
    scalar = _t.elem_of(ty)
    if isinstance(scalar, _t.ScalarType) and scalar.is_fp8():
        # The IR has no fp8 constants: an fp32 one, rounded (and saturated) as a cast rounds.
        return cast(constant(value, _t.with_elem(ty, _t.float32)), scalar)
    if isinstance(scalar, _t.ScalarType):
        if scalar.is_floating():
            value = float(value)
        elif scalar.is_bool():
            value = bool(value)
        else:
            value = int(value)
            literal_type(value)  # raises for integers wider than 64 bits
            bits = scalar.primitive_bitwidth
            value &= (1 << bits) - 1
            if scalar.is_int_signed() and value >= 1 << (bits - 1):
                value -= 1 << bits
    return tensor(builder().constant(value, ty))


def to_tensor(x: Any, ty: _t.ScalarType | None = None) -> tensor:
    """`x` as a tensor; a literal becomes a constant of type `ty` or of its own literal type."""
    x = unwrap(x)
    if isinstance(x, tensor):
        return x
    if isinstance(x, (bool, int, float)):
        return constant(x, ty or literal_type(x))
    raise TypeError(f"expected a tensor or a number, got {type(x).__name__} {x!r}")


def _kind(ty: _t.ElemType) -> int:
    if isinstance(ty, _t.PointerType):
        return 3
    if ty.is_floating():
        return 2
    return 0 if ty.is_bool() else 1


def integer_promote(a: _t.ScalarType, b: _t.ScalarType) -> _t.ScalarType:
    wa, wb = a.primitive_bitwidth, b.primitive_bitwidth
    if a.is_int_signed() == b.is_int_signed():
        return a if wa >= wb else b
    if a.is_int_unsigned():
        return a if wa >= wb else b
    return b if wb >= wa else a


def promote(a: _t.ScalarType, b: _t.ScalarType, div: bool = False) -> _t.ScalarType:
    """The computation type of a binary op on tensors of scalar types `a` and `b`."""
    if a.is_fp64() or b.is_fp64():
        return _t.float64
    if a.is_fp32() or b.is_fp32():
        return _t.float32
    if a.is_fp8() or b.is_fp8():
        return _fp8_promote(a, b)
    if a.is_floating() or b.is_floating():
        if a.is_floating() and b.is_floating():
            return a if a == b else _t.float32
        return a if a.is_floating() else b
    if div:
        return _t.float32
    if a.is_bool() and b.is_bool():
        return _t.int1
    return integer_promote(a, b)


def _fp8_promote(a: _t.ScalarType, b: _t.ScalarType) -> _t.ScalarType:
    """Triton's promotion with an fp8 operand (neither is fp32 or fp64): fp16 with fp16 or with the
    other fp8 type, fp32 with bf16; arithmetic in fp8 itself (both one fp8 type, or fp8 with an
    integer or a literal) does not exist, as in Triton."""
    if a.is_fp16() or b.is_fp16() or (a.is_fp8() and b.is_fp8() and a != b):
        return _t.float16
    if a.is_bf16() or b.is_bf16():
        return _t.float32
    fp8 = a if a.is_fp8() else b
    raise TypeError(f"arithmetic on {fp8} values is not supported (fp8 is a storage and tl.dot operand type): convert "
                    "them to a wider float first, e.g. x.to(tl.float32), and back with .to() for the result")


def _operand_type(x: Operand, other: Operand) -> _t.ScalarType:
    """The scalar type `x` contributes to promotion next to `other` (weak literals defer)."""
    if isinstance(x, tensor):
        dt = x.dtype
        if not isinstance(dt, _t.ScalarType):
            raise TypeError(f"expected a numeric tensor, got {x.type}; pointers support only + and - of integer offsets")
        return dt
    value = unwrap(x)
    if isinstance(other, tensor) and isinstance(other.dtype, _t.ScalarType):
        ot = other.dtype
        if isinstance(value, bool) and ot.is_bool():
            return ot
        if isinstance(value, int) and not isinstance(value, bool) and ot.is_int() and not ot.is_bool():
            if not _fits(value, ot):
                raise ValueError(f"integer literal {value} does not fit in the tensor's type {ot}; convert the tensor "
                                 "with .to() to a wider type first")
            return ot
        if isinstance(value, (int, float)) and ot.is_floating():
            return ot
    return literal_type(value)


def broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    given = (list(a), list(b))
    if len(a) < len(b):
        a = (1,) * (len(b) - len(a)) + a
    elif len(b) < len(a):
        b = (1,) * (len(a) - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise ValueError(f"shapes {given[0]} and {given[1]} are incompatible for broadcasting; each dimension must "
                             "match or be 1 (add one with x[:, None] or tl.expand_dims, or tl.reshape)")
        out.append(max(x, y))
    return tuple(out)


def broadcast_to(x: tensor, shape: tuple[int, ...]) -> tensor:
    shape = tuple(shape)
    if x.shape == shape:
        return x
    b = builder()
    if not x.shape:
        return tensor(b.value("splat", [x.handle], shape=list(shape)))
    h: Value = x.handle
    if len(x.shape) < len(shape):
        h = b.value("reshape", [h], shape=[1] * (len(shape) - len(x.shape)) + list(x.shape), can_reorder=False)
    return tensor(b.value("broadcast", [h], shape=list(shape)))


def binary_operands(a: Operand, b: Operand, div: bool = False) -> tuple[tensor, tensor]:
    """Promote and broadcast two numeric operands to one type and shape."""
    a, b = unwrap(a), unwrap(b)
    sa, sb = _operand_type(a, b), _operand_type(b, a)
    ty = promote(sa, sb, div)
    at, bt = cast(to_tensor(a, sa), ty), cast(to_tensor(b, sb), ty)
    shape = broadcast_shapes(at.shape, bt.shape)
    return broadcast_to(at, shape), broadcast_to(bt, shape)


def cast(x: Any, to: _t.ElemType, bitcast: bool = False, fp_downcast_rounding: str | None = None) -> tensor:
    """`x` converted to element type `to` (`bitcast=True` reinterprets the bits)."""
    x = to_tensor(x)
    to = unwrap(to)
    if isinstance(to, _t.TileType) or not isinstance(to, (_t.ScalarType, _t.PointerType)):
        raise TypeError(f"cast target must be a dtype such as tl.float32, got {to!r}")
    src = x.dtype
    if src == to:
        return x
    b = builder()
    if bitcast:
        if src.primitive_bitwidth != to.primitive_bitwidth:
            raise ValueError(f"cannot bitcast {src} ({src.primitive_bitwidth} bits) to {to} ({to.primitive_bitwidth} "
                             "bits); bitcast needs types of the same width, convert without bitcast=True instead")
        return tensor(b.value("bitcast", [x.handle], to=to))
    if isinstance(src, _t.ScalarType) and isinstance(to, _t.ScalarType) and (src.is_fp8() or to.is_fp8()):
        return _fp8_cast(x, src, to, fp_downcast_rounding)
    if isinstance(to, _t.ScalarType) and to.is_bool() and not src.is_ptr():
        zero = constant(0, _t.with_elem(x.type, src))
        return tensor(b.value("cmp", [x.handle, zero.handle], pred="ne"))
    if src.is_ptr() != to.is_ptr() and (to if src.is_ptr() else src) not in (_t.int64, _t.uint64):
        raise TypeError(f"pointers cast only to and from int64, not {to if src.is_ptr() else src}")
    if fp_downcast_rounding is not None and fp_downcast_rounding not in ROUNDINGS:
        raise ValueError(f"fp_downcast_rounding must be 'rtne' or 'rtz', got {fp_downcast_rounding!r}")
    attrs: dict[str, Any] = {"to": to}
    if fp_downcast_rounding is not None:
        attrs["rounding"] = fp_downcast_rounding
    return tensor(b.create("cast", [x.handle], attrs).result)


_FP8_PARTNERS = ("fp16", "bf16", "fp32")  # the types a `cast` takes to and from fp8 directly


def _fp8_cast(x: tensor, src: _t.ScalarType, to: _t.ScalarType, rounding: str | None) -> tensor:
    """A conversion to or from fp8: directly to or from fp16, bf16 and fp32 (the GPU's `cvt`), through
    fp32 from and to every other type. Rounding to fp8 is to nearest even, saturating at the largest
    finite value (`cvt.rn.satfinite`)."""
    if to.is_fp8() and rounding == "rtz":
        raise ValueError(f"fp_downcast_rounding='rtz' is not available for {to}: the GPU converts to fp8 with "
                         "round-to-nearest-even only (cvt.rn.satfinite); leave fp_downcast_rounding out")
    if rounding is not None and rounding not in ROUNDINGS:
        raise ValueError(f"fp_downcast_rounding must be 'rtne' or 'rtz', got {rounding!r}")
    if (src.is_fp8() and to.name not in _FP8_PARTNERS) or (to.is_fp8() and src.name not in _FP8_PARTNERS):
        return cast(cast(x, _t.float32), to, fp_downcast_rounding=None if to.is_fp8() else rounding)
    attrs: dict[str, Any] = {"to": to}
    if rounding is not None and src.primitive_bitwidth > to.primitive_bitwidth:
        attrs["rounding"] = rounding
    return tensor(builder().create("cast", [x.handle], attrs).result)


def elementwise(name: str, *operands: tensor, **attrs: Any) -> tensor:
    return tensor(builder().create(name, [o.handle for o in operands], attrs).result)


def scalar_elem(x: tensor, what: str) -> _t.ScalarType:
    dt = x.dtype
    if not isinstance(dt, _t.ScalarType):
        raise TypeError(f"{what} needs a numeric tensor, got {x.type}")
    return dt
