"""Building ops at an insertion point, typed by the op catalogue."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .core import Block, Loc, Op, Value
from .ops import infer
from .types import Type


class Builder:
    """Appends typed ops to the current block; `loc` is stamped on every op it creates."""

    def __init__(self, block: Block | None = None) -> None:
        self.block = block if block is not None else Block()
        self.loc: Loc | None = None

    def create(
        self,
        name: str,
        operands: Sequence[Value] = (),
        attrs: dict[str, Any] | None = None,
        regions: Sequence[Block] = (),
    ) -> Op:
        attrs = dict(attrs or {})
        result_types = infer(name, [v.type for v in operands], attrs, regions)
        op = Op(name, operands, result_types, attrs, regions, self.loc)
        self.block.ops.append(op)
        return op

    def value(self, name: str, operands: Sequence[Value] = (), **attrs: Any) -> Value:
        """Create a single-result op and return its result."""
        return self.create(name, operands, attrs).result

    def constant(self, value: bool | int | float, type: Type) -> Value:
        return self.value("constant", value=value, type=type)

    @contextmanager
    def at(self, block: Block) -> Iterator[Block]:
        """Insert into `block` for the duration of the `with`."""
        saved = self.block
        self.block = block
        try:
            yield block
        finally:
            self.block = saved
