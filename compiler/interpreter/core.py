"""The interpreter's core: the rule registry, the per-batch state and `run_block`.

A batch of programs runs at once, every value holding one row per program (see `values`).
`run_block` is a plain loop over a block's ops that calls the op's rule; control flow
(`control`) keeps an *active mask* of the programs that are executing a region, which the
rules with effects (memory, atomics, print, assert) honour. `schedule` runs the batches.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import KernelRuntimeError
from ..ir.core import Block, Module, Op, Value
from ..ir.registry import OpRegistry
from ..ir.types import PointerType, ScalarType
from .memory_space import Memory
from .scratch import Scratch
from .values import Ptr, Val, numel, scalar_array

# Programs per batch are chosen so that the largest tile of the kernel, over the whole batch,
# holds about this many elements: big enough to amortise the per-op Python overhead, small
# enough for the working set of a memory-bound kernel to stay in cache.
BATCH_ELEMENTS = 1 << 17

TERMINATORS = ("yield", "condition", "return")


class UnsupportedOpError(NotImplementedError):
    """The module holds an op the interpreter has no rule for."""


class Launch:
    """What every batch of one launch shares: the module, memory, grid, settings and caches."""

    def __init__(self, module: Module, memory: Memory, grid: tuple[int, int, int], max_steps: int) -> None:
        self.module = module
        self.kernel_name = module.kernel.name
        self.memory = memory
        self.grid = grid
        # Iterations one while loop may run before it is stuck (see `progress`).
        self.max_steps = max_steps
        # Per-op constants and lookups, see the rules that fill it.
        self.cache: dict[Any, Any] = {}
        self.scratch = Scratch()


class State:
    """What the rules see while a batch of programs runs: values, the active mask, memory."""

    def __init__(self, launch: Launch, first: int, count: int) -> None:
        self.module = launch.module
        self.kernel_name = launch.kernel_name
        self.memory = launch.memory
        self.grid = launch.grid
        self.cache = launch.cache
        self.scratch = launch.scratch
        self.max_steps = launch.max_steps
        self.first = first
        self.nprog = count
        gx, gy, gz = self.grid
        self.pid: tuple[np.ndarray, ...]
        if gy == gz == 1:
            x = np.arange(first, first + count, dtype=np.int32)
            zero = np.zeros(1, dtype=np.int32)
            self.pid = (x if gx > 1 else x[:1], zero, zero)
        else:
            linear = np.arange(first, first + count, dtype=np.int64)
            coords = (linear % gx, (linear // gx) % gy, linear // (gx * gy))
            # An axis of extent 1 gives every program the same id: keep it uniform.
            self.pid = tuple((c if size > 1 else c[:1]).astype(np.int32) for c, size in zip(coords, self.grid))
        self.active: np.ndarray | None = None
        self.env: dict[Value, Val] = {}
        # Whether a while loop whose programs wait on each other may hand the batch back to the
        # scheduler (`progress.Stalled`): the batch's writes are journaled and its output held.
        self.fallback = False
        # Lines `device_print` holds back until the batch is done (None: print them at once).
        self.held: list[str] | None = None
        # How many while loops the running op is in: atomics then count only writes that change memory.
        self.in_while = 0
        # Facts about arrays of this batch, see `memory.remember`.
        self.memo: dict[tuple[int, str], tuple[np.ndarray, Any]] = {}

    def get(self, v: Value) -> np.ndarray:
        x = self.env[v]
        return x.address() if isinstance(x, Ptr) else x

    def raw(self, v: Value) -> Val:
        return self.env[v]

    def is_used(self, v: Value) -> bool:
        """Whether any op of the module reads `v` (an unused atomic result need not be exact)."""
        used = self.cache.get("used")
        if used is None:
            used = self.cache["used"] = {x for fn in self.module.functions for op in fn.walk() for x in op.operands}
        return v in used

    def program(self, row: int) -> tuple[int, int, int]:
        """The (x, y, z) program id of row `row` of this batch."""
        linear = self.first + row
        gx, gy, _ = self.grid
        return linear % gx, (linear // gx) % gy, linear // (gx * gy)

    def first_active(self) -> int:
        return 0 if self.active is None else int(np.argmax(self.active))

    def error(self, op: Op, message: str) -> KernelRuntimeError:
        where = f"{op.loc.file}:{op.loc.line}" if op.loc is not None else "<unknown location>"
        return KernelRuntimeError(f"kernel '{self.kernel_name}' at {where}: {message}")


RuleFn = Callable[[State, Op], list[Val]]
RULES: OpRegistry[RuleFn] = OpRegistry("interpreter")
RULES.builtin("terminators: `run_block` passes their operands on", *TERMINATORS)
# The ops whose rules read memory (through them a program sees what others wrote), and write it.
READS_MEMORY: set[str] = set()
WRITES_MEMORY: set[str] = set()


def rule(*names: str, reads_memory: bool = False, writes_memory: bool = False) -> Callable[[RuleFn], RuleFn]:
    """Register `fn` as the interpreter rule of the ops `names`, which may read and write memory."""

    add = RULES.register(*names)

    def register(fn: RuleFn) -> RuleFn:
        if reads_memory:
            READS_MEMORY.update(names)
        if writes_memory:
            WRITES_MEMORY.update(names)
        return add(fn)

    return register


def run_block(st: State, block: Block, args: Sequence[Val]) -> list[Val]:
    """Run `block` with its arguments bound to `args`; the values its terminator passes on."""
    env = st.env
    for a, x in zip(block.args, args):
        env[a] = x
    ops = block.ops
    term = ops[-1] if ops and ops[-1].name in TERMINATORS else None
    rules = RULES.rules
    for op in ops[:-1] if term is not None else ops:
        out = rules[op.name](st, op)
        results = op.results
        if len(results) == 1:
            env[results[0]] = out[0]
        else:
            for r, x in zip(results, out):
                env[r] = x
    if term is None:
        return []
    return [env[v] for v in term.operands]


def check_rules(module: Module) -> None:
    """Raise `UnsupportedOpError` naming the first op of `module` the interpreter has no rule for."""
    for fn in module.functions:
        for op in fn.walk():
            if op.name not in RULES and op.name not in TERMINATORS:
                where = f" at {op.loc.file}:{op.loc.line}" if op.loc is not None else ""
                raise UnsupportedOpError(
                    f"the interpreter has no rule for op '{op.name}'{where} (kernel '{module.kernel.name}')"
                )


def batch_size(module: Module, total: int) -> int:
    """How many of `total` programs run at once: about `BATCH_ELEMENTS` elements of the largest tile."""
    largest = 1
    for fn in module.functions:
        for op in fn.walk():
            for v in op.results:
                largest = max(largest, numel(v.type))
            for region in op.regions:
                for a in region.args:
                    largest = max(largest, numel(a.type))
    return max(1, min(total, BATCH_ELEMENTS // largest))


def bind_args(module: Module, memory: Memory, args: Sequence[Any]) -> list[np.ndarray]:
    """The kernel's arguments as values: arrays mapped into `memory` (their addresses) and scalars."""
    kernel = module.kernel
    values: list[np.ndarray] = []
    for i, (param, arg) in enumerate(zip(kernel.args, args)):
        ty = param.type
        if isinstance(ty, PointerType):
            values.append(np.array([memory.add_buffer(i, kernel.arg_names[i], arg, ty)], dtype=np.int64))
        elif isinstance(ty, ScalarType):
            values.append(scalar_array(arg, ty))
        else:
            raise TypeError(f"kernel '{kernel.name}' parameter '{kernel.arg_names[i]}' has type {ty}, not a scalar")
    return values
