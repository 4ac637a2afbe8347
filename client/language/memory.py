"""Global-memory builtins: load, store and atomics."""

from __future__ import annotations

from typing import Any

from despina.compiler.ir import types as _t
from despina.compiler.ir.ops_memory import CACHE_MODIFIERS, EVICTION_POLICIES

from .block_ptr import block_ptr, padding, pointers
from .core import builder, builtin, tensor, unwrap
from .semantic import broadcast_shapes, broadcast_to, cast, to_tensor


def _pointer(pointer: Any, what: str) -> tensor:
    p = unwrap(pointer)
    if not isinstance(p, tensor) or not p.dtype.is_ptr():
        raise TypeError(f"{what} needs a pointer or a tile of pointers, got {p!r}")
    return p


def _pointee(p: tensor) -> _t.ElemType:
    dt = p.dtype
    assert isinstance(dt, _t.PointerType)
    return dt.element_ty


def _mask(mask: Any, shape: tuple[int, ...]) -> tensor:
    m = cast(to_tensor(mask), _t.int1)
    return broadcast_to(m, broadcast_shapes(shape, m.shape))


def check_option(value: Any, allowed: tuple[str, ...], what: str) -> str:
    value = unwrap(value) or ""
    if value not in allowed:
        raise ValueError(f"{what} must be one of {', '.join(repr(a) for a in allowed)}, got {value!r}")
    return value


def _no_block_options(boundary_check: Any, padding_option: Any) -> None:
    if unwrap(boundary_check) or unwrap(padding_option):
        raise ValueError("boundary_check and padding_option belong to block pointers (tl.make_block_ptr); with a tile "
                         "of pointers, pass a mask (and `other`) instead")


def _block_pointer(pointer: Any, mask: Any, other: Any, what: str) -> block_ptr | None:
    bp = unwrap(pointer)
    if not isinstance(bp, block_ptr):
        return None
    if unwrap(mask) is not None or unwrap(other) is not None:
        raise ValueError(f"{what} of a block pointer takes no mask or other; name the dimensions to check with "
                         "boundary_check=(...) (and padding_option='zero' or 'nan' for loads)")
    return bp


@builtin
def load(
    pointer: Any,
    mask: Any = None,
    other: Any = None,
    boundary_check: Any = (),
    padding_option: Any = "",
    cache_modifier: Any = "",
    eviction_policy: Any = "",
    volatile: Any = False,
) -> tensor:
    """Load the values `pointer` points to; where `mask` is false, `other` (undefined if None).

    `pointer` may be a block pointer (`tl.make_block_ptr`): then `boundary_check` names the dimensions
    to keep inside the parent tensor, and `padding_option` ('zero', 'nan' or '': undefined) what the
    elements outside read as."""
    bp = _block_pointer(pointer, mask, other, "tl.load")
    if bp is not None:
        pointer, mask = pointers(bp, boundary_check)
        other = padding(bp, padding_option)
        if mask is None:
            other = None
    else:
        _no_block_options(boundary_check, padding_option)
    p = _pointer(pointer, "tl.load")
    mask, other = unwrap(mask), unwrap(other)
    attrs = {
        "cache": check_option(cache_modifier, CACHE_MODIFIERS, "cache_modifier"),
        "evict": check_option(eviction_policy, EVICTION_POLICIES, "eviction_policy"),
        "volatile": bool(unwrap(volatile)),
    }
    operands = [p]
    if mask is not None:
        m = _mask(mask, p.shape)
        p = broadcast_to(p, m.shape)
        operands = [p, m]
        if other is not None:
            elem = _pointee(p)
            o = cast(to_tensor(other, elem if isinstance(elem, _t.ScalarType) and not isinstance(other, tensor) else None), elem)
            operands.append(broadcast_to(o, p.shape))
    elif other is not None:
        raise ValueError("tl.load got `other` without a `mask`; pass the mask that selects where `other` applies")
    return tensor(builder().create("load", [o.handle for o in operands], attrs).result)


