"""The NumPy interpreter: runs a tile-IR module over a whole launch grid on the CPU.

    from despina.compiler.interpreter import run_kernel
    run_kernel(module, grid=(n // 1024, 1, 1), args=[x, y, out, n])

Programs run in batches, vectorised across the batch (see `core` and `values`), or one at a
time where they wait on each other (see `schedule`); every op has one rule, registered by the
modules imported here.
"""

# Importing the rule modules registers their rules.
from . import atomics, casts, control, debug, elementwise, indexing, inline_asm, libdevice, memory, reduce, shape
from .core import RULES, UnsupportedOpError
from .schedule import run_kernel

__all__ = ["RULES", "UnsupportedOpError", "run_kernel"]
