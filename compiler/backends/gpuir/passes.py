"""The GPU-IR pipeline: layout assignment, then one list of named passes, each checked by the verifier.

    gpu = build_gpuir(module, options, has_wgmma=True)

makes the GPU IR of `module`'s kernel (`assign.assign_layouts`: every tile value's type gets an
encoding, dots are planned for tensor cores) and runs `GPU_PASSES` over it in order. The verifier
runs after assignment and after every pass, and names the pass whose output breaks the IR.
"""

from __future__ import annotations

from collections.abc import Callable

from ...ir.core import Module
from ...options import CompileOptions
from .assign import GpuFunction, assign_layouts
from .hoist import hoist_invariant_converts
from .pipeline import plan_pipelines
from .specialize import specialize_warps
from .staging import stage_wgmma_operands
from .verifier import verify_gpuir

GpuPass = Callable[[GpuFunction, CompileOptions], None]

GPU_PASSES: list[tuple[str, GpuPass]] = [
    ("hoist_invariant_converts", lambda gpu, options: hoist_invariant_converts(gpu)),
    ("plan_pipelines", lambda gpu, options: plan_pipelines(gpu, options.num_stages)),
    ("specialize_warps", lambda gpu, options: specialize_warps(gpu)),
    ("stage_wgmma_operands", lambda gpu, options: stage_wgmma_operands(gpu)),
]


def run_gpu_passes(gpu: GpuFunction, options: CompileOptions) -> GpuFunction:
    """Run `GPU_PASSES` over `gpu` in place, verifying after each; returns `gpu`."""
    for name, gpu_pass in GPU_PASSES:
        gpu_pass(gpu, options)
        verify_gpuir(gpu, name)
    return gpu


def build_gpuir(module: Module, options: CompileOptions, has_wgmma: bool = False,
                register_a_in_flight: bool = True) -> GpuFunction:
    """The GPU IR of `module`'s kernel with `options.num_warps` warps, every pass run (`module` is not
    changed); with `has_wgmma` (an sm_90a target) the dots that fit run on wgmma. `register_a_in_flight`:
    see `GpuFunction`."""
    gpu = assign_layouts(module, options.num_warps, has_wgmma)
    gpu.register_a_in_flight = register_a_in_flight
    verify_gpuir(gpu, "assign_layouts")
    return run_gpu_passes(gpu, options)
