"""GPU IR -> LLVM IR for NVPTX: `lower(gpu, target)` returns the LLVM module (llvmlite IR), the
dynamic shared memory it needs and what its launcher must know of its prints and asserts. Rules
live in one file per concept and register themselves with `@lowering`; importing this package
imports them all."""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from ...gpuir import GpuFunction
from ..target import Target
from . import (  # noqa: F401
    atomics,
    buffers,
    constants,
    control,
    debug,
    dot,
    elementwise,
    indexing,
    inline_asm,
    math,
    memory,
    reduce,
    scan,
    select,
    shapes,
    specialize,
    tma,
)
from .context import Lowering
from .registry import RULES, lowering


def lower(gpu: GpuFunction, target: Target, line_info: bool = True, fp_fusion: bool = True,
          maxnreg: int | None = None, whole_program: bool = False) -> tuple[ir.Module, int, dict[str, Any]]:
    """The kernel as an LLVM module, the bytes of dynamic shared memory it needs, and what its launcher
    must know: its prints and asserts (`prints`: whether it calls vprintf; `asserts`: its device_asserts,
    indexed as the `__despina_assert` record names them), the tensor maps it takes after its arguments
    (`tensor_maps`, when it has any: `gpuir.tma.TensorMap.as_metadata`), and the threads a block launches
    with (`num_threads`: a warp-specialized kernel's producer warps too). With `line_info`, every
    instruction carries the source line of the op it came from (`debuginfo`). `fp_fusion` and `maxnreg`:
    see `Lowering`. A warp-specialized kernel's `setmaxnreg` says whether its producer gives registers to
    the consumers (`specialize.rebalance`), which only a `whole_program` assembler honours."""
    ctx = Lowering(gpu, target, line_info, fp_fusion, maxnreg)
    if ctx.specialized is not None:
        specialize.split(ctx)
    module = ctx.run()
    launch: dict[str, Any] = {"prints": ctx.prints, "asserts": ctx.asserts}
    if ctx.specialized is not None:
        launch["setmaxnreg"] = specialize.rebalance(ctx, ctx.smem_bytes, whole_program)
    launch["num_threads"] = ctx.block_threads
    if ctx.tensor_map_metadata:
        launch["tensor_maps"] = ctx.tensor_map_metadata
    return module, ctx.smem_bytes, launch


__all__ = ["RULES", "Lowering", "lower", "lowering"]
