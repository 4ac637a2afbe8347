"""`FrontendError`: the `despina.CompilationError` the frontend raises at users, pointing into their
source."""

from __future__ import annotations

from dataclasses import dataclass

from despina.compiler.errors import CompilationError


@dataclass(frozen=True)
class CallSite:
    """Where a @jit helper was called: inside `caller` (a helper, or the kernel itself)."""

    caller: str
    is_kernel: bool
    file: str
    line: int
    col: int
    source_line: str | None


class FrontendError(CompilationError):
    """A kernel could not be compiled from its source. The message names the kernel and `file:line:column`,
    shows the source line with a caret under the column, and says what to do. An error inside a
    @jit helper then lists the calls that led there, innermost first (as Triton's chained errors
    read), each with its own line and caret, down to the call in the kernel."""

    def __init__(self, kernel: str, file: str, line: int, col: int, message: str, source_line: str | None = None,
                 function: str | None = None) -> None:
        self.kernel = kernel
        self.file = file
        self.line = line
        self.col = col
        self.message = message
        self.source_line = source_line
        self.function = function or kernel
        self.call_sites: list[CallSite] = []
        self.origin: object = None  # the code generator whose function the last location is in
        super().__init__(self._format())

    def called_from(self, site: CallSite, origin: object) -> None:
        """Add the call that led to the last location shown (the error's, or the previous call's)."""
        self.call_sites.append(site)
        self.origin = origin
        self.args = (self._format(),)

    def _format(self) -> str:
        where = f"{self.file}:{self.line}:{self.col + 1}"
        if self.call_sites:
            head = f"in helper '{self.function}' of kernel '{self.kernel}' at {where}: {self.message}"
        else:
            head = f"in kernel '{self.kernel}' at {where}: {self.message}"
        parts = [head + _excerpt(self.source_line, self.col)]
        for site in self.call_sites:
            what = f"kernel '{site.caller}'" if site.is_kernel else f"helper '{site.caller}'"
            parts.append(f"called from {what} at {site.file}:{site.line}:{site.col + 1}"
                         + _excerpt(site.source_line, site.col))
        return "\n".join(parts)


def _excerpt(source_line: str | None, col: int) -> str:
    """The source line, indented, with a caret under `col`; nothing when the line is unknown."""
    if source_line is None:
        return ""
    text = source_line.rstrip("\n")
    stripped = text.lstrip()
    caret = " " * max(0, col - (len(text) - len(stripped)))
    return f"\n    {stripped}\n    {caret}^"
