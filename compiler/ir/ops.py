"""The op catalogue: every tile-IR op with its attribute schema and its type rule.

A rule takes the operand types, the attributes and the regions and returns the result types,
raising `IRError` when the op is malformed. `infer` checks the attributes against the op's schema
(`attrs.Attr`: the kinds and values each may hold, which ones are required) before the rule runs.
The builder, the parser and the verifier (which the daemon runs on every module the codec
decodes) all type ops through this one table, so an op's contract is written once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .attrs import Attr, attrs_error, enum, optional, required
from .core import Block, IRError
from .types import (
    PointerType,
    ScalarType,
    TileType,
    Type,
    elem_of,
    float32,
    int1,
    int32,
    shape_of,
    with_elem,
    with_shape,
)

Rule = Callable[[Sequence[Type], dict[str, Any], Sequence[Block]], list[Type]]


@dataclass(frozen=True)
class OpDef:
    name: str
    rule: Rule
    attrs: Mapping[str, Attr] = field(default_factory=dict)
    num_regions: int = 0
    terminator: bool = False
    side_effects: bool = False


OPS: dict[str, OpDef] = {}


def _define(name: str, rule: Rule, attrs: Mapping[str, Attr] | None = None, **kw: Any) -> None:
    OPS[name] = OpDef(name, rule, dict(attrs or {}), **kw)


def _arity(types: Sequence[Type], n: int, name: str) -> None:
    if len(types) != n:
        raise IRError(f"'{name}' takes {n} operands, got {len(types)}")


def _same(types: Sequence[Type], name: str) -> Type:
    first = types[0]
    for t in types[1:]:
        if t != first:
            raise IRError(f"'{name}' needs operands of one type, got {', '.join(map(str, types))}")
    return first


def _scalar_of(t: Type, name: str) -> ScalarType:
    e = elem_of(t)
    if not isinstance(e, ScalarType):
        raise IRError(f"'{name}' needs scalar elements, got {t}")
    return e


def _numeric(t: Type, name: str) -> ScalarType:
    """The element type of an arithmetic operand: any scalar but fp8, which only casts, moves and
    `dot` take."""
    e = _scalar_of(t, name)
    if e.is_fp8():
        raise IRError(f"'{name}' does not take {e} operands: fp8 values are cast to fp16, bf16 or fp32 first")
    return e


def _float(t: Type, name: str) -> Type:
    if not _numeric(t, name).is_floating():
        raise IRError(f"'{name}' needs a floating-point operand, got {t}")
    return t


def _int(t: Type, name: str) -> Type:
    if not _scalar_of(t, name).is_int():
        raise IRError(f"'{name}' needs an integer operand, got {t}")
    return t


def _mask(ptr: Type, mask: Type, name: str) -> None:
    if elem_of(mask) != int1 or shape_of(mask) != shape_of(ptr):
        raise IRError(f"'{name}' mask must be int1 of the pointers' shape {list(shape_of(ptr))}, got {mask}")


def _shape_attr(attrs: dict[str, Any], key: str = "shape") -> tuple[int, ...]:
    shape = attrs.get(key)
    if not isinstance(shape, (list, tuple)) or not shape or not all(isinstance(d, int) and d > 0 for d in shape):
        raise IRError(f"attribute '{key}' must be a non-empty list of positive integers, got {shape!r}")
    return tuple(shape)


def _type_attr(attrs: dict[str, Any], key: str) -> Type:
    t = attrs.get(key)
    if not isinstance(t, (ScalarType, PointerType, TileType)):
        raise IRError(f"attribute '{key}' must be a type, got {t!r}")
    return t


def _axis(attrs: dict[str, Any], rank: int, name: str) -> int:
    axis = attrs.get("axis")
    if not isinstance(axis, int) or not 0 <= axis < max(rank, 1):
        raise IRError(f"'{name}' axis {axis!r} is out of range for rank {rank}")
    return axis


def _yield_types(block: Block, name: str) -> list[Type]:
    term = block.terminator
    if term is None or term.name not in ("yield", "condition"):
        raise IRError(f"a region of '{name}' must end with 'yield'")
    values = term.operands[1:] if term.name == "condition" else term.operands
    return [v.type for v in values]


# ---- constants, indices ---------------------------------------------------------------------


def _constant(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    _arity(t, 0, "constant")
    ty = _type_attr(a, "type")
    e = elem_of(ty)
    if isinstance(e, ScalarType) and e.is_fp8():
        raise IRError(f"'constant' of {e}: the IR has no fp8 constants; cast an fp32 constant to {e}")
    return [ty]


def _grid_index(name: str) -> Rule:
    def rule(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
        _arity(t, 0, name)
        if a.get("axis") not in (0, 1, 2):
            raise IRError(f"'{name}' axis must be 0, 1 or 2, got {a.get('axis')!r}")
        return [int32]

    return rule


def _arange(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    _arity(t, 0, "arange")
    start, end = a.get("start"), a.get("end")
    if not isinstance(start, int) or not isinstance(end, int) or end <= start:
        raise IRError(f"'arange' needs integer start < end, got {start!r}, {end!r}")
    return [TileType((end - start,), int32)]


_define("constant", _constant, {"value": required("bool", "int", "float"), "type": required("type")})
_define("program_id", _grid_index("program_id"), {"axis": required("int")})
_define("num_programs", _grid_index("num_programs"), {"axis": required("int")})
_define("arange", _arange, {"start": required("int"), "end": required("int")})

# ---- shape ops ------------------------------------------------------------------------------


def _splat(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    _arity(t, 1, "splat")
    if not isinstance(t[0], (ScalarType, PointerType)):
        raise IRError(f"'splat' takes a scalar, got {t[0]}")
    return [TileType(_shape_attr(a), t[0])]


def _broadcast(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    _arity(t, 1, "broadcast")
    src, shape = shape_of(t[0]), _shape_attr(a)
    if len(src) != len(shape) or any(s != d and s != 1 for s, d in zip(src, shape)):
        raise IRError(f"'broadcast' cannot broadcast shape {list(src)} to {list(shape)}")
    return [with_shape(elem_of(t[0]), shape)]


def _expand_dims(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    _arity(t, 1, "expand_dims")
    shape = list(shape_of(t[0]))
    axis = _axis(a, len(shape) + 1, "expand_dims")
    shape.insert(axis, 1)
    return [TileType(tuple(shape), elem_of(t[0]))]


def _reshape(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    _arity(t, 1, "reshape")
    shape = _shape_attr(a)
    new = TileType(shape, elem_of(t[0]))
    old = t[0].numel if isinstance(t[0], TileType) else 1
    if new.numel != old:
        raise IRError(f"'reshape' cannot turn {old} elements into shape {list(shape)} ({new.numel})")
    return [new]


def _trans(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    _arity(t, 1, "trans")
    shape = shape_of(t[0])
    perm = a.get("perm")
    if not isinstance(perm, (list, tuple)) or sorted(perm) != list(range(len(shape))) or not shape:
        raise IRError(f"'trans' perm {perm!r} is not a permutation of the {len(shape)} dims of {t[0]}")
    return [TileType(tuple(shape[p] for p in perm), elem_of(t[0]))]


def _cat(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    _arity(t, 2, "cat")
    x = _same(t, "cat")
    if not isinstance(x, TileType):
        raise IRError("'cat' takes tiles")
    return [TileType((x.shape[0] * 2,) + x.shape[1:], x.element_ty)]


def _join(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    _arity(t, 2, "join")
    x = _same(t, "join")
    return [TileType(shape_of(x) + (2,), elem_of(x))]


def _split(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    _arity(t, 1, "split")
    shape = shape_of(t[0])
    if not shape or shape[-1] != 2:
        raise IRError(f"'split' needs a last dimension of size 2, got {t[0]}")
    out = with_shape(elem_of(t[0]), shape[:-1])
    return [out, out]


_define("splat", _splat, {"shape": required("ints")})
_define("broadcast", _broadcast, {"shape": required("ints")})
_define("expand_dims", _expand_dims, {"axis": required("int")})
_define("reshape", _reshape, {"shape": required("ints"), "can_reorder": optional("bool")})
_define("trans", _trans, {"perm": required("ints")})
_define("cat", _cat)
_define("join", _join)
_define("split", _split)

# ---- elementwise ----------------------------------------------------------------------------

FLOAT_UNARY = ("exp", "exp2", "log", "log2", "sqrt", "sqrt_rn", "rsqrt", "sin", "cos", "erf", "floor", "ceil")
ANY_UNARY = ("neg", "abs")
ARITH_BINARY = ("add", "sub", "mul", "rem", "maximum", "minimum")
FLOAT_BINARY = ("div", "div_rn", "fdiv", "pow")
INT_BINARY = ("floordiv", "and", "or", "xor", "shl", "shr", "umulhi")
CMP_PREDICATES = ("eq", "ne", "lt", "le", "gt", "ge")
NAN_MODES = ("none", "all")  # maximum/minimum: NaN operands ignored where possible, or propagated
ROUNDINGS = ("rtne", "rtz")  # float downcasts
FP8_CAST_PARTNERS = ("fp16", "bf16", "fp32")  # the types a `cast` takes to and from fp8


def _unary(kind: str, name: str) -> Rule:
    def rule(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
        _arity(t, 1, name)
        if kind == "float":
            return [_float(t[0], name)]
        if kind == "int":
            return [_int(t[0], name)]
        _numeric(t[0], name)
        return [t[0]]

    return rule


def _binary(kind: str, name: str) -> Rule:
    def rule(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
        _arity(t, 2, name)
        ty = _same(t, name)
        if kind == "float":
            return [_float(ty, name)]
        if kind == "int":
            return [_int(ty, name)]
        _numeric(ty, name)
        return [ty]

    return rule


def _not(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    _arity(t, 1, "not")
    return [_int(t[0], "not")]


def _cmp(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    _arity(t, 2, "cmp")
    ty = _same(t, "cmp")
    if isinstance(elem_of(ty), ScalarType):
        _numeric(ty, "cmp")
    return [with_elem(ty, int1)]


def _select(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    _arity(t, 3, "select")
    if elem_of(t[0]) != int1 or shape_of(t[0]) != shape_of(t[1]):
        raise IRError(f"'select' condition must be int1 of the values' shape, got {t[0]} for {t[1]}")
    return [_same(t[1:], "select")]


def _fma(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    _arity(t, 3, "fma")
    return [_float(_same(t, "fma"), "fma")]


def _converted(t: Sequence[Type], a: dict[str, Any], name: str) -> ScalarType | PointerType:
    _arity(t, 1, name)
    to = _type_attr(a, "to")
    if not isinstance(to, (ScalarType, PointerType)):
        raise IRError(f"'{name}' target must be an element type")
    return to


def _cast(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    to = _converted(t, a, "cast")
    src = elem_of(t[0])
    fp8 = [e for e in (src, to) if isinstance(e, ScalarType) and e.is_fp8()]
    if fp8 and src != to:
        other = to if fp8[0] is src else src
        if other.name not in FP8_CAST_PARTNERS:
            raise IRError(f"'cast' from {src} to {to}: fp8 casts take only {', '.join(FP8_CAST_PARTNERS)} "
                          "(convert through fp32)")
        if to in fp8 and a.get("rounding") == "rtz":
            raise IRError(f"'cast' to {to} rounds to nearest even only, not 'rtz'")
    return [with_elem(t[0], to)]


def _bitcast(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    to = _converted(t, a, "bitcast")
    if elem_of(t[0]).primitive_bitwidth != to.primitive_bitwidth:
        raise IRError(f"'bitcast' needs equal bit widths, got {elem_of(t[0])} and {to}")
    return [with_elem(t[0], to)]


for _n in FLOAT_UNARY:
    _define(_n, _unary("float", _n))
for _n in ANY_UNARY:
    _define(_n, _unary("any", _n))
for _n in ARITH_BINARY:
    _define(_n, _binary("any", _n), {"propagate_nan": enum(*NAN_MODES)} if _n in ("maximum", "minimum") else None)
for _n in FLOAT_BINARY:
    _define(_n, _binary("float", _n), {"ieee_rounding": optional("bool")} if _n == "fdiv" else None)
for _n in INT_BINARY:
    _define(_n, _binary("int", _n))
_define("not", _not)
_define("cmp", _cmp, {"pred": enum(*CMP_PREDICATES, required=True)})
_define("select", _select)
_define("fma", _fma)
_define("cast", _cast, {"to": required("type"), "rounding": enum(*ROUNDINGS, nullable=True)})
_define("bitcast", _bitcast, {"to": required("type")})

# ---- dot, reductions, scans -----------------------------------------------------------------


DOT_PRECISIONS = ("tf32", "tf32x3", "ieee")


def _dot(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    _arity(t, 3, "dot")
    sa, sb, sc = shape_of(t[0]), shape_of(t[1]), shape_of(t[2])
    if len(sa) not in (2, 3) or len(sa) != len(sb) or len(sa) != len(sc):
        raise IRError(f"'dot' needs 2-D (or batched 3-D) tiles, got {t[0]}, {t[1]}, {t[2]}")
    if sa[-1] != sb[-2] or sc[-2:] != (sa[-2], sb[-1]) or sa[:-2] != sb[:-2] or sa[:-2] != sc[:-2]:
        raise IRError(f"'dot' shapes do not agree: {list(sa)} @ {list(sb)} -> {list(sc)}")
    if elem_of(t[0]) != elem_of(t[1]):
        raise IRError(f"'dot' operands must share a dtype, got {elem_of(t[0])} and {elem_of(t[1])}")
    ea, ec = elem_of(t[0]), elem_of(t[2])
    if isinstance(ea, ScalarType) and ea.is_fp8() and ec != float32:
        raise IRError(f"'dot' of {ea} operands accumulates in fp32, not {ec}")
    return [t[2]]


def _combine(name: str, t: Sequence[Type], a: dict[str, Any], r: Sequence[Block], reduce: bool) -> list[Type]:
    if not t or len(r) != 1:
        raise IRError(f"'{name}' takes at least one operand and one combine region")
    shape = shape_of(t[0])
    if any(shape_of(x) != shape for x in t) or not shape:
        raise IRError(f"'{name}' operands must be tiles of one shape, got {', '.join(map(str, t))}")
    axis = _axis(a, len(shape), name)
    scalars = [elem_of(x) for x in t]
    if [v.type for v in r[0].args] != scalars + scalars:
        raise IRError(f"'{name}' combine region must take ({', '.join(map(str, scalars * 2))})")
    if _yield_types(r[0], name) != scalars:
        raise IRError(f"'{name}' combine region must yield ({', '.join(map(str, scalars))})")
    if not reduce:
        return list(t)
    out_shape = shape[:axis] + shape[axis + 1 :]
    return [with_shape(s, out_shape) for s in scalars]


_define("dot", _dot, {"input_precision": enum(*DOT_PRECISIONS, nullable=True),
                     "max_num_imprecise_acc": optional("int", "none")})
_define("reduce", lambda t, a, r: _combine("reduce", t, a, r, True), {"axis": required("int")}, num_regions=1)
_define("scan", lambda t, a, r: _combine("scan", t, a, r, False), {"axis": required("int"), "reverse": optional("bool")},
        num_regions=1)

# ---- indexing: gather, histogram -----------------------------------------------------------


def _gather(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    _arity(t, 2, "gather")
    src, index = shape_of(t[0]), shape_of(t[1])
    _scalar_of(t[0], "gather")
    _int(t[1], "gather")
    if not src or len(src) != len(index):
        raise IRError(f"'gather' needs a source and an index tile of one rank, got {t[0]} and {t[1]}")
    axis = _axis(a, len(src), "gather")
    if any(s != i for d, (s, i) in enumerate(zip(src, index)) if d != axis):
        raise IRError(f"'gather' index {t[1]} must match the source {t[0]} in every dimension but {axis}")
    return [TileType(index, elem_of(t[0]))]


def _histogram(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    if len(t) not in (1, 2):
        raise IRError(f"'histogram' takes an input and an optional mask, got {len(t)} operands")
    if len(shape_of(t[0])) != 1:
        raise IRError(f"'histogram' needs a 1-D tile, got {t[0]}")
    _int(t[0], "histogram")
    if len(t) == 2:
        _mask(t[0], t[1], "histogram")
    bins = a.get("num_bins")
    if not isinstance(bins, int) or isinstance(bins, bool) or bins <= 0:
        raise IRError(f"'histogram' num_bins must be a positive integer, got {bins!r}")
    return [TileType((bins,), int32)]


_define("gather", _gather, {"axis": required("int")})
_define("histogram", _histogram, {"num_bins": required("int")})

# ---- hints and debugging --------------------------------------------------------------------


def _hint(name: str) -> Rule:
    def rule(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
        _arity(t, 1, name)
        _int(t[0], name)
        values = a.get("values")
        rank = max(len(shape_of(t[0])), 1)
        if not isinstance(values, list) or len(values) != rank or not all(isinstance(v, int) and v > 0 for v in values):
            raise IRError(f"'{name}' needs {rank} positive integers, got {values!r}")
        return [t[0]]

    return rule


def _assume(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    _arity(t, 1, "assume")
    if elem_of(t[0]) != int1:
        raise IRError(f"'assume' takes an int1 condition, got {t[0]}")
    return []


def _device_assert(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    _arity(t, 1, "device_assert")
    if elem_of(t[0]) != int1:
        raise IRError(f"'device_assert' takes an int1 condition, got {t[0]}")
    return []


for _n in ("multiple_of", "max_contiguous", "max_constancy"):
    _define(_n, _hint(_n), {"values": required("ints")})
_define("assume", _assume, side_effects=True)
_define("device_print", lambda t, a, r: [], {"prefix": optional("str"), "hex": optional("bool")}, side_effects=True)
_define("device_assert", _device_assert, {"msg": optional("str")}, side_effects=True)
_define("barrier", lambda t, a, r: [], side_effects=True)


def infer(name: str, operand_types: Sequence[Type], attrs: dict[str, Any], regions: Sequence[Block] = ()) -> list[Type]:
    """The result types of op `name`, or `IRError` saying why the op is malformed."""
    opdef = OPS.get(name)
    if opdef is None:
        raise IRError(f"unknown op '{name}'")
    if len(regions) != opdef.num_regions and name not in ("if", "while"):
        raise IRError(f"'{name}' takes {opdef.num_regions} regions, got {len(regions)}")
    if err := attrs_error(opdef.attrs, attrs):
        raise IRError(f"op '{name}': {err}")
    return opdef.rule(operand_types, attrs, regions)


# Memory, control flow and the ops that call out of the tile IR (libdevice, inline assembly) register
# themselves from their own modules.
from . import ops_calls, ops_control, ops_memory  # noqa: E402,F401
