"""A `@jit` function's parsed source and the mapping from AST positions to file positions."""

from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


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
        lines, first_line = inspect.getsourcelines(fn)
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
