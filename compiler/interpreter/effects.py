"""What a `while` loop can see and change, read off the IR once per loop (`progress` uses it).

- `reads_memory`: the loop holds an op that reads memory (a load or an atomic, here or in a
  function it calls). Only such a loop can wait for another program.
- `blind`: the loop's condition and every op of it that may write memory compute the same
  thing whatever the loop-carried values are (they use none of them, directly or through a
  value, a branch or a nested loop that does). Then an iteration that let no program leave
  and changed no memory will be followed by the same iteration forever: `while
  tl.atomic_cas(lock, 0, 1) == 1: tries += 1` spins on memory alone.

Which ops read or write memory comes from the rules themselves (`rule(..., reads_memory=True)`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..ir.core import Block, Module, Op, Value
from .core import READS_MEMORY, WRITES_MEMORY


def reads_memory(module: Module, cache: dict[Any, Any], op: Op) -> bool:
    """Whether running `op` may read memory."""
    key = ("reads memory", op)
    found = cache.get(key)
    if found is None:
        found = cache[key] = _holds(module, op.walk(), READS_MEMORY, set())
    return bool(found)


def blind(module: Module, cache: dict[Any, Any], loop: Op) -> bool:
    """Whether the while loop `loop` decides whether to go on, and what it writes, without its carried values."""
    key = ("blind", loop)
    found = cache.get(key)
    if found is None:
        found = cache[key] = _blind(module, loop)
    return bool(found)


def _blind(module: Module, loop: Op) -> bool:
    before, after = loop.regions
    tainted: set[Value] = set(before.args)
    if _spread(module, before, tainted):
        return False
    condition = before.ops[-1]
    if condition.operands[0] in tainted:
        return False
    tainted.update(a for a, v in zip(after.args, condition.operands[1:]) if v in tainted)
    return not _spread(module, after, tainted)


def _spread(module: Module, block: Block, tainted: set[Value]) -> bool:
    """Add to `tainted` every value of `block` computed from one in it; whether such an op may write memory."""
    writes = False
    for op in block.ops:
        # An op whose regions use a tainted value (a branch, a nested loop) is tainted as a whole.
        if any(v in tainted for inner in op.walk() for v in inner.operands):
            for inner in op.walk():
                tainted.update(inner.results)
                for region in inner.regions:
                    tainted.update(region.args)
            writes = writes or _holds(module, op.walk(), WRITES_MEMORY, set())
    return writes


def _holds(module: Module, ops: Iterable[Op], names: set[str], seen: set[str]) -> bool:
    """Whether one of `ops`, or of the functions they call, is named in `names`."""
    for op in ops:
        if op.name in names:
            return True
        callee = op.attrs["callee"] if op.name == "call" else None
        if callee is not None and callee not in seen:
            seen.add(callee)
            if _holds(module, module.get(callee).walk(), names, seen):
                return True
    return False
