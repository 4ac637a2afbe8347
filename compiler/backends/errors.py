"""Errors the backends raise: each names the kernel, the op's source line and what to do."""

from __future__ import annotations

from ..errors import CompilationError
from ..ir.core import Loc, Op


class BackendError(CompilationError):
    """The kernel cannot be compiled for the target; the message says why and where."""

    def __init__(self, message: str, kernel: str = "", loc: Loc | None = None) -> None:
        where = f"{loc}: " if loc is not None else ""
        name = f"kernel '{kernel}': " if kernel else ""
        super().__init__(f"{where}{name}{message}")
        self.kernel = kernel
        self.loc = loc


def op_error(op: Op, message: str, kernel: str = "") -> BackendError:
    return BackendError(f"op '{op.name}': {message}", kernel, op.loc)
