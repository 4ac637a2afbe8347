"""Atomics: every active lane of every program of the batch applies its update in turn.

Lanes are serialised in program order, then element order. The returned old values are
those of that serial order: lanes that hit distinct addresses update in one vectorised step;
when several hit one address, integer `add` uses a segmented prefix sum, an unused result
lets `np.<ufunc>.at` do the work, and otherwise the lanes go in rounds, round `r` taking the
`r`-th lane of every address (as many rounds as the most contended address has lanes).

Float `max`/`min` order values as the GPU's atomics do (integer atomics on the bits, split on the
sign, as in Triton): by sign and magnitude, a total order -NaN < -inf < ... < -0.0 < +0.0 < ...
< +inf < +NaN. So +0.0 beats -0.0 whatever the order of the updates, a NaN with the sign bit
clear wins a max (and loses a min), and one with the sign bit set loses a max (and wins a min).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..ir.core import Op
from ..ir.types import ElemType, ScalarType, elem_of, shape_of
from .core import State, rule
from .elementwise import unsigned
from .memory import effective_mask, from_storage, resolve, to_storage
from .values import Val, finish, np_dtype, storage_dtype

Step = Callable[..., np.ndarray]


def _step(kind: str, ety: ElemType) -> Step:
    if kind in ("add", "fadd"):
        return lambda old, v: finish(old + v, ety)
    if kind in ("max", "min") and _is_float(ety):
        return _float_max(ety) if kind == "max" else _float_min(ety)
    if kind == "max":
        return np.maximum
    if kind == "min":
        return np.minimum
    if kind in ("umax", "umin"):
        f = np.maximum if kind == "umax" else np.minimum
        return lambda old, v: f(unsigned(old), unsigned(v)).view(old.dtype)
    if kind == "and":
        return np.bitwise_and
    if kind == "or":
        return np.bitwise_or
    if kind == "xor":
        return np.bitwise_xor
    return lambda old, v: v


_AT: dict[str, np.ufunc] = {
    "add": np.add,
    "fadd": np.add,
    "max": np.maximum,
    "min": np.minimum,
    "umax": np.maximum,
    "umin": np.minimum,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
}


def _bits(x: np.ndarray, ety: ElemType) -> np.ndarray:
    return unsigned(np.ascontiguousarray(to_storage(x, ety)))


def _is_float(ety: ElemType) -> bool:
    return isinstance(ety, ScalarType) and ety.is_floating()


def _order_key(x: np.ndarray, ety: ElemType) -> np.ndarray:
    """Unsigned integers that order floats by sign and magnitude (see the module docstring):
    a set sign bit flips every bit, a clear one sets the sign bit."""
    bits = _bits(x, ety)
    sign = bits.dtype.type(1 << (bits.dtype.itemsize * 8 - 1))
    return np.where(bits & sign, ~bits, bits | sign)


def _float_max(ety: ElemType) -> Step:
    def step(old: np.ndarray, v: np.ndarray) -> np.ndarray:
        above: np.ndarray = _order_key(v, ety) > _order_key(old, ety)
        return np.asarray(np.where(above, v, old))

    return step


def _float_min(ety: ElemType) -> Step:
    def step(old: np.ndarray, v: np.ndarray) -> np.ndarray:
        below: np.ndarray = _order_key(v, ety) < _order_key(old, ety)
        return np.asarray(np.where(below, v, old))

    return step


def _in_turn(view: np.ndarray, idx: np.ndarray, operands: list[np.ndarray], ety: ElemType, step: Step) -> np.ndarray:
    """Apply `step` lane by lane in order, vectorised over lanes with distinct addresses."""
    n = idx.size
    order = np.argsort(idx, kind="stable")
    sorted_idx = idx[order]
    new_group = np.ones(n, dtype=np.bool_)
    new_group[1:] = sorted_idx[1:] != sorted_idx[:-1]
    pos = np.arange(n)
    rank = pos - np.maximum.accumulate(np.where(new_group, pos, 0))
    by_rank = order[np.argsort(rank, kind="stable")]
    old = np.empty(n, dtype=np_dtype(ety))
    k = 0
    for count in np.bincount(rank):
        lanes = by_rank[k : k + count]
        k += count
        at = idx[lanes]
        before = from_storage(view[at], ety)
        old[lanes] = before
        view[at] = to_storage(step(before, *(x[lanes] for x in operands)), ety)
    return old


def _int_add(view: np.ndarray, idx: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Integer add with contention: old values by a prefix sum within each address's lanes."""
    order = np.argsort(idx, kind="stable")
    sorted_idx, sorted_v = idx[order], v[order]
    starts = np.ones(idx.size, dtype=np.bool_)
    starts[1:] = sorted_idx[1:] != sorted_idx[:-1]
    inclusive = np.cumsum(sorted_v, dtype=v.dtype)
    exclusive = inclusive - sorted_v
    group = np.cumsum(starts) - 1
    before_group = exclusive[starts][group]
    initial = view[sorted_idx]
    old = np.empty_like(v)
    old[order] = initial + (exclusive - before_group)
    ends = np.ones(idx.size, dtype=np.bool_)
    ends[:-1] = starts[1:]
    view[sorted_idx[ends]] = (initial + (inclusive - before_group))[ends]
    return old


