"""Running a launch: batches of programs as one vector, and one program at a time when they wait.

    from despina.compiler.interpreter import run_kernel
    run_kernel(module, grid=(n // 1024, 1, 1), args=[x, y, out, n])

Programs run in grid order (x fastest, then y, then z) in batches of `core.batch_size`, each
batch as one vector. That is a schedule the GPU could pick as long as no program waits for
another: a program that spins on a lock or a flag of another program of its batch never lets
that one get to the release, which waits at the same point of the kernel or at the loop's
exit for the whole batch (see `progress`). So:

- A kernel with a while loop that reads memory (the only kind that can wait) runs each batch
  of several programs undoably: memory keeps a journal of what each write replaced, and
  `device_print` holds its lines until the batch is done.
- When a while loop of such a batch stops making progress (`progress.Stalled`), the batch is
  undone (memory as before it, its held output dropped) and it and every later program run
  one at a time, in grid order, as Triton's interpreter runs a grid: a program can then wait
  for the programs before it, which have finished. Memory and printed output are all that a
  batch leaves behind, so starting it over applies no effect twice. The switch is logged once,
  at DEBUG level, on this module's logger.
- A program running on its own whose loop is stuck (it waits for a later program, or never
  ends) fails with `KernelRuntimeError` naming the kernel, the loop's file:line and what to do.

Every other kernel keeps no journal: a write costs it a counter increment, and each iteration
of a while loop a few integer operations.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..ir.core import Module
from .core import Launch, State, batch_size, bind_args, check_rules, run_block
from .memory_space import Memory
from .progress import Stalled, max_steps, may_wait

logger = logging.getLogger(__name__)


def run_kernel(module: Module, grid: tuple[int, int, int], args: Sequence[Any]) -> None:
    """Run the kernel of `module` over `grid` on NumPy arrays, as the GPU would.

    `args` line up with the kernel's parameters: a C-contiguous writable array (or None for
    a null pointer) per pointer parameter, written in place; a Python or NumPy scalar per
    scalar parameter. An illegal access, a failed `device_assert` or a while loop that never
    ends (`DESPINA_INTERPRET_MAX_STEPS` bounds its iterations) raises `KernelRuntimeError`
    naming the kernel and the source line. Programs may wait for programs before them in the
    grid (a lock, a flag).

        run_kernel(module, (triton.cdiv(n, 1024), 1, 1), [x, y, out, n])
    """
    kernel = module.kernel
    if len(args) != len(kernel.args):
        raise TypeError(f"kernel '{kernel.name}' takes {len(kernel.args)} arguments, got {len(args)}")
    gx, gy, gz = (int(g) for g in grid)
    if min(gx, gy, gz) < 0:
        raise ValueError(f"grid {grid} has a negative extent")
    check_rules(module)
    memory = Memory()
    values = bind_args(module, memory, args)
    total = gx * gy * gz
    if total == 0:
        return
    batch = batch_size(module, total)
    launch = Launch(module, memory, (gx, gy, gz), max_steps())
    undoable = batch > 1 and may_wait(launch)
    with np.errstate(all="ignore"):
        for first in range(0, total, batch):
            count = min(batch, total - first)
            if not undoable or count == 1:
                run_block(State(launch, first, count), kernel.body, values)
            elif not _run_undoable(launch, first, count, values):
                for program in range(first, total):
                    run_block(State(launch, program, 1), kernel.body, values)
                return


def _run_undoable(launch: Launch, first: int, count: int, values: Sequence[np.ndarray]) -> bool:
    """Run a batch that its loops may stop; False, with memory as before it, when they did."""
    st = State(launch, first, count)
    st.fallback = True
    st.held = []
    memory = launch.memory
    memory.journal = []
    try:
        run_block(st, launch.module.kernel.body, values)
    except Stalled as stall:
        memory.rollback()
        loc = stall.op.loc
        logger.debug(
            "kernel '%s': the programs of the while loop at %s wait on each other (%s); running programs %d to "
            "%d of the grid one at a time, in order",
            launch.kernel_name,
            f"{loc.file}:{loc.line}" if loc is not None else "<unknown location>",
            stall.why,
            first,
            launch.grid[0] * launch.grid[1] * launch.grid[2] - 1,
        )
        return False
    finally:
        # Not undone (it finished, or failed with an error to show): what it did stands.
        if memory.journal is not None:
            memory.journal = None
            if st.held:
                print("\n".join(st.held), flush=True)
    return True
