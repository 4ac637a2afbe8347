"""A `@jit` function's parsed source and the mapping from AST positions to file positions."""

from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from despina.compiler.ir.core import SourceText
from despina.compiler.ir.verifier import MAX_SOURCE_BYTES, MAX_SOURCE_LINES

from .errors import FrontendError


@dataclass
class Source:
    """The function's AST with its absolute file, first line and indentation."""

    tree: ast.FunctionDef
    file: str
    first_line: int
    indent: int
    name: str

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> Source:
        try:
            lines, first_line = inspect.getsourcelines(fn)
        except OSError as exc:
            raise _no_source(fn, exc) from None
        text = "".join(lines)
        dedented = textwrap.dedent(text)
        indent = len(lines[0]) - len(lines[0].lstrip()) if lines else 0
        module = ast.parse(dedented)
        defs = [n for n in module.body if isinstance(n, ast.FunctionDef)]
        if not defs:
            raise TypeError(f"@jit needs a plain `def` function, got {fn!r}")
        return cls(defs[0], inspect.getsourcefile(fn) or "<unknown>", first_line, indent, fn.__name__)

    def position(self, node: ast.AST) -> tuple[int, int]:
        """(line, column) in the file, both as the user's editor shows them (line 1-based)."""
        line = getattr(node, "lineno", self.tree.lineno)
        col = getattr(node, "col_offset", 0)
        return self.first_line + line - 1, col + self.indent

    def line_text(self, line: int) -> str | None:
        text = linecache.getline(self.file, line)
        return text or None

    @property
    def last_line(self) -> int:
        return self.first_line + (self.tree.end_lineno or self.tree.lineno) - 1


def source_text(kernel: Source, helpers: list[Source]) -> SourceText | None:
    """The lines of the kernel's file that the module carries for a viewer of its stages (`Module.source`):
    from the first line of the kernel and its helpers in that file to the last, when that fits the
    verifier's bounds (MAX_SOURCE_LINES lines, MAX_SOURCE_BYTES bytes), else the kernel's own lines, cut
    to those bounds; None when the file cannot be read again."""
    lines = [line.rstrip("\r\n") for line in linecache.getlines(kernel.file)]
    if not lines:
        return None
    same_file = [kernel] + [h for h in helpers if h.file == kernel.file]
    for spans in (same_file, [kernel]):
        first, last = min(s.first_line for s in spans), max(s.last_line for s in spans)
        text = lines[first - 1 : last]
        if len(text) <= MAX_SOURCE_LINES and sum(len(t.encode("utf-8", "replace")) for t in text) <= MAX_SOURCE_BYTES:
            return SourceText(kernel.file, first, tuple(text))
    kept: list[str] = []
    size = 0
    for t in lines[kernel.first_line - 1 : kernel.first_line - 1 + MAX_SOURCE_LINES]:
        size += len(t.encode("utf-8", "replace"))
        if size > MAX_SOURCE_BYTES:
            break
        kept.append(t)
    return SourceText(kernel.file, kernel.first_line, tuple(kept))


def _no_source(fn: Callable[..., Any], exc: OSError) -> FrontendError:
    """The error for a kernel whose source Python cannot give back (`python -c`, `exec`, a REPL)."""
    code = getattr(fn, "__code__", None)
    file = code.co_filename if code is not None else "<unknown>"
    line = code.co_firstlineno if code is not None else 0
    name = getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))
    return FrontendError(
        name, file, line, 0,
        f"cannot read the kernel's source code ({exc}): despina compiles a kernel from its source, and Python "
        "keeps that only for functions defined in a file. Define the kernel in a .py file and import or run that "
        "file, instead of defining it in `python -c`, an exec()'d string or an interactive prompt.",
    )
