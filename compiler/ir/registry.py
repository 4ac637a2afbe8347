"""One registry of rules per compiler stage, keyed by the op catalogue.

Every stage that treats ops one by one keeps its rules in an `OpRegistry`: the interpreter, axis
analysis and layout assignment (gpuir), the NVPTX lowering, canonicalize and fold. A rule is
registered for ops of the catalogue (`ops.OPS`; the backend's stages also take the GPU IR's own
ops), so a misspelt or forgotten op name fails when the stage is imported. A stage that must
answer for every op (`complete`) says of each op it has no rule for why not: `builtin` (its
driver handles the op itself, as a loop handles `yield`) or `unsupported` (the stage
deliberately refuses or ignores it). `missing()` lists the ops with neither; the coverage test
(tests/compiler/test_op_tables.py) requires it empty, so adding an op to the catalogue means
deciding, in each stage, what happens to it.

    LOWERING: OpRegistry[Rule] = OpRegistry("NVPTX lowering", (OPS, GPU_OPS))

    @LOWERING.register("add", "sub")
    def _arith(ctx, op, args): ...

    LOWERING.builtin("region terminators: the op that owns the region reads them", "yield", "condition")
    LOWERING.unsupported("calls are inlined before code generation", "call")
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Generic, TypeVar

from .ops import OPS, OpDef

R = TypeVar("R")


class OpRegistry(Generic[R]):
    """The rules of one stage (`stage` names it in errors), one per op of `catalogues`."""

    def __init__(self, stage: str, catalogues: Sequence[Mapping[str, OpDef]] = (OPS,), complete: bool = True) -> None:
        self.stage = stage
        self.catalogues = tuple(catalogues)
        self.complete = complete
        # Plain dicts: the drivers look rules up once per op they run.
        self.rules: dict[str, R] = {}
        self.builtins: dict[str, str] = {}
        self.unsupported_ops: dict[str, str] = {}

    def opdef(self, name: str) -> OpDef:
        """The definition of op `name`, or ValueError when no catalogue of this stage has it."""
        for catalogue in self.catalogues:
            if name in catalogue:
                return catalogue[name]
        raise ValueError(
            f"{self.stage}: op '{name}' is not in the op catalogue; define it first "
            "(compiler/ir/ops.py for tile-IR ops, compiler/backends/gpuir/ops.py for GPU-IR ops)"
        )

    def _claim(self, name: str) -> None:
        self.opdef(name)
        if name in self.rules or name in self.builtins or name in self.unsupported_ops:
            raise ValueError(f"{self.stage}: op '{name}' already has a rule or a reason for having none")

    def register(self, *names: str) -> Callable[[R], R]:
        """Register the decorated function as the rule of ops `names`."""
        for name in names:
            self._claim(name)

        def add(fn: R) -> R:
            for name in names:
                self.rules[name] = fn
            return fn

        return add

    def builtin(self, reason: str, *names: str) -> None:
        """Ops `names` have no rule because the stage's driver handles them itself (`reason` says how)."""
        for name in names:
            self._claim(name)
            self.builtins[name] = reason

    def unsupported(self, reason: str, *names: str) -> None:
        """Ops `names` are deliberately not handled by this stage (`reason` says why and what happens instead)."""
        for name in names:
            self._claim(name)
            self.unsupported_ops[name] = reason

    def get(self, name: str) -> R | None:
        return self.rules.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self.rules

    def ops(self) -> list[str]:
        """Every op of this stage's catalogues, sorted."""
        return sorted({name for catalogue in self.catalogues for name in catalogue})

    def missing(self) -> list[str]:
        """The ops of the catalogues with no rule and no reason for having none (always [] unless `complete`)."""
        if not self.complete:
            return []
        return [n for n in self.ops() if n not in self.rules and n not in self.builtins and n not in self.unsupported_ops]
