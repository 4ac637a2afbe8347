"""Creation and shape ops: constants, program ids, `arange`, splat/broadcast, reshapes, hints.

Values keep size-1 dimensions where they are constant along them (see `values`), so
`broadcast` and `splat` cost nothing; ops that rearrange elements broadcast to whole tiles.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..ir.core import Op
from ..ir.types import elem_of, shape_of
from .core import State, rule
from .values import Ptr, Val, broadcast_shape, scalar_array


def _map(fn: Callable[[np.ndarray], np.ndarray], x: Val) -> Val:
    """Apply a rearrangement to a value, to both parts of a lazy pointer alike."""
    if isinstance(x, Ptr):
        return Ptr(fn(x.base), fn(x.index), x.itemsize)
    return fn(x)


def _full_trailing(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return np.broadcast_to(x, (x.shape[0],) + shape)


@rule("constant")
def constant(st: State, op: Op) -> list[Val]:
    value = st.cache.get(op)
    if value is None:
        ty = op.attrs["type"]
        value = st.cache[op] = scalar_array(op.attrs["value"], elem_of(ty), 1 + len(shape_of(ty)))
    return [value]


@rule("program_id")
def program_id(st: State, op: Op) -> list[Val]:
    return [st.pid[op.attrs["axis"]]]


@rule("num_programs")
def num_programs(st: State, op: Op) -> list[Val]:
    return [np.array([st.grid[op.attrs["axis"]]], dtype=np.int32)]


@rule("arange")
def arange(st: State, op: Op) -> list[Val]:
    value = st.cache.get(op)
    if value is None:
        value = st.cache[op] = np.arange(op.attrs["start"], op.attrs["end"], dtype=np.int32)[None, :]
    return [value]


@rule("splat")
def splat(st: State, op: Op) -> list[Val]:
    ones = (1,) * len(op.attrs["shape"])
    return [_map(lambda x: x.reshape(x.shape + ones), st.raw(op.operands[0]))]


@rule("broadcast", "multiple_of", "max_contiguous", "max_constancy")
def identity(st: State, op: Op) -> list[Val]:
    return [st.raw(op.operands[0])]


@rule("expand_dims")
def expand_dims(st: State, op: Op) -> list[Val]:
    axis = op.attrs["axis"] + 1
    return [_map(lambda x: np.expand_dims(x, axis), st.raw(op.operands[0]))]


@rule("reshape")
def reshape(st: State, op: Op) -> list[Val]:
    old, new = shape_of(op.operands[0].type), tuple(op.attrs["shape"])

    def fn(x: np.ndarray) -> np.ndarray:
        if x.size == x.shape[0]:
            return x.reshape((x.shape[0],) + (1,) * len(new))
        return _full_trailing(x, old).reshape((x.shape[0],) + new)

    return [_map(fn, st.raw(op.operands[0]))]


@rule("trans")
def trans(st: State, op: Op) -> list[Val]:
    perm = (0,) + tuple(p + 1 for p in op.attrs["perm"])
    return [_map(lambda x: np.transpose(x, perm), st.raw(op.operands[0]))]


@rule("cat")
def cat(st: State, op: Op) -> list[Val]:
    a, b = st.get(op.operands[0]), st.get(op.operands[1])
    rows = max(a.shape[0], b.shape[0])
    shape = (rows,) + shape_of(op.operands[0].type)
    return [np.concatenate([np.broadcast_to(a, shape), np.broadcast_to(b, shape)], axis=1)]


@rule("join")
def join(st: State, op: Op) -> list[Val]:
    a, b = st.get(op.operands[0]), st.get(op.operands[1])
    both = broadcast_shape(a.shape, b.shape)
    return [np.stack([np.broadcast_to(a, both), np.broadcast_to(b, both)], axis=-1)]


@rule("split")
def split(st: State, op: Op) -> list[Val]:
    x = st.get(op.operands[0])
    return [x[..., 0], x[..., min(1, x.shape[-1] - 1)]]
