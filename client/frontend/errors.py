"""`CompilationError`: what the frontend raises at users, pointing into their source."""

from __future__ import annotations


class CompilationError(Exception):
    """A kernel could not be compiled. The message names the kernel and `file:line:column`,
    shows the source line with a caret under the column, and says what to do."""

    def __init__(self, kernel: str, file: str, line: int, col: int, message: str, source_line: str | None = None) -> None:
        self.kernel = kernel
        self.file = file
        self.line = line
        self.col = col
        self.message = message
        self.source_line = source_line
        super().__init__(self._format())

    def _format(self) -> str:
        head = f"in kernel '{self.kernel}' at {self.file}:{self.line}:{self.col + 1}: {self.message}"
        if self.source_line is None:
            return head
        text = self.source_line.rstrip("\n")
        stripped = text.lstrip()
        caret = " " * max(0, self.col - (len(text) - len(stripped)))
        return f"{head}\n    {stripped}\n    {caret}^"