def _apply(
    view: np.ndarray, idx: np.ndarray, operands: list[np.ndarray], ety: ElemType, kind: str, step: Step, used: bool
) -> np.ndarray:
    sorted_idx = np.sort(idx)
    if not (sorted_idx[1:] == sorted_idx[:-1]).any():
        before = from_storage(view[idx], ety)
        view[idx] = to_storage(step(before, *operands), ety)
        return before
    plain = isinstance(ety, ScalarType) and not ety.is_bf16() and not ety.is_bool()
    if not used and plain and kind in _AT and not (kind in ("max", "min") and _is_float(ety)):
        if kind in ("umax", "umin"):
            _AT[kind].at(unsigned(view), idx, unsigned(operands[0]))
        else:
            _AT[kind].at(view, idx, operands[0])
        return np.zeros(idx.size, dtype=np_dtype(ety))
    if not used and kind == "xchg":
        view[idx] = to_storage(operands[0], ety)
        return np.zeros(idx.size, dtype=np_dtype(ety))
    if plain and kind == "add" and isinstance(ety, ScalarType) and ety.is_int():
        return _int_add(view, idx, operands[0])
    return _in_turn(view, idx, operands, ety, step)


def _atomic(st: State, op: Op, values: list[np.ndarray], mask: np.ndarray | None, kind: str, step: Step) -> list[Val]:
    ety = elem_of(op.result.type)
    # Every program performs its atomic, so even a uniform operand counts once per program.
    shape = (st.nprog,) + shape_of(op.result.type)
    m = effective_mask(st, mask, len(shape))
    parts = resolve(st, op, st.raw(op.operands[0]), m, ety, shape)
    operands = [np.broadcast_to(v, shape) for v in values]
    used = st.is_used(op.result)
    out = np.zeros(shape, dtype=np_dtype(ety))
    sdt = storage_dtype(ety)
    memory = st.memory
    # In a while loop a failed compare-and-swap must not look like progress: compare what changed.
    exact = st.in_while > 0 or memory.journal is not None
    for part in parts:
        if part.sel is None:
            idx = np.broadcast_to(part.idx, shape).reshape(-1)
            lanes = [x.reshape(-1) for x in operands]
        else:
            idx, lanes = part.idx, [x[part.sel] for x in operands]
        view = part.buf.view(sdt)
        before = view[idx] if exact else None
        old = _apply(view, idx, lanes, ety, kind, step, used)
        if before is None:
            memory.writes += 1
        else:
            memory.wrote(view, idx, before)
        if part.sel is None:
            out = old.reshape(shape)
        else:
            out[part.sel] = old
    return [out]


@rule("atomic_rmw", reads_memory=True, writes_memory=True)
def atomic_rmw(st: State, op: Op) -> list[Val]:
    kind = op.attrs["kind"]
    mask = st.get(op.operands[2]) if len(op.operands) > 2 else None
    return _atomic(st, op, [st.get(op.operands[1])], mask, kind, _step(kind, elem_of(op.result.type)))


@rule("atomic_cas", reads_memory=True, writes_memory=True)
def atomic_cas(st: State, op: Op) -> list[Val]:
    ety = elem_of(op.result.type)

    def swap(old: np.ndarray, cmp: np.ndarray, value: np.ndarray) -> np.ndarray:
        return np.where(_bits(old, ety) == _bits(cmp, ety), value, old)

    return _atomic(st, op, [st.get(op.operands[1]), st.get(op.operands[2])], None, "cas", swap)
