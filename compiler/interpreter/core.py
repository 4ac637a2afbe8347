"""The interpreter's driver: the rule registry, the per-batch state and `run_kernel`.

A batch of programs runs at once, every value holding one row per program (see `values`).
The driver is a plain loop over a block's ops that calls the op's rule; control flow
(`control`) keeps an *active mask* of the programs that are executing a region, which the
rules with effects (memory, atomics, print, assert) honour.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import KernelRuntimeError
from ..ir.core import Block, Module, Op, Value
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
    """What every batch of one launch shares: the module, memory, grid and caches."""

    def __init__(self, module: Module, memory: Memory, grid: tuple[int, int, int]) -> None:
        self.module = module
        self.kernel_name = module.kernel.name
        self.memory = memory
        self.grid = grid
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
RULES: dict[str, RuleFn] = {}


def rule(*names: str) -> Callable[[RuleFn], RuleFn]:
    """Register `fn` as the interpreter rule of the ops `names`."""

    def register(fn: RuleFn) -> RuleFn:
        for name in names:
            RULES[name] = fn
        return fn

    return register


def run_block(st: State, block: Block, args: Sequence[Val]) -> list[Val]:
    """Run `block` with its arguments bound to `args`; the values its terminator passes on."""
    env = st.env
    for a, x in zip(block.args, args):
        env[a] = x
    ops = block.ops
    term = ops[-1] if ops and ops[-1].name in TERMINATORS else None
    for op in ops[:-1] if term is not None else ops:
        out = RULES[op.name](st, op)
        results = op.results
        if len(results) == 1:
            env[results[0]] = out[0]
        else:
            for r, x in zip(results, out):
                env[r] = x
    if term is None:
        return []
    return [env[v] for v in term.operands]


def _check_rules(module: Module) -> None:
    for fn in module.functions:
        for op in fn.walk():
            if op.name not in RULES and op.name not in TERMINATORS:
                where = f" at {op.loc.file}:{op.loc.line}" if op.loc is not None else ""
                raise UnsupportedOpError(
                    f"the interpreter has no rule for op '{op.name}'{where} (kernel '{module.kernel.name}')"
                )


def _batch_size(module: Module, total: int) -> int:
    largest = 1
    for fn in module.functions:
        for op in fn.walk():
            for v in op.results:
                largest = max(largest, numel(v.type))
            for region in op.regions:
                for a in region.args:
                    largest = max(largest, numel(a.type))
    return max(1, min(total, BATCH_ELEMENTS // largest))


def _bind_args(module: Module, memory: Memory, args: Sequence[Any]) -> list[np.ndarray]:
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


def run_kernel(module: Module, grid: tuple[int, int, int], args: Sequence[Any]) -> None:
    """Run the kernel of `module` over `grid` on NumPy arrays, as the GPU would.

    `args` line up with the kernel's parameters: a C-contiguous writable array (or None for
    a null pointer) per pointer parameter, written in place; a Python or NumPy scalar per
    scalar parameter. An illegal access or a failed `device_assert` raises
    `KernelRuntimeError` naming the kernel and the source line.

        run_kernel(module, (triton.cdiv(n, 1024), 1, 1), [x, y, out, n])
    """
    kernel = module.kernel
    if len(args) != len(kernel.args):
        raise TypeError(f"kernel '{kernel.name}' takes {len(kernel.args)} arguments, got {len(args)}")
    gx, gy, gz = (int(g) for g in grid)
    if min(gx, gy, gz) < 0:
        raise ValueError(f"grid {grid} has a negative extent")
    _check_rules(module)
    memory = Memory()
    values = _bind_args(module, memory, args)
    total = gx * gy * gz
    if total == 0:
        return
    batch = _batch_size(module, total)
    launch = Launch(module, memory, (gx, gy, gz))
    with np.errstate(all="ignore"):
        for first in range(0, total, batch):
            run_block(State(launch, first, min(batch, total - first)), kernel.body, values)
