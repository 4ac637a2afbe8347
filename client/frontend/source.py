"""A `@jit` function's parsed source and the mapping from AST positions to file positions."""

from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import CompilationError


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


def _no_source(fn: Callable[..., Any], exc: OSError) -> CompilationError:
    """The error for a kernel whose source Python cannot give back (`python -c`, `exec`, a REPL)."""
    code = getattr(fn, "__code__", None)
    file = code.co_filename if code is not None else "<unknown>"
    line = code.co_firstlineno if code is not None else 0
    name = getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))
    return CompilationError(
        name, file, line, 0,
        f"cannot read the kernel's source code ({exc}): despina compiles a kernel from its source, and Python "
        "keeps that only for functions defined in a file. Define the kernel in a .py file and import or run that "
        "file, instead of defining it in `python -c`, an exec()'d string or an interactive prompt.",
    )
