"""The NVPTX backend: tile IR -> GPU IR -> LLVM IR -> PTX -> cubin.

    from despina.compiler.backends.nvptx import compile_module
    kernel = compile_module(module, target="sm_90", num_warps=4)
    kernel.asm["ptx"], kernel.asm["cubin"], kernel.metadata["shared"]

Kernel ABI (what a launcher needs to call the cubin):

- The cubin holds one entry function named `metadata["name"]` (the kernel's name).
- Its parameters are the kernel function's arguments, in the order of `module.kernel.args`,
  with nothing added or removed, each packed at its natural size and alignment (as a C struct
  of: pointer -> 8-byte device address; int1 -> 1 byte, 0 or 1; int8/uint8 -> 1; int16,
  fp16, bf16 -> 2 (fp16/bf16 as their raw bits); int32, uint32, fp32 -> 4; int64, uint64,
  fp64 -> 8). `cuLaunchKernel` with one pointer per argument to a value of that size works.
- Launch with a 1-D block of `metadata["num_threads"]` (= 32 * num_warps) threads; the grid is
  the kernel's program grid (up to 3-D, `program_id(axis)` is `blockIdx.{x,y,z}`).
- Pass `metadata["shared"]` bytes of dynamic shared memory (0 if none); above 48 KiB set
  `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` first.

`compile_module` raises `CompilationError` for kernels it cannot compile (naming the op and its
source line), `LLVMError` when LLVM rejects or crashes on the module, `LinkError` when
nvJitLink rejects the PTX.
"""

from ..errors import CompilationError
from .compiler import CompiledKernel, compile_module
from .link import LinkError, Resources, link_cubin, parse_info_log
from .llvm import LLVMError, unresolved_intrinsics
from .target import PTX_VERSION, TARGETS, Target, get_target

__all__ = [
    "PTX_VERSION",
    "TARGETS",
    "CompilationError",
    "CompiledKernel",
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
