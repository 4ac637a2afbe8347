"""Compile every module the JIT builds to cubins for sm_80 and sm_90 as well (CPU-only: nvJitLink)."""

from __future__ import annotations

from typing import Any

import pytest

from despina.compiler.backends.nvptx import compile_module
from despina.compiler.ir.printer import print_module
from despina.jit import JITFunction

TARGETS = ("sm_80", "sm_90")
_COMPILED: set[tuple[str, int]] = set()


def compile_every_target(module: Any, num_warps: int) -> None:
    """Link `module` to a cubin for every target, once per distinct module and warp count."""
    key = (print_module(module), num_warps)
    if key in _COMPILED:
        return
    for target in TARGETS:
        kernel = compile_module(module, target=target, num_warps=num_warps)
        assert kernel.cubin[:4] == b"\x7fELF", f"{module.kernel.name} for {target}: not a cubin"
    _COMPILED.add(key)


def also_compile_to_cubins(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on (in this test), every module `JITFunction.ir` returns is also compiled to cubins."""
    build = JITFunction.ir

    def ir_and_cubins(self: JITFunction, spec: Any, options: Any) -> Any:
        module = build(self, spec, options)
        compile_every_target(module, options.num_warps)
        return module

    monkeypatch.setattr(JITFunction, "ir", ir_and_cubins)
