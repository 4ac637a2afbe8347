"""The NVPTX backend: tile IR -> GPU IR -> LLVM IR -> PTX -> cubin.

    from despina.compiler.backends.nvptx import compile_module
    kernel = compile_module(module, target="sm_90", num_warps=4)
    kernel.asm["ptx"], kernel.asm["cubin"], kernel.metadata["shared"]

Kernel ABI (what a launcher needs to call the cubin):

- The cubin holds one entry function named `metadata["name"]` (the kernel's name).
- Its parameters are the kernel function's arguments, in the order of `module.kernel.args`,
  with nothing removed, each packed at its natural size and alignment (as a C struct
  of: pointer -> 8-byte device address; int1 -> 1 byte, 0 or 1; int8/uint8 -> 1; int16,
  fp16, bf16 -> 2 (fp16/bf16 as their raw bits); int32, uint32, fp32 -> 4; int64, uint64,
  fp64 -> 8). `cuLaunchKernel` with one pointer per argument to a value of that size works.
- Then one 128-byte `CUtensorMap` (64-byte aligned) per entry of `metadata["tensor_maps"]`, when
  there is that key: encode each with `cuTensorMapEncodeTiled` from the arguments and constants
  the entry names (`gpuir/tma.py`, `TensorMap.as_metadata`: the element type, the base, shape and
  strides in elements, outermost dimension first, the box, the swizzle and the fill).
- Launch with a 1-D block of `metadata["num_threads"]` (= 32 * num_warps) threads; the grid is
  the kernel's program grid (up to 3-D, `program_id(axis)` is `blockIdx.{x,y,z}`).
- Pass `metadata["shared"]` bytes of dynamic shared memory (0 if none); above 48 KiB set
  `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` first.
- `metadata["prints"]`: the kernel calls `vprintf`, whose output reaches the host only at a
  synchronization (the runtime waits for such a launch and flushes stdout).
- `metadata["asserts"]`: the kernel's `device_assert`s in index order (`message`, `file`, `line`,
  `shape` of the condition). When there is one, the module has a zero-initialized global
  `__despina_assert` of six u32: failed (0 while none), the index of the assertion, the program
  id x, y, z and the row-major index of the false element. The first thread to fail claims it
  (compare-and-swap on `failed`) and fills it, then its warp exits: no trap, the context stays
  usable. After the launch, read it with cuModuleGetGlobal, report a failure and zero it.

`compile_module` raises `BackendError` (a `despina.CompilationError`) for kernels it cannot compile (naming the op and its
source line), `LLVMError` when LLVM rejects or crashes on the module, `LinkError` when
nvJitLink rejects the PTX.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..errors import BackendError
    from .compiler import NvptxKernel, compile_module
    from .link import LinkError, Resources, link_cubin, parse_info_log
    from .llvm import LLVMError, unresolved_intrinsics
    from .target import PTX_VERSION, TARGETS, Target, get_target

# Imported on first access (PEP 562), so that `isolate` can start the LLVM worker before the rest
# of the backend (the lowering rules, GPU IR) is imported: see `isolate.prestart`.
_EXPORTS = {
    "BackendError": "..errors",
    "NvptxKernel": ".compiler",
    "compile_module": ".compiler",
    "LinkError": ".link",
    "Resources": ".link",
    "link_cubin": ".link",
    "parse_info_log": ".link",
    "LLVMError": ".llvm",
    "unresolved_intrinsics": ".llvm",
    "PTX_VERSION": ".target",
    "TARGETS": ".target",
    "Target": ".target",
    "get_target": ".target",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__all__ = [
    "PTX_VERSION",
    "TARGETS",
    "BackendError",
    "NvptxKernel",
    "LLVMError",
    "LinkError",
    "Resources",
    "Target",
    "compile_module",
    "get_target",
    "link_cubin",
    "parse_info_log",
    "unresolved_intrinsics",
]
