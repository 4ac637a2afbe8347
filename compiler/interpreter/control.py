"""Control flow over a batch of programs that may disagree: `if`, `for`, `while`, `call`.

When a condition or a loop bound is the same for every active program the region simply
runs. When programs diverge, the region runs under a narrower active mask (`State.active`)
and the values it produces are merged per program: `if` runs both branches, `for` runs the
longest trip count with finished programs' carried values frozen, `while` runs until no
program goes on (`progress` watches it for programs that wait on each other). Values of
inactive programs are computed but never observed: memory, atomics, print and assert honour
the mask.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..ir.core import Block, Op
from .core import State, rule, run_block
from .progress import Watch
from .values import Ptr, Val, merge


def _array(x: Val) -> np.ndarray:
    return x.address() if isinstance(x, Ptr) else x


def _merge_all(mask: np.ndarray, a: Sequence[Val], b: Sequence[Val]) -> list[Val]:
    return [merge(mask, _array(x), _array(y)) for x, y in zip(a, b)]


def uniform(st: State, cond: np.ndarray) -> bool | None:
    """The value of a per-program condition when all active programs agree, else None."""
    if cond.shape[0] == 1:
        return bool(cond[0])
    c = cond if st.active is None else cond[st.active]
    if c.all():
        return True
    if not c.any():
        return False
    return None


def _restrict(st: State, mask: np.ndarray) -> np.ndarray:
    return mask if st.active is None else mask & st.active


@rule("if")
def if_(st: State, op: Op) -> list[Val]:
    cond = st.get(op.operands[0])
    then, other = op.regions
    taken = uniform(st, cond)
    if taken is not None:
        return run_block(st, then if taken else other, [])
    saved = st.active
    on, off = _restrict(st, cond), _restrict(st, ~cond)
    try:
        st.active = on
        a = run_block(st, then, [])
        st.active = off
        b = run_block(st, other, [])
    finally:
        st.active = saved
    return _merge_all(cond, a, b)


def _trip_counts(lo: np.ndarray, hi: np.ndarray, step: np.ndarray) -> np.ndarray:
    lo64, hi64, s64 = (x.astype(np.int64) for x in (lo, hi, step))
    up = (hi64 - lo64 + s64 - 1) // np.where(s64 > 0, s64, 1)
    down = (lo64 - hi64 - s64 - 1) // np.where(s64 < 0, -s64, 1)
    return np.maximum(np.where(s64 > 0, up, down), 0)


@rule("for")
def for_(st: State, op: Op) -> list[Val]:
    lo, hi, step = (st.get(v) for v in op.operands[:3])
    carried: list[Val] = [st.raw(v) for v in op.operands[3:]]
    body = op.regions[0]
    stuck = (step == 0) & (lo < hi)
    if (stuck if st.active is None or stuck.shape[0] == 1 else stuck[st.active]).any():
        raise st.error(op, "'for' loop with step 0 never ends; give the range a non-zero step")
    trips = _trip_counts(lo, hi, step)
    live_trips = trips if st.active is None or trips.shape[0] == 1 else trips[st.active]
    iv = lo
    if trips.shape[0] == 1:
        for _ in range(int(trips[0])):
            carried = run_block(st, body, [iv, *carried])
            iv = iv + step
        return carried
    first_done, last_done = int(live_trips.min()), int(live_trips.max())
    saved = st.active
    try:
        for i in range(last_done):
            if i < first_done:
                carried = run_block(st, body, [iv, *carried])
            else:
                live = _restrict(st, trips > i)
                st.active = live
                carried = _merge_all(live, run_block(st, body, [iv, *carried]), carried)
                st.active = saved
            iv = iv + step
    finally:
        st.active = saved
    return carried


@rule("while")
def while_(st: State, op: Op) -> list[Val]:
    before, after = op.regions
    carried: list[Val] = [st.raw(v) for v in op.operands]
    saved = st.active
    results: list[Val] | None = None
    watch = Watch(st, op)
    st.in_while += 1
    try:
        while True:
            out = run_block(st, before, carried)
            cond, passed = _array(out[0]), out[1:]
            going = uniform(st, cond)
            if going is False:
                # Every program still running leaves now; those that left earlier keep their results.
                if results is None:
                    results = list(passed)
                else:
                    assert st.active is not None
                    results = _merge_all(st.active, passed, results)
                break
            if going is None:
                leaving = ~cond if st.active is None else st.active & ~cond
                results = list(passed) if results is None else _merge_all(leaving, passed, results)
                st.active = _restrict(st, cond)
            carried = run_block(st, after, passed)
            watch.step(carried, going is None)
    finally:
        st.in_while -= 1
        st.active = saved
    assert results is not None
    return results


@rule("call")
def call(st: State, op: Op) -> list[Val]:
    callee: Block | None = st.cache.get(op)
    if callee is None:
        callee = st.cache[op] = st.module.get(op.attrs["callee"]).body
    args = [st.raw(v) for v in op.operands]
    saved = st.env
    # The callee's values are its own: a fresh environment keeps a call inside a call sound.
    st.env = {}
    try:
        return run_block(st, callee, args)
    finally:
        st.env = saved
