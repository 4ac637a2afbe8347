"""The LLVM stage: verify the LLVM IR, link libdevice when the kernel calls it, optimise at O3
with the new pass manager, emit PTX.

`emit_ptx` runs in this process; `isolate.emit_ptx_isolated` runs the same function in a
worker process, so an LLVM abort (`report_fatal_error`) becomes a Python exception.

llvmlite is imported on first use, not with this module: a caller that compiles through the
worker never loads LLVM itself. The worker imports this module (and `target`) alone, by path,
without the `despina` package (see `worker`), so keep its imports to the standard library.
"""

from __future__ import annotations

import re
import sys
import threading
from typing import TYPE_CHECKING, Any

from .target import TRIPLE, get_target

if TYPE_CHECKING:
    from llvmlite.binding import ModuleRef

_lock = threading.Lock()
_initialized = False


# The code generator's level (instruction selection, scheduling) is LLVM's "Default", whatever the
# IR pipeline's: on NVPTX "Aggressive" gives the same PTX for our kernels (ptxas schedules anyway)
# and takes 2.6 times as long on a large basic block, such as an unrolled FMA `dot`.
CODEGEN_OPT_LEVEL = 2


class LLVMError(RuntimeError):
    """LLVM rejected the module or crashed on it; the message carries LLVM's diagnostic."""


def initialize() -> None:
    """Import llvmlite and initialize LLVM's targets, once per process."""
    global _initialized
    with _lock:
        if not _initialized:
            import llvmlite.binding as llvm

            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            # 32-bit shared-memory addresses (as Triton's): half the registers for every address
            # of a shared buffer, which tensor-core loops hold many of.
            llvm.set_option("", "--nvptx-short-ptr")
            _initialized = True


# The LLVM version a worker reported (`isolate`), so that a caller that compiles through the worker
# can name it without loading llvmlite: the worker runs this Python, hence this llvmlite.
reported_version: str | None = None


def llvm_version() -> str:
    """The version of the LLVM inside llvmlite ("major.minor.patch")."""
    if reported_version is not None and "llvmlite.binding" not in sys.modules:
        return reported_version
    import llvmlite.binding as llvm

    return ".".join(map(str, llvm.llvm_version_info))


def emit_ptx(llir: str, arch: str, opt_level: int = 3, libdevice: str | None = None) -> tuple[str, str]:
    """(optimised LLVM IR, PTX) for the LLVM IR text `llir` on target `arch`; `libdevice` is the
    path of libdevice.10.bc, linked in when the module calls `__nv_*` functions."""
    initialize()
    import llvmlite.binding as llvm

    target = get_target(arch)
    try:
        module = llvm.parse_assembly(llir)
        module.verify()
    except RuntimeError as e:
        raise LLVMError(f"invalid LLVM IR: {e}") from e
    machine = llvm.Target.from_triple(TRIPLE).create_target_machine(
        cpu=target.arch, features=target.features, opt=min(opt_level, CODEGEN_OPT_LEVEL)
    )
    module.triple = TRIPLE
    module.data_layout = str(machine.target_data)
    if libdevice is not None:
        link_libdevice(module, libdevice)
    tuning: Any = llvm.create_pipeline_tuning_options(speed_level=opt_level)
    builder = llvm.create_pass_builder(machine, tuning)
    builder.getModulePassManager().run(module, builder)
    optimized = str(module)
    ptx = machine.emit_assembly(module)
    return optimized, ptx


def link_libdevice(module: ModuleRef, path: str) -> None:
    """Link libdevice into `module` and make its functions internal, so that O3 inlines the ones
    the kernel calls and drops the rest. Its `__nvvm_reflect` queries are answered by the NVPTX
    pipeline's NVVMReflect pass: with no `nvvm-reflect-ftz` flag, the IEEE (no flush-to-zero)
    variants are chosen."""
    import llvmlite.binding as llvm

    try:
        with open(path, "rb") as f:
            library = llvm.parse_bitcode(f.read())
    except (OSError, RuntimeError) as e:
        raise LLVMError(f"cannot read libdevice at {path}: {e}") from e
    library.triple = module.triple
    library.data_layout = module.data_layout
    defined = {f.name for f in module.functions if not f.is_declaration}
    try:
        module.link_in(library)
    except RuntimeError as e:
        raise LLVMError(f"linking libdevice ({path}) failed: {e}") from e
    for fn in module.functions:
        if not fn.is_declaration and fn.name not in defined:
            fn.linkage = llvm.Linkage.internal


_NAME = r"(llvm\.[A-Za-z0-9_.]+|__nv_\w+|__nvvm_\w+)"
_CALL = re.compile(r"\bcall(?:\.uni)?\b[^;]*?\b" + _NAME)
_EXTERN = re.compile(r"\.extern\s+\.func[^;]*?\b" + _NAME)
_DEFINED = re.compile(r"^(?![ \t]*\.extern)[^\n]*\.func\s+(?:\([^)]*\)\s*)?" + _NAME, re.M)


def unresolved_intrinsics(ptx: str) -> list[str]:
    """The `llvm.*`, `__nv_*` and `__nvvm_*` functions PTX still calls: intrinsics NVPTX could not
    lower, and libdevice functions that were not linked."""
    called = set(_CALL.findall(ptx)) - set(_DEFINED.findall(ptx))
    return sorted(called | set(_EXTERN.findall(ptx)))
