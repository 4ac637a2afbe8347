"""Memory in the op catalogue (`ops.OPS`): pointer arithmetic, loads and stores (masked, with cache and
eviction hints), tensor-descriptor loads and stores (`desc.load`, `desc.store`), and atomics, with their
attribute schemas and type rules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .attrs import enum, optional, required
from .core import Block, IRError
from .ops import _arity, _define, _mask, _numeric, _scalar_of, _shape_attr
from .types import PointerType, ScalarType, TileType, Type, elem_of, int32, int64, shape_of, with_elem


def _pointee(t: Type, name: str) -> Type:
    e = elem_of(t)
    if not isinstance(e, PointerType):
        raise IRError(f"'{name}' needs pointer operands, got {t}")
    return with_elem(t, e.element_ty)


def _addptr(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    _arity(t, 2, "addptr")
    _pointee(t[0], "addptr")
    if shape_of(t[0]) != shape_of(t[1]) or not _scalar_of(t[1], "addptr").is_int():
        raise IRError(f"'addptr' needs integer offsets of the pointers' shape, got {t[0]} + {t[1]}")
    return [t[0]]


def _load(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    if not 1 <= len(t) <= 3:
        raise IRError(f"'load' takes a pointer, an optional mask and an optional other, got {len(t)} operands")
    out = _pointee(t[0], "load")
    if len(t) >= 2:
        _mask(t[0], t[1], "load")
    if len(t) == 3 and t[2] != out:
        raise IRError(f"'load' other must be {out}, got {t[2]}")
    return [out]


def _store(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    if len(t) not in (2, 3):
        raise IRError(f"'store' takes a pointer, a value and an optional mask, got {len(t)} operands")
    if _pointee(t[0], "store") != t[1]:
        raise IRError(f"'store' value must be {_pointee(t[0], 'store')}, got {t[1]}")
    if len(t) == 3:
        _mask(t[0], t[2], "store")
    return []


def _descriptor_block(name: str, t: Sequence[Type], rank: int, value: str = "") -> ScalarType:
    """The element type of the tensor whose rank-`rank` block op `name` addresses: `t` is its base, shape
    (one per dimension), strides (one per dimension but the last, which is 1) and offsets (one per
    dimension), then `value` (a store's) when named."""
    want = 3 * rank + bool(value)
    if len(t) != want:
        raise IRError(f"'{name}' of a rank-{rank} block takes {want} operands (base, {rank} shape, {rank - 1} "
                      f"strides, {rank} offsets{', ' + value if value else ''}), got {len(t)}")
    base = t[0]
    if not isinstance(base, PointerType) or not isinstance(base.element_ty, ScalarType):
        raise IRError(f"'{name}' base must be a pointer to scalars, got {base}")
    for what, types, want_ty in (("shape", t[1 : 1 + rank], int64), ("strides", t[1 + rank : 2 * rank], int64),
                                 ("offsets", t[2 * rank : 3 * rank], int32)):
        if any(x != want_ty for x in types):
            raise IRError(f"'{name}' {what} must be {want_ty} scalars, got {', '.join(map(str, types))}")
    return base.element_ty


def _descriptor_load(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    """The `block_shape` tile at `offsets` of the tensor at `base` with `shape` and `strides` (in
    elements; the last stride is 1 and not an operand): operands base, shape (one per dimension),
    strides (one per dimension but the last), offsets (one per dimension)."""
    block = _shape_attr(a)
    elem = _descriptor_block("descriptor_load", t, len(block))
    if a.get("padding") == "nan" and not elem.is_floating():
        raise IRError(f"'descriptor_load' padding 'nan' needs floating-point elements, got {elem}")
    return [TileType(block, elem)]


def _descriptor_store(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    """Write the tile `value` at `offsets` of the tensor at `base` with `shape` and `strides`, but not its
    elements outside `shape`: operands as `descriptor_load`'s, then the value, a tile of the tensor's
    element type whose shape is the block's."""
    value = t[-1] if t else None
    if not isinstance(value, TileType):
        raise IRError(f"'descriptor_store' value (its last operand) must be a tile, got {value or 'no operands'}")
    elem = _descriptor_block("descriptor_store", t, len(value.shape), "1 value")
    if value.element_ty != elem:
        raise IRError(f"'descriptor_store' value must be a tile of {elem}, the base's elements, got {value}")
    return []


DESCRIPTOR_PADDINGS = ("zero", "nan")
CACHE_MODIFIERS = ("", ".ca", ".cg", ".cv", ".cs", ".wb", ".wt")
EVICTION_POLICIES = ("", "evict_normal", "evict_first", "evict_last")
ATOMIC_KINDS = ("add", "fadd", "max", "min", "umax", "umin", "and", "or", "xor", "xchg")
MEM_SEMANTICS = ("relaxed", "acquire", "release", "acq_rel")
MEM_SCOPES = ("cta", "gpu", "sys")


def _atomic_rmw(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    if len(t) not in (2, 3):
        raise IRError(f"'atomic_rmw' takes a pointer, a value and an optional mask, got {len(t)} operands")
    if _pointee(t[0], "atomic_rmw") != t[1]:
        raise IRError(f"'atomic_rmw' value must be {_pointee(t[0], 'atomic_rmw')}, got {t[1]}")
    if isinstance(elem_of(t[1]), ScalarType):
        _numeric(t[1], "atomic_rmw")
    if len(t) == 3:
        _mask(t[0], t[2], "atomic_rmw")
    return [t[1]]


def _atomic_cas(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    _arity(t, 3, "atomic_cas")
    out = _pointee(t[0], "atomic_cas")
    if isinstance(elem_of(out), ScalarType):
        _numeric(out, "atomic_cas")
    if t[1] != out or t[2] != out:
        raise IRError(f"'atomic_cas' compare and value must be {out}, got {t[1]}, {t[2]}")
    return [out]


_CACHING = {"cache": enum(*CACHE_MODIFIERS, nullable=True), "evict": enum(*EVICTION_POLICIES, nullable=True)}
_ORDERING = {"sem": enum(*MEM_SEMANTICS, required=True), "scope": enum(*MEM_SCOPES, required=True)}
_define("addptr", _addptr)
_define("load", _load, {**_CACHING, "volatile": optional("bool")}, side_effects=False)
_define("store", _store, _CACHING, side_effects=True)
_define("descriptor_load", _descriptor_load,
        {"shape": required("ints"), "padding": enum(*DESCRIPTOR_PADDINGS, required=True), **_CACHING}, side_effects=False)
_define("descriptor_store", _descriptor_store, side_effects=True)
_define("atomic_rmw", _atomic_rmw, {"kind": enum(*ATOMIC_KINDS, required=True), **_ORDERING}, side_effects=True)
_define("atomic_cas", _atomic_cas, _ORDERING, side_effects=True)
