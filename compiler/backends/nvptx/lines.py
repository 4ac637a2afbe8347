"""Which source line each line of each stage came from: the data of a viewer that links a kernel's
source to its tile IR, GPU IR, LLVM IR, PTX and SASS both ways.

    table = line_table(module, ir_locs, gpuir_locs, llir, ptx)   # what asm["lines"] holds, as JSON
    table["stages"]["ptx"]   # {"57": 9, ...}: PTX line 57 (1-based) came from source line 9

The tile IR and GPU IR maps come from their printers (the op each line prints); the LLVM IR map
from its `!dbg` locations, the PTX map from its `.loc` directives and the SASS map from nvdisasm's
line annotations (`sass.disassemble_lines`), all three written from the line-table debug info the
lowering attaches (`lower/debuginfo.py`). A map holds the lines of the kernel's own source file (the
file of `table["source"]`, else of the kernel function); lines from other files (a helper defined
elsewhere) map to nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import PurePath
from typing import Any

from ...ir.core import Loc, Module
from ...ir.filenames import path_parts

LineMap = dict[int, int]


def source_file(module: Module) -> str | None:
    """The file the maps point into: the one whose text the module carries, else the kernel's."""
    if module.source is not None:
        return module.source.file
    return module.kernel.loc.file if module.kernel.loc else None


def names_file(name: str, path: str) -> bool:
    """Whether `name`, a file as the debug info names it (the tail of its path that tells it apart,
    `lower/debuginfo.py`), is `path`."""
    tail = PurePath(name).parts
    return bool(tail) and path_parts(path)[-len(tail):] == tail


def loc_lines(locs: Iterable[Loc | None], path: str) -> LineMap:
    """Line number (1-based) -> source line, from a printer's per-line locations."""
    return {i: loc.line for i, loc in enumerate(locs, 1) if loc is not None and loc.file == path and loc.line}


_MD_FILE = re.compile(r'^!(\d+) = !DIFile\(filename: "((?:[^"\\]|\\.)*)"', re.M)
_MD_SCOPE = re.compile(r"^!(\d+) = (?:distinct )?!(?:DISubprogram|DILexicalBlockFile)\(.*?\bfile: !(\d+)", re.M)
_MD_LOC = re.compile(r"^!(\d+) = (?:distinct )?!DILocation\(line: (\d+)(?:, column: \d+)?, scope: !(\d+)", re.M)
_DBG = re.compile(r", !dbg !(\d+)")


def llir_lines(llir: str, path: str) -> LineMap:
    """LLVM IR line -> source line, from each instruction's `!dbg` location."""
    files = {n for n, name in _MD_FILE.findall(llir) if names_file(_unescape(name), path)}
    scopes = {n for n, file in _MD_SCOPE.findall(llir) if file in files}
    where = {n: int(line) for n, line, scope in _MD_LOC.findall(llir) if scope in scopes}
    out: LineMap = {}
    for i, text in enumerate(llir.splitlines(), 1):
        if text.startswith("  ") and (dbg := _DBG.search(text)) and dbg.group(1) in where:
            out[i] = where[dbg.group(1)]
    return out


def _unescape(name: str) -> str:
    """An LLVM metadata string as it was (`\\22` for a quote, `\\5C` for a backslash)."""
    return re.sub(r"\\([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), name)


_PTX_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"', re.M)
_PTX_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)")


def ptx_lines(ptx: str, path: str) -> LineMap:
    """PTX line -> source line: each instruction belongs to the `.loc` before it."""
    files = {n for n, name in _PTX_FILE.findall(ptx) if names_file(name, path)}
    out: LineMap = {}
    current = 0
    for i, text in enumerate(ptx.splitlines(), 1):
        if loc := _PTX_LOC.match(text):
            current = int(loc.group(2)) if loc.group(1) in files else 0
        elif current and _is_instruction(text.strip()):
            out[i] = current
    return out


def _is_instruction(text: str) -> bool:
    return bool(text) and not text.startswith((".", "//", "{", "}")) and not text.endswith(":")


def sass_lines(annotated: Iterable[tuple[int, str, int]], path: str) -> LineMap:
    """SASS line -> source line from `(SASS line, file, source line)` triples (`sass.disassemble_lines`)."""
    return {i: line for i, name, line in annotated if line and names_file(name, path)}


def line_table(module: Module, ir_locs: list[Loc | None], gpuir_locs: list[Loc | None], llir: str,
               ptx: str) -> dict[str, Any]:
    """`{"source": {"file", "first_line", "text"} or None, "stages": {stage: {line: source line}}}`."""
    source = module.source
    text = None if source is None else {"file": source.file, "first_line": source.first_line, "text": list(source.lines)}
    path = source_file(module)
    if path is None:
        return {"source": text, "stages": {}}
    stages = {
        "ir": loc_lines(ir_locs, path),
        "gpuir": loc_lines(gpuir_locs, path),
        "llir": llir_lines(llir, path),
        "ptx": ptx_lines(ptx, path),
    }
    return {"source": text, "stages": {k: {str(n): line for n, line in v.items()} for k, v in stages.items()}}


def with_sass(table: dict[str, Any], annotated: Iterable[tuple[int, str, int]]) -> dict[str, Any]:
    """`table` (as `line_table` makes it) with the SASS map of its source file added; unchanged when
    it names no source file."""
    source = table.get("source")
    if not isinstance(source, dict) or not isinstance(source.get("file"), str):
        return table
    sass = {str(n): line for n, line in sass_lines(annotated, source["file"]).items()}
    return dict(table, stages=dict(table.get("stages") or {}, sass=sass))
