"""The tile IR's data structures: values, ops with regions, blocks, functions and modules.

One node type, `Op`, serves every operation (the op's `name` selects its rule in `ops.OPS`).
An op owns `regions`; each region is a single `Block` whose arguments are the region's inputs
(loop induction variable and carried values, a reduction's operands) and whose last op is a
terminator (`yield`, `condition` or `return`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .types import Type

IR_VERSION = 1


class IRError(Exception):
    """A malformed op or module; the message says which op and why."""


@dataclass(frozen=True)
class Loc:
    """Where an op came from in the user's source (1-based line and column)."""

    file: str
    line: int
    col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class Value:
    """An SSA value: the result of an op or the argument of a block."""

    __slots__ = ("type", "owner", "index", "hint")

    def __init__(self, type: Type, owner: Op | Block | None = None, index: int = 0, hint: str = "") -> None:
        self.type = type
        self.owner = owner
        self.index = index
        self.hint = hint

    def __repr__(self) -> str:
        return f"Value({self.type}{', ' + self.hint if self.hint else ''})"


class Block:
    """A straight list of ops with typed arguments; the body of one region."""

    __slots__ = ("args", "ops")

    def __init__(self, arg_types: Sequence[Type] = (), arg_hints: Sequence[str] = ()) -> None:
        hints = list(arg_hints) + [""] * (len(arg_types) - len(arg_hints))
        self.args: list[Value] = [Value(t, self, i, h) for i, (t, h) in enumerate(zip(arg_types, hints))]
        self.ops: list[Op] = []

    @property
    def terminator(self) -> Op | None:
        return self.ops[-1] if self.ops else None

    def walk(self) -> Iterator[Op]:
        for op in self.ops:
            yield from op.walk()


class Op:
    """One operation: `results = name(operands) {attrs} (regions)`."""

    __slots__ = ("name", "operands", "results", "attrs", "regions", "loc")

    def __init__(
        self,
        name: str,
        operands: Sequence[Value],
        result_types: Sequence[Type],
        attrs: dict[str, Any] | None = None,
        regions: Sequence[Block] = (),
        loc: Loc | None = None,
    ) -> None:
        self.name = name
        self.operands: list[Value] = list(operands)
        self.results: list[Value] = [Value(t, self, i) for i, t in enumerate(result_types)]
        self.attrs: dict[str, Any] = dict(attrs or {})
        self.regions: list[Block] = list(regions)
        self.loc = loc

    @property
    def result(self) -> Value:
        if len(self.results) != 1:
            raise IRError(f"op '{self.name}' has {len(self.results)} results, not one")
        return self.results[0]

    def walk(self) -> Iterator[Op]:
        """This op, then every op nested in its regions, in program order."""
        yield self
        for region in self.regions:
            yield from region.walk()

    def __repr__(self) -> str:
        return f"Op({self.name}, {len(self.operands)} operands, {[str(r.type) for r in self.results]})"


@dataclass
class Function:
    """A function: the kernel itself, or a `@jit` helper it calls (inlined by `passes.inline`)."""

    name: str
    body: Block
    arg_names: list[str]
    result_types: list[Type] = field(default_factory=list)
    kernel: bool = False
    loc: Loc | None = None

    @property
    def args(self) -> list[Value]:
        return self.body.args

    def walk(self) -> Iterator[Op]:
        return self.body.walk()


@dataclass(frozen=True)
class SourceText:
    """Lines of the kernel's source file, from `first_line` (1-based) on: what a viewer shows beside
    the stages. Not part of the kernel (a cache key leaves it out, as it leaves out locations)."""

    file: str
    first_line: int
    lines: tuple[str, ...]


@dataclass
class Module:
    """A set of functions, one of them the kernel; `attrs` carry the specialization, `source` the
    kernel's source lines when the frontend could read them."""

    functions: list[Function] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)
    version: int = IR_VERSION
    source: SourceText | None = None

    @property
    def kernel(self) -> Function:
        kernels = [f for f in self.functions if f.kernel]
        if len(kernels) != 1:
            raise IRError(f"a module holds exactly one kernel function, found {len(kernels)}")
        return kernels[0]

    def get(self, name: str) -> Function:
        for f in self.functions:
            if f.name == name:
                return f
        raise IRError(f"no function named '{name}' in the module")
