"""`JitCallable`: the interface of `despina.jit.JITFunction` that the frontend uses, so that it tells a
call of a @jit function inside a kernel without importing `despina.jit` (which imports the frontend)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from .source import Source


class JitCallable(ABC):
    """A @jit function as the frontend traces it: the Python function `fn`, its parsed `source`, and
    `bind_call`, the parameters of a call from inside a kernel."""

    fn: Callable[..., Any]
    __name__: str

    @property
    @abstractmethod
    def source(self) -> Source: ...

    @abstractmethod
    def bind_call(self, args: Sequence[Any], kwargs: dict[str, Any]) -> list[tuple[str, Any]]: ...
