"""Line-table debug info, as nvcc's `-lineinfo` gives: every LLVM instruction lowered from an op
carries a `!dbg` location (the op's source line and column), so that the PTX gets `.file`/`.loc`
directives and the cubin a line table (nvJitLink `-lineinfo`) that nvdisasm, Nsight Compute and
cuda-gdb read. Nothing else: no variables, no types, no DWARF sections in the PTX (LLVM's
`DebugDirectivesOnly`), and the instructions are the same as without it.

Files are named by the shortest tail of their path that tells them apart (`kernels.py`, or
`a/kernels.py` and `b/kernels.py` for two of that name): the PTX and the cubin name no checkout, so
one kernel compiled from two checkouts, which is one cache key, is one cubin too.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ....ir.core import Function, Loc
from ....ir.filenames import path_parts, short_names

PRODUCER = "despina"


class DebugInfo:
    """The compile unit, one `DISubprogram` for the kernel, and a `DILocation` per source position."""

    def __init__(self, module: ir.Module, kernel: Function, func: ir.Function) -> None:
        self.module = module
        paths = [kernel.loc.file] if kernel.loc else []
        paths += [op.loc.file for op in kernel.walk() if op.loc is not None]
        self.names = short_names(paths)
        self.files: dict[str, ir.DIValue] = {}
        main = self.file(paths[0] if paths else "<unknown>")
        self.unit = module.add_debug_info("DICompileUnit", {
            "language": ir.DIToken("DW_LANG_Python"),
            "file": main,
            "producer": PRODUCER,
            "isOptimized": True,
            "runtimeVersion": 0,
            "emissionKind": ir.DIToken("DebugDirectivesOnly"),
        }, is_distinct=True)
        line = kernel.loc.line if kernel.loc else 0
        kind = module.add_debug_info("DISubroutineType", {"types": module.add_metadata([])})
        self.scope = module.add_debug_info("DISubprogram", {
            "name": kernel.name,
            "file": main,
            "line": line,
            "type": kind,
            "scopeLine": line,
            "spFlags": ir.DIToken("DISPFlagDefinition | DISPFlagOptimized"),
            "unit": self.unit,
        }, is_distinct=True)
        self.main = paths[0] if paths else None
        func.set_metadata("dbg", self.scope)
        module.add_named_metadata("llvm.dbg.cu", self.unit)
        flags = module.add_named_metadata("llvm.module.flags")
        for name, value in (("Debug Info Version", 3), ("Dwarf Version", 2)):
            flags.add(module.add_metadata([ir.IntType(32)(2), name, ir.IntType(32)(value)]))
        self.locations: dict[Loc, ir.DIValue] = {}

    def file(self, path: str) -> ir.DIValue:
        if path not in self.files:
            name = self.names.get(path) or "/".join(path_parts(path)[-1:])
            self.files[path] = self.module.add_debug_info("DIFile", {"filename": name, "directory": ""})
        return self.files[path]

    def location(self, loc: Loc | None) -> ir.DIValue | None:
        """The `!dbg` of an instruction lowered from an op at `loc` (None: the op has no location)."""
        if loc is None:
            return None
        found = self.locations.get(loc)
        if found is None:
            scope = self.scope
            if loc.file != self.main:  # a helper's op from another file, inlined into the kernel
                scope = self.module.add_debug_info("DILexicalBlockFile", {
                    "scope": self.scope, "file": self.file(loc.file), "discriminator": 0})
            found = self.locations[loc] = self.module.add_debug_info(
                "DILocation", {"line": loc.line, "column": loc.col, "scope": scope})
        return found
