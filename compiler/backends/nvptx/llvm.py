"""The LLVM stage: verify the LLVM IR, optimise it at O3 with the new pass manager, emit PTX.

`emit_ptx` runs in this process; `isolate.emit_ptx_isolated` runs the same function in a
worker process, so an LLVM abort (`report_fatal_error`) becomes a Python exception.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import llvmlite.binding as llvm

from .target import TRIPLE, get_target

_lock = threading.Lock()
_initialized = False


class LLVMError(RuntimeError):
    """LLVM rejected the module or crashed on it; the message carries LLVM's diagnostic."""


def _init() -> None:
    global _initialized
    with _lock:
        if not _initialized:
            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            _initialized = True


def llvm_version() -> str:
    return ".".join(map(str, llvm.llvm_version_info))


def emit_ptx(llir: str, arch: str, opt_level: int = 3) -> tuple[str, str]:
    """(optimised LLVM IR, PTX) for the LLVM IR text `llir` on target `arch`."""
    _init()
    target = get_target(arch)
    try:
        module = llvm.parse_assembly(llir)
        module.verify()
    except RuntimeError as e:
        raise LLVMError(f"invalid LLVM IR: {e}") from e
    machine = llvm.Target.from_triple(TRIPLE).create_target_machine(
        cpu=target.arch, features=target.features, opt=opt_level
    )
    module.triple = TRIPLE
    module.data_layout = str(machine.target_data)
    tuning: Any = llvm.create_pipeline_tuning_options(speed_level=opt_level)
    builder = llvm.create_pass_builder(machine, tuning)
    builder.getModulePassManager().run(module, builder)
    optimized = str(module)
    ptx = machine.emit_assembly(module)
    return optimized, ptx


_CALL = re.compile(r"\bcall(?:\.uni)?\b[^;]*?\b(llvm\.[A-Za-z0-9_.]+)")
_EXTERN = re.compile(r"\.extern\s+\.func[^;]*?\b(llvm\.[A-Za-z0-9_.]+)")


def unresolved_intrinsics(ptx: str) -> list[str]:
    """The `llvm.*` functions PTX still calls: intrinsics NVPTX could not lower."""
    return sorted(set(_CALL.findall(ptx)) | set(_EXTERN.findall(ptx)))
