"""Whether a `while` loop of the interpreter still gets anywhere, and what to do when not.

A batch runs its programs as one vector, so a loop that waits for another program of the
same batch (a spin lock, a flag) never ends: the program it waits for is held at the same
point of the kernel, or at the loop's exit, until every program of the batch leaves. A `Watch`
follows each run of a while loop, one `step` per iteration, and calls the loop stuck when an
iteration let no program leave and changed no memory (a failed compare-and-swap changes
nothing), and

- the loop is `effects.blind`: its condition and its writes ignore the loop-carried values,
  so the next iteration repeats this one, and so on forever (a spin loop, counting its tries
  or not); or
- the loop-carried values of the programs still in the loop came back bit for bit: an
  iteration is a function of them, of which programs are in the loop and of memory, so again
  it repeats forever. Checked after
  iterations 2, 3, 5, 9, 17, ... (one after each power of two), which costs a normal loop
  about log2(iterations) comparisons of its carried values;

or when one run of the loop reaches the launch's step bound (`DESPINA_INTERPRET_MAX_STEPS`
iterations, a million unless set). Both tests are exact: a loop that would end is never
called stuck before the bound.

A stuck loop that reads memory (`effects.reads_memory`) may wait for another program: in a
batch of several programs it raises `Stalled`, and the scheduler (`schedule`) undoes the batch
and runs the programs one at a time. Anywhere else (a program on its own, or a loop that reads
no memory) nothing can change its course: it raises `KernelRuntimeError` naming the kernel,
the loop's line, the program and what to do. `for` loops need no watch: their trip count is
fixed when they start.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from ..ir.core import Op
from .core import Launch, State
from .effects import blind, reads_memory
from .values import Ptr, Val

MAX_STEPS_VARIABLE = "DESPINA_INTERPRET_MAX_STEPS"
DEFAULT_MAX_STEPS = 1_000_000

_ADVICE = (
    "If it waits for another program (a lock, a flag), that program must come earlier in the grid: the "
    "interpreter runs programs that wait on each other one at a time, in grid order. Otherwise fix the "
    "loop's condition."
)


class Stalled(Exception):
    """The programs of a batch wait on each other in the while loop `op`."""

    def __init__(self, op: Op, why: str) -> None:
        super().__init__(why)
        self.op = op
        self.why = why


def max_steps() -> int:
    """The step bound from `DESPINA_INTERPRET_MAX_STEPS`: iterations one run of a while loop may take."""
    text = os.environ.get(MAX_STEPS_VARIABLE)
    if text is None:
        return DEFAULT_MAX_STEPS
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(
            f"{MAX_STEPS_VARIABLE}={text!r}: expected a positive whole number of while-loop iterations "
            f"(unset, it is {DEFAULT_MAX_STEPS})"
        )
    return value


def may_wait(launch: Launch) -> bool:
    """Whether the kernel has a while loop that reads memory (one that may wait for another program)."""
    module, cache = launch.module, launch.cache
    return any(op.name == "while" and reads_memory(module, cache, op) for fn in module.functions for op in fn.walk())


def _bits(x: Val) -> np.ndarray:
    a = x.address() if isinstance(x, Ptr) else x
    return a if a.dtype.kind in "biu" else a.view(f"u{a.dtype.itemsize}")


def _same(a: Val, b: Val, active: np.ndarray | None) -> bool:
    """Whether `a` and `b` hold the same bits for the programs still in the loop (the rows of
    programs that left go on changing, unobserved)."""
    if a is b:
        return True
    x, y = _bits(a), _bits(b)
    if x.shape != y.shape or x.dtype != y.dtype:
        return False
    if active is not None and x.shape[0] == active.shape[0] > 1:
        x, y = x[active], y[active]
    return bool(np.array_equal(x, y))


class Watch:
    """One run of a while loop: `step` after each iteration raises when the loop is stuck."""

    __slots__ = ("st", "op", "steps", "writes", "last")

    def __init__(self, st: State, op: Op) -> None:
        self.st = st
        self.op = op
        self.steps = 0
        self.writes = st.memory.writes
        # The carried values one iteration ago, after an iteration numbered a power of two.
        self.last: list[Val] | None = None

    def step(self, carried: Sequence[Val], left: bool) -> None:
        """After an iteration that left `carried` to the next; `left`: some program left the loop."""
        self.steps += 1
        st = self.st
        writes = st.memory.writes
        quiet = not left and writes == self.writes
        self.writes = writes
        last, self.last = self.last, None
        if quiet and (blind(st.module, st.cache, self.op) or (last is not None and self._repeats(carried, last))):
            self._stuck(
                "an iteration changed nothing",
                "this while loop never ends: an iteration of {who} changed nothing that the next one depends on "
                "(no program left the loop, memory did not change), so it would repeat forever.",
            )
        if self.steps > st.max_steps:
            self._stuck(
                f"over {st.max_steps} iterations",
                f"this while loop did not end within {st.max_steps} iterations ({{who}}). If it needs more, raise "
                f"{MAX_STEPS_VARIABLE}.",
            )
        if self.steps & (self.steps - 1) == 0:
            self.last = list(carried)

    def _repeats(self, carried: Sequence[Val], last: Sequence[Val]) -> bool:
        active = self.st.active
        return all(_same(a, b, active) for a, b in zip(carried, last))

    def _stuck(self, why: str, message: str) -> None:
        st = self.st
        if st.fallback and reads_memory(st.module, st.cache, self.op):
            raise Stalled(self.op, why)
        live = st.nprog if st.active is None else int(st.active.sum())
        who = f"program {st.program(st.first_active())}" + (f" and {live - 1} more of its batch" if live > 1 else "")
        raise st.error(self.op, f"{message.format(who=who)} {_ADVICE}")
