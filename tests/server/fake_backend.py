"""A stand-in for the NVPTX backend with its interface (`compile_module` -> `.asm`, `.metadata`).

The daemon tests run on CPU-only machines and need compilations that are fast, deterministic and
steerable: module attributes make it sleep (`fake_sleep` seconds), allocate (`fake_alloc` bytes), fail
(`fake_fail`), fail as a backend bug would (`fake_bug`) or kill its own worker process (`fake_crash`), change the nvJitLink version it reports (`fake_nvjitlink`, "12.8"
by default) or report ptxas as the cubin's assembler (`fake_ptxas`: its version), add a line to its PTX (`fake_ptx`) or name the kernel in its metadata otherwise than the IR can
(`fake_name`: any text, as the viewer's escaping tests need). Its PTX is a valid empty kernel declaring
`.version 8.7`, as the NVPTX backend's does.
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
from dataclasses import dataclass
from typing import Any

from despina.compiler.backends.errors import BackendError
from despina.compiler.ir.core import Module
from despina.compiler.ir.printer import print_module
from despina.compiler.options import DEFAULTS, CompileOptions


@dataclass
class FakeKernel:
    asm: dict[str, Any]
    metadata: dict[str, Any]


def compile_module(module: Module, target: str = "sm_90", options: CompileOptions = DEFAULTS) -> FakeKernel:
    name = module.kernel.name
    num_warps = options.num_warps
    if "fake_sleep" in module.attrs:
        time.sleep(float(module.attrs["fake_sleep"]))
    if "fake_alloc" in module.attrs:  # as a huge kernel would: bytes held while compiling
        held = bytearray(int(module.attrs["fake_alloc"]))
        del held
    if module.attrs.get("fake_crash"):
        os.kill(os.getpid(), signal.SIGKILL)
    if module.attrs.get("fake_fail"):
        raise BackendError("the fake backend refuses this kernel", name)
    if module.attrs.get("fake_bug"):
        raise RuntimeError("the fake backend tripped over its own bug")
    text = print_module(module)
    extra = str(module.attrs.get("fake_ptx", ""))
    ptx = (f"// fake PTX for {name} on {target}, {num_warps} warps\n.version 8.7\n.target {target}\n.address_size 64\n\n"
           f".visible .entry {name}()\n{{\n{extra}\n\tret;\n}}\n")
    cubin = hashlib.sha256((text + target).encode()).digest() * 64
    asm = {"ir": text, "gpuir": text, "llir": f"; fake LLVM IR for {name}\n", "ptx": ptx, "cubin": cubin}
    metadata = {"name": str(module.attrs.get("fake_name", name)), "num_warps": num_warps, "shared": 0, "pid": os.getpid(), "ptx_version": "8.7",
                "nvjitlink_version": str(module.attrs.get("fake_nvjitlink", "12.8"))}
    if module.attrs.get("fake_ptxas"):
        metadata.update(assembler="ptxas", assembler_version=str(module.attrs["fake_ptxas"]))
    return FakeKernel(asm, metadata)