@builtin
def store(
    pointer: Any,
    value: Any,
    mask: Any = None,
    boundary_check: Any = (),
    cache_modifier: Any = "",
    eviction_policy: Any = "",
) -> None:
    """Store `value` (cast to the pointee type) where `mask` is true; through a block pointer, inside
    the parent tensor along the dimensions `boundary_check` names."""
    bp = _block_pointer(pointer, mask, None, "tl.store")
    if bp is not None:
        v = to_tensor(value)
        if v.shape and v.shape != bp.block_shape:
            raise ValueError(f"tl.store: the value's shape {list(v.shape)} is not the block pointer's block_shape "
                             f"{list(bp.block_shape)}")
        pointer, mask = pointers(bp, boundary_check)
    else:
        _no_block_options(boundary_check, None)
    p = _pointer(pointer, "tl.store")
    elem = _pointee(p)
    v = to_tensor(value, elem if isinstance(elem, _t.ScalarType) and not isinstance(unwrap(value), tensor) else None)
    if v.shape and not p.shape:
        raise ValueError(f"tl.store got a {v.type} value for a single pointer; address one element per value "
                         "(ptr + tl.arange(...)) or reduce the value first")
    shape = broadcast_shapes(p.shape, v.shape)
    operands = [broadcast_to(p, shape), broadcast_to(cast(v, elem), shape)]
    if unwrap(mask) is not None:
        m = _mask(mask, shape)
        operands = [broadcast_to(o, m.shape) for o in operands] + [m]
    attrs = {
        "cache": check_option(cache_modifier, CACHE_MODIFIERS, "cache_modifier"),
        "evict": check_option(eviction_policy, EVICTION_POLICIES, "eviction_policy"),
    }
    builder().create("store", [o.handle for o in operands], attrs)


_SEMS = {None: "acq_rel", "": "acq_rel", "relaxed": "relaxed", "acquire": "acquire", "release": "release", "acq_rel": "acq_rel"}
_SCOPES = {None: "gpu", "": "gpu", "gpu": "gpu", "cta": "cta", "sys": "sys"}


def _sem_scope(sem: Any, scope: Any) -> dict[str, str]:
    sem, scope = unwrap(sem), unwrap(scope)
    if sem not in _SEMS:
        raise ValueError(f"sem must be 'relaxed', 'acquire', 'release' or 'acq_rel', got {sem!r}")
    if scope not in _SCOPES:
        raise ValueError(f"scope must be 'gpu', 'cta' or 'sys', got {scope!r}")
    return {"sem": _SEMS[sem], "scope": _SCOPES[scope]}


def _atomic(kind: str, pointer: Any, val: Any, mask: Any, sem: Any, scope: Any) -> tensor:
    p = _pointer(pointer, f"tl.atomic_{kind}")
    elem = _pointee(p)
    if not isinstance(elem, _t.ScalarType):
        raise TypeError(f"tl.atomic_{kind} needs pointers to numbers, got {p.type}")
    v = to_tensor(val, elem if not isinstance(unwrap(val), tensor) else None)
    shape = broadcast_shapes(p.shape, v.shape)
    operands = [broadcast_to(p, shape), broadcast_to(cast(v, elem), shape)]
    if unwrap(mask) is not None:
        m = _mask(mask, shape)
        operands = [broadcast_to(o, m.shape) for o in operands] + [m]
    if kind == "add" and elem.is_floating():
        kind = "fadd"
    elif kind in ("max", "min") and elem.is_int_unsigned():
        kind = "u" + kind
    elif kind in ("and", "or", "xor") and not elem.is_int():
        raise TypeError(f"tl.atomic_{kind} needs integer pointers, got {p.type}")
    attrs = {"kind": kind, **_sem_scope(sem, scope)}
    return tensor(builder().create("atomic_rmw", [o.handle for o in operands], attrs).result)


def _atomic_builtin(kind: str) -> Any:
    def fn(pointer: Any, val: Any, mask: Any = None, sem: Any = None, scope: Any = None) -> tensor:
        return _atomic(kind, pointer, val, mask, sem, scope)

    fn.__name__ = fn.__qualname__ = f"atomic_{kind}"
    fn.__doc__ = f"Atomically apply `{kind}` with `val` at `pointer`; returns the old values."
    return builtin(fn)


atomic_add = _atomic_builtin("add")
atomic_max = _atomic_builtin("max")
atomic_min = _atomic_builtin("min")
atomic_and = _atomic_builtin("and")
atomic_or = _atomic_builtin("or")
atomic_xor = _atomic_builtin("xor")
atomic_xchg = _atomic_builtin("xchg")


@builtin
def atomic_cas(pointer: Any, cmp: Any, val: Any, sem: Any = None, scope: Any = None) -> tensor:
    """Where `*pointer == cmp` store `val`; returns the old values."""
    p = _pointer(pointer, "tl.atomic_cas")
    elem = _pointee(p)
    c = cast(to_tensor(cmp, elem if not isinstance(unwrap(cmp), tensor) else None), elem)  # type: ignore[arg-type]
    v = cast(to_tensor(val, elem if not isinstance(unwrap(val), tensor) else None), elem)  # type: ignore[arg-type]
    shape = broadcast_shapes(broadcast_shapes(p.shape, c.shape), v.shape)
    operands = [broadcast_to(x, shape) for x in (p, c, v)]
    return tensor(builder().create("atomic_cas", [o.handle for o in operands], _sem_scope(sem, scope)).result)
