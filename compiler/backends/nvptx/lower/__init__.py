"""GPU IR -> LLVM IR for NVPTX: `lower(gpu, target)` returns the LLVM module (llvmlite IR)
and the dynamic shared memory it needs. Rules live in one file per concept and register
themselves with `@lowering`; importing this package imports them all."""

from __future__ import annotations

import llvmlite.ir as ir

from ...gpuir import GpuFunction
from ..target import Target
from . import atomics, constants, control, debug, dot, elementwise, math, memory, reduce, scan, shapes  # noqa: F401
from .context import Lowering
from .registry import RULES, lowering


def lower(gpu: GpuFunction, target: Target) -> tuple[ir.Module, int]:
    """The kernel as an LLVM module, and the bytes of dynamic shared memory it needs."""
    ctx = Lowering(gpu, target)
    module = ctx.run()
    return module, ctx.smem_bytes


__all__ = ["RULES", "Lowering", "lower", "lowering"]
