"""The NVPTX pipeline: tile IR -> GPU IR -> LLVM IR -> PTX -> cubin, every stage kept."""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, field
from typing import Any

from ...ir.core import Module
from ...ir.printer import print_module_with_locs
from ...options import CompileOptions
from ..errors import BackendError
from ..gpuir.passes import build_gpuir
from ..gpuir.printer import print_gpuir_with_locs
from .isolate import emit_ptx_isolated
from .lines import line_table
from .link import kernel_resources, link_cubin, nvjitlink_version, ptxas_warnings
from .llvm import emit_ptx, llvm_version, unresolved_intrinsics
from .lower import lower
from .occupancy import Link, more_ctas
from .ptxas import assemble
from .ptxas import version as ptxas_version
from .sass import Stages
from .target import PTX_VERSION, Target, get_target
from .toolkit import LIBDEVICE_PREFIX, find_libdevice, find_ptxas


@dataclass
class NvptxKernel:
    """A kernel the NVPTX backend compiled: `asm` holds every stage's output (`ir`, `gpuir`, `llir`, `ptx` as
    text, `cubin` as bytes, and `sass` as text, disassembled on first access, when nvdisasm is
    installed) and `lines`, the source line of each line of the text stages but SASS (JSON, see
    `lines.line_table`); `metadata` what a launcher needs (`name`, `num_warps`, `shared` bytes of dynamic
    shared memory), the compile options (`CompileOptions.as_dict`) and what the kernel uses per the cubin and ptxas' report (`registers`, spills,
    `stack`), and ptxas' numbered findings (`ptxas_warnings`: C7514, wgmma serialized, and the like)."""

    name: str
    asm: Stages
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def cubin(self) -> bytes:
        data = self.asm["cubin"]
        assert isinstance(data, bytes)
        return data


def _isolate_default() -> bool:
    return os.environ.get("DESPINA_LLVM_ISOLATE", "1") not in ("0", "false", "no")


@dataclass
class _Emitted:
    """The kernel lowered to PTX once: its GPU IR (with the source lines of its lines), optimized LLVM IR,
    PTX, bytes of dynamic shared memory and launch metadata (`lower.lower`), and whether a pipelined
    loop leaves a product that takes A from registers in flight (`gpuir.GpuFunction.register_a_in_flight`)."""

    gpuir: str
    gpuir_locs: list[Any]
    llir: str
    ptx: str
    shared: int
    launch: dict[str, Any]
    register_a_in_flight: bool


def _emit(module: Module, options: CompileOptions, tgt: Target, whole_program: bool, line_info: bool,
          use_worker: bool, register_a_in_flight: bool = True) -> _Emitted:
    name = module.kernel.name
    gpu = build_gpuir(module, options, tgt.has("wgmma"), register_a_in_flight)
    gpuir, gpuir_locs = print_gpuir_with_locs(gpu)
    llmodule, shared, launch = lower(gpu, tgt, line_info, options.enable_fp_fusion, options.maxnreg, whole_program)
    if shared > tgt.max_shared:
        raise BackendError(
            f"the kernel needs {shared} bytes of shared memory with num_warps={options.num_warps}, "
            f"num_stages={options.num_stages}; {tgt.arch} allows at most {tgt.max_shared} a block: use fewer "
            "num_stages or smaller blocks",
            name,
            module.kernel.loc,
        )
    raw = str(llmodule)
    libdevice = find_libdevice() if any(n.startswith(LIBDEVICE_PREFIX) for n in llmodule.globals) else None
    optimized, ptx = (emit_ptx_isolated if use_worker else emit_ptx)(raw, tgt.arch, libdevice=libdevice)
    missing = unresolved_intrinsics(ptx)
    if missing:
        raise BackendError(
            f"the PTX still calls {', '.join(missing)}: LLVM's NVPTX backend cannot lower these "
            "on its own; the op that produced them needs a lowering rule (or libdevice, from nvidia-nvvm)",
            name,
        )
    if libdevice is not None:
        launch = {**launch, "libdevice": libdevice}
    in_flight = any(op.attrs.get("operand_a") == "registers" for plan in gpu.pipelines.values()
                    for op in plan.async_dots)
    return _Emitted(gpuir, gpuir_locs, optimized, ptx, shared, launch, in_flight)


