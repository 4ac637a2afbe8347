"""Pointers, loads and stores: resolving a tile of addresses to buffers and element indices.

An access first becomes a list of `Part`s, one per buffer it touches (almost always one),
each with the element indices of its lanes; out-of-bounds, misaligned and null accesses of
active, unmasked lanes raise `KernelRuntimeError` there. The common case takes no look at
individual addresses: `addptr` keeps its result as `Ptr(base, index)`, the base (one value
per program at most) names the buffer, and the index is the element index already.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..ir.core import Op
from ..ir.types import ElemType, PointerType, ScalarType, elem_of, shape_of
from .core import State, rule
from .memory_space import Buffer
from .values import Ptr, Val, along_programs, broadcast_shape, from_bits, np_dtype, storage_dtype, to_bits


class Part(NamedTuple):
    """The lanes of an access that fall in one buffer."""

    buf: Buffer
    # Which lanes of the access's full shape are in this part; None: all of them.
    sel: np.ndarray | None
    # Element indices: broadcastable to the access's shape when `sel` is None, else one per
    # selected lane.
    idx: np.ndarray
    # When `idx` is the run `start, start + 1, ...` in order: `start` (the access is a slice).
    start: int | None = None


def lead(x: Val | None) -> int:
    if x is None:
        return 1
    return x.shape[0]


def effective_mask(st: State, mask: np.ndarray | None, ndim: int) -> np.ndarray | None:
    """`mask` restricted to the active programs; None when every lane is on."""
    if st.active is not None:
        act = along_programs(st.active, ndim)
        mask = act if mask is None else mask & act
    if mask is None or remember(st, mask, "all", lambda: bool(mask.all())):
        return None
    return mask


def remember(st: State, x: np.ndarray, what: str, compute: Callable[[], Any]) -> Any:
    """`compute()`, a fact about array `x`, remembered for the batch: one offsets tile or mask
    often serves several accesses."""
    key = (id(x), what)
    hit = st.memo.get(key)
    if hit is not None and hit[0] is x:
        return hit[1]
    value = compute()
    st.memo[key] = (x, value)
    if len(st.memo) > 32:
        del st.memo[next(iter(st.memo))]
    return value


def _index_facts(st: State, idx: np.ndarray) -> tuple[int, int, int | None]:
    """min, max and, if the indices run contiguously in order, the first."""
    lo, hi = int(idx.min()), int(idx.max())
    n = idx.size
    if n < 2 or hi - lo != n - 1 or not idx.flags.c_contiguous:
        return lo, hi, None
    flat = idx.reshape(-1)
    if int(flat[0]) != lo or int(flat[-1]) != hi:
        return lo, hi, None
    steps = np.subtract(flat[1:], flat[:-1], out=st.scratch.empty((n - 1,), flat.dtype))
    if not np.equal(steps, 1, out=st.scratch.empty((n - 1,), np.dtype(np.bool_))).all():
        return lo, hi, None
    return lo, hi, lo


def resolve(st: State, op: Op, ptr: Val, mask: np.ndarray | None, ety: ElemType, shape: tuple[int, ...]) -> list[Part]:
    """The parts of an access through `ptr` over `shape` (program axis first) where `mask`."""
    if mask is not None and not mask.any():
        return []
    itemsize = storage_dtype(ety).itemsize
    if isinstance(ptr, Ptr):
        parts = _from_ptr(st, op, ptr, mask, ety, shape)
        if parts is not None:
            return parts
        ptr = ptr.address()
    return _from_addresses(st, op, ptr, mask, ety, itemsize, shape)


def _from_ptr(
    st: State, op: Op, p: Ptr, mask: np.ndarray | None, ety: ElemType, shape: tuple[int, ...]
) -> list[Part] | None:
    base, itemsize = p.base, p.itemsize
    if base.size == 1:
        lo = hi = int(base.flat[0])
    else:
        lo, hi = int(base.min()), int(base.max())
    buf = st.memory.owner(lo)
    if buf is None or st.memory.owner(hi) is not buf:
        return None
    if base.size == 1:
        offset, misaligned = divmod(lo - buf.start, itemsize)
        if misaligned:
            return None
        idx = p.index if offset == 0 else p.index + np.int64(offset)
    else:
        off = base - np.int64(buf.start)
        if itemsize > 1 and (off % itemsize).any():
            return None
        idx = off // itemsize + p.index
    if mask is not None:
        m = np.broadcast_to(mask, shape)
        return [_bounded(st, op, buf, np.broadcast_to(idx, shape)[m], m, ety, shape)]
    return [_bounded(st, op, buf, idx, None, ety, shape)]


def _from_addresses(
    st: State, op: Op, addr: np.ndarray, mask: np.ndarray | None, ety: ElemType, itemsize: int, shape: tuple[int, ...]
) -> list[Part]:
    m = None if mask is None else np.broadcast_to(mask, shape)
    a = addr if m is None else np.broadcast_to(addr, shape)[m]
    buf = st.memory.owner(int(a.min()))
    if buf is not None and st.memory.owner(int(a.max())) is buf:
        return [_decode(st, op, buf, a, m, ety, itemsize, shape)]
    if m is None:
        m = np.ones(shape, dtype=np.bool_)
        a = np.broadcast_to(addr, shape).reshape(-1)
    owners = st.memory.owners(a)
    parts = []
    for owner in np.unique(owners):
        sub = owners == owner
        lanes = m.copy()
        lanes[m] = sub
        parts.append(_decode(st, op, st.memory.buffers.get(int(owner)), a[sub], lanes, ety, itemsize, shape))
    return parts


def _decode(
    st: State,
    op: Op,
    buf: Buffer | None,
    addr: np.ndarray,
    m: np.ndarray | None,
    ety: ElemType,
    itemsize: int,
    shape: tuple[int, ...],
) -> Part:
    if buf is None:
        lane, address = _first_bad(addr, m, shape, np.ones(addr.shape, dtype=np.bool_))
        nulls = st.memory.nulls
        passed = f" (passed as None: {', '.join(repr(n) for n in nulls)})" if nulls else ""
        what = "a null pointer" + passed if abs(address) < 1 << 39 else f"address {address:#x}, in no argument's buffer"
        raise st.error(
            op,
            f"'{op.name}' through {what} by {_describe(st, shape, lane)}. "
            "Mask the access, or pass a tensor for the argument.",
        )
    off = addr - np.int64(buf.start)
    if itemsize > 1:
        misaligned = (off & np.int64(itemsize - 1)) != 0
        if misaligned.any():
            lane, bad = _first_bad(off, m, shape, misaligned)
            raise st.error(
                op,
                f"'{op.name}' at byte offset {bad} of '{buf.name}' by {_describe(st, shape, lane)} is not aligned "
                f"to its {ety} elements ({itemsize} bytes). Check the pointer arithmetic and casts.",
            )
    return _bounded(st, op, buf, off >> np.int64(itemsize.bit_length() - 1), m, ety, shape)


def _bounded(
    st: State, op: Op, buf: Buffer, idx: np.ndarray, m: np.ndarray | None, ety: ElemType, shape: tuple[int, ...]
) -> Part:
    n = buf.nbytes // storage_dtype(ety).itemsize
    if m is None:
        lo, hi, start = remember(st, idx, "index", lambda: _index_facts(st, idx))
    else:
        lo, hi, start = int(idx.min()), int(idx.max()), None
    if lo < 0 or hi >= n:
        lane, offset = _first_bad(idx, m, shape, (idx < 0) | (idx >= n))
        raise st.error(
            op,
            f"'{op.name}' out of bounds of argument '{buf.name}': {_describe(st, shape, lane)} accesses element "
            f"offset {offset}, but the buffer holds {n} {ety} elements. Mask the access (e.g. "
            "`mask=offsets < n`) so that lanes past the end are skipped.",
        )
    return Part(buf, m, idx, start)


def _first_bad(x: np.ndarray, m: np.ndarray | None, shape: tuple[int, ...], bad: np.ndarray) -> tuple[int, int]:
    """The flat lane (over `shape`) of the first true entry of `bad` and `x` there; `x` and
    `bad` cover the lanes of `m` (all lanes, broadcastable, when `m` is None)."""
    if m is None:
        lane = int(np.argmax(np.broadcast_to(bad, shape).reshape(-1)))
        return lane, int(np.broadcast_to(x, shape).reshape(-1)[lane])
    k = int(np.argmax(bad))
    return int(np.flatnonzero(m)[k]), int(x[k])


def _describe(st: State, shape: tuple[int, ...], lane: int) -> str:
    coords = np.unravel_index(lane, shape)
    row = int(coords[0]) if shape[0] > 1 else st.first_active()
    text = f"program {st.program(row)}"
    if len(shape) > 1:
        text += f" element ({', '.join(str(int(c)) for c in coords[1:])})"
    return text


def from_storage(raw: np.ndarray, ety: ElemType) -> np.ndarray:
    if isinstance(ety, ScalarType):
        if ety.is_bool():
            return raw != 0
        return from_bits(raw, ety)
    return raw


def to_storage(x: np.ndarray, ety: ElemType) -> np.ndarray:
    if isinstance(ety, ScalarType) and (ety.is_bf16() or ety.is_fp8()):
        return to_bits(x, ety)
    return x.astype(storage_dtype(ety), copy=False)


@rule("addptr")
def addptr(st: State, op: Op) -> list[Val]:
    p = st.raw(op.operands[0])
    off = st.get(op.operands[1])
    if off.dtype == np.uint64 or off.dtype == np.bool_:
        off = off.astype(np.int64)
    pointee = elem_of(op.result.type)
    assert isinstance(pointee, PointerType)
    itemsize = storage_dtype(pointee.element_ty).itemsize
    if isinstance(p, Ptr):
        return [Ptr(p.base, np.add(p.index, off, dtype=np.int64), itemsize)]
    return [Ptr(p, off, itemsize)]


@rule("load", reads_memory=True)
def load(st: State, op: Op) -> list[Val]:
    ptr = st.raw(op.operands[0])
    mask = st.get(op.operands[1]) if len(op.operands) > 1 else None
    other = st.get(op.operands[2]) if len(op.operands) > 2 else None
    return [_load(st, op, ptr, mask, other)]


@rule("descriptor_load", reads_memory=True)
def descriptor_load(st: State, op: Op) -> list[Val]:
    """The block at the offsets, as `passes/descriptors.py` expands it: every dimension checked against
    the shape, the elements outside read as the padding."""
    ety = elem_of(op.result.type)
    ptr, mask = _block(st, op, tuple(op.attrs["shape"]), ety)
    fill = np.full((1,) * mask.ndim, np.nan if op.attrs["padding"] == "nan" else 0, np_dtype(ety))
    return [_load(st, op, ptr, mask, fill)]


@rule("descriptor_store", writes_memory=True)
def descriptor_store(st: State, op: Op) -> list[Val]:
    """The value written at the offsets, as `passes/descriptors.py` expands it: only its elements inside
    the shape."""
    value = op.operands[-1]
    ety = elem_of(value.type)
    ptr, mask = _block(st, op, shape_of(value.type), ety)
    _store(st, op, ptr, st.get(value), mask, ety, shape_of(value.type))
    return []


def _block(st: State, op: Op, block: tuple[int, ...], ety: ElemType) -> tuple[Ptr, np.ndarray]:
    """The pointers and the mask (inside the shape) of the block a descriptor op addresses, with a leading
    dimension of programs: its operands are base, shape, strides but the last, offsets."""
    rank = len(block)
    ones = (1,) * rank

    def per_program(k: int) -> np.ndarray:
        return st.get(op.operands[k]).reshape(-1, *ones)

    offset = np.zeros((1, *ones), np.int64)
    mask = np.ones((1, *ones), np.bool_)
    for d in range(rank):
        lanes = np.arange(block[d], dtype=np.int32).reshape(1, *(block[d] if a == d else 1 for a in range(rank)))
        index = np.add(per_program(2 * rank + d), lanes, dtype=np.int32)
        wide = index.astype(np.int64)
        mask = mask & (index >= 0) & (wide < per_program(1 + d))
        offset = offset + (wide * per_program(1 + rank + d) if d < rank - 1 else wide)
    base = st.raw(op.operands[0])
    itemsize = storage_dtype(ety).itemsize
    if isinstance(base, Ptr):
        return Ptr(base.base.reshape(-1, *ones), np.add(base.index.reshape(-1, *ones), offset, dtype=np.int64),
                   itemsize), mask
    return Ptr(base.reshape(-1, *ones), offset, itemsize), mask


def _load(st: State, op: Op, ptr: Val, mask: np.ndarray | None, other: np.ndarray | None) -> Val:
    ety = elem_of(op.result.type)
    rows = max(lead(ptr), lead(mask), lead(other), 1 if st.active is None else st.nprog)
    shape = (rows,) + shape_of(op.result.type)
    m = effective_mask(st, mask, len(shape))
    parts = resolve(st, op, ptr, m, ety, shape)
    sdt = storage_dtype(ety)
    if len(parts) == 1 and parts[0].sel is None:
        buf, _, idx, start = parts[0]
        view = buf.view(sdt)
        raw = st.scratch.empty(idx.shape, sdt)
        if start is not None:
            np.copyto(raw, view[start : start + idx.size].reshape(idx.shape))
        else:
            np.take(view, idx, out=raw, mode="clip")
        return from_storage(raw, ety)
    if other is None:
        out = np.zeros(shape, dtype=np_dtype(ety))
    else:
        out = np.array(np.broadcast_to(other, shape))
    for part in parts:
        out[part.sel] = from_storage(np.take(part.buf.view(sdt), part.idx, mode="clip"), ety)
    return out


@rule("store", writes_memory=True)
def store(st: State, op: Op) -> list[Val]:
    mask = st.get(op.operands[2]) if len(op.operands) > 2 else None
    value = op.operands[1]
    _store(st, op, st.raw(op.operands[0]), st.get(value), mask, elem_of(value.type), shape_of(value.type))
    return []


def _store(st: State, op: Op, ptr: Val, value: np.ndarray, mask: np.ndarray | None, ety: ElemType,
           block: tuple[int, ...]) -> None:
    rows = max(lead(ptr), value.shape[0], lead(mask), 1 if st.active is None else st.nprog)
    shape = (rows,) + block
    m = effective_mask(st, mask, len(shape))
    parts = resolve(st, op, ptr, m, ety, shape)
    raw = to_storage(value, ety)
    sdt = storage_dtype(ety)
    memory = st.memory
    if len(parts) == 1 and parts[0].sel is None:
        buf, _, idx, start = parts[0]
        view = buf.view(sdt)
        both = broadcast_shape(idx.shape, raw.shape)
        if start is not None and idx.shape == both:
            run = slice(start, start + idx.size)
            memory.will_write(view, run)
            view[run] = np.broadcast_to(raw, both).reshape(-1)
        else:
            at = np.broadcast_to(idx, both)
            memory.will_write(view, at)
            view[at] = np.broadcast_to(raw, both)
        return
    full = np.broadcast_to(raw, shape)
    for part in parts:
        view = part.buf.view(sdt)
        memory.will_write(view, part.idx)
        view[part.idx] = full[part.sel]