def compile_module(
    module: Module,
    target: str = "sm_90",
    options: CompileOptions | None = None,
    *,
    isolate: bool | None = None,
    line_info: bool = True,
    **values: Any,
) -> NvptxKernel:
    """Compile `module`'s kernel for `target` (sm_80, sm_86, sm_89, sm_90, sm_90a) with `options`, or
    with the `CompileOptions` fields given as keywords (`num_warps=8`), the defaults for the others.

    `isolate` (default: on, `DESPINA_LLVM_ISOLATE=0` turns it off) runs LLVM in a worker
    process so that an LLVM abort raises here instead of killing the caller. `line_info` (default: on,
    as nvcc's `-lineinfo`) gives the PTX `.loc` directives and the cubin a line table; the code is the
    same without it.

        >>> k = compile_module(module, target="sm_90", num_warps=4)
        >>> k.metadata["shared"], k.asm["ptx"][:80]
    """
    tgt = get_target(target)
    name = module.kernel.name
    if options is None:
        options = CompileOptions.make(name, values)
    elif values:
        raise TypeError(f"compile_module takes options or the options' fields as keywords, not both: {sorted(values)}")
    else:
        options.check(name)
    ptxas = find_ptxas() if tgt.has("setmaxnreg") else None
    use_worker = _isolate_default() if isolate is None else isolate
    asm = Stages()
    asm["ir"], ir_locs = print_module_with_locs(module)
    first = _emit(module, options, tgt, ptxas is not None, line_info, use_worker)
    # A kernel whose warpgroups trade registers is assembled by ptxas as a whole program (`ptxas.py`).
    link: Link = link_cubin
    assembler = ("nvJitLink", nvjitlink_version())
    if ptxas is not None and "setmaxnreg." in first.ptx:
        link, assembler = functools.partial(assemble, path=ptxas), ("ptxas", ptxas_version(ptxas))
    cubin, log = link(first.ptx, tgt.arch, f"{name}.ptx")
    chosen, ptx = first, first.ptx
    # Linked again with `.minnctapersm` when that gives one more CTA per SM without spills, unless
    # the caller chose the register budget (maxnreg); a kernel that then shares the SM waits for its
    # register-A products where it issues them (`occupancy.more_ctas`).
    if options.maxnreg is None:
        beside: list[_Emitted] = []

        def sharing() -> str:
            beside.append(_emit(module, options, tgt, ptxas is not None, line_info, use_worker, False))
            return beside[0].ptx

        ptx, cubin, log = more_ctas(first.ptx, cubin, log, tgt, name, first.launch["num_threads"], first.shared, link,
                                    sharing if first.register_a_in_flight else None)
        if beside and ptx is not first.ptx:
            chosen = beside[0]
    asm["gpuir"], asm["llir"], asm["ptx"], asm["cubin"] = chosen.gpuir, chosen.llir, ptx, cubin
    asm["lines"] = json.dumps(line_table(module, ir_locs, chosen.gpuir_locs, chosen.llir, ptx))
    res = kernel_resources(cubin, log, name)
    metadata: dict[str, Any] = {
        "name": name,
        "target": tgt.arch,
        **options.as_dict(),
        "shared": chosen.shared,
        "registers": res.registers,
        "spill_stores": res.spill_stores,
        "spill_loads": res.spill_loads,
        "stack": res.stack,
        "ptx_version": "{}.{}".format(*PTX_VERSION),
        "llvm_version": llvm_version(),
        "nvjitlink_version": nvjitlink_version(),
        "assembler": assembler[0],  # what made the cubin from the PTX, and its version
        "assembler_version": assembler[1],
        "link_log": log,
        "ptxas_warnings": ptxas_warnings(log),
    }
    metadata.update(chosen.launch)  # `prints`, `asserts`, `num_threads`: what a launch must do, and with how many threads
    return NvptxKernel(name, asm, metadata)
