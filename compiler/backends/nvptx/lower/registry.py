"""The registry of lowering rules: one rule per tile-IR op, `@lowering("add")`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import llvmlite.ir as ir

from ....ir.core import Op

if TYPE_CHECKING:
    from .context import Lowering

Regs = list[ir.Value]
"""A lowered value: the registers one thread holds, in its layout's register order."""

Rule = Callable[["Lowering", Op, list[Regs]], list[Regs]]
RULES: dict[str, Rule] = {}


def lowering(*names: str) -> Callable[[Rule], Rule]:
    """Register `fn` as the rule of ops `names`; it returns one `Regs` per op result."""

    def register(fn: Rule) -> Rule:
        for name in names:
            if name in RULES:
                raise ValueError(f"op '{name}' already has a lowering rule")
            RULES[name] = fn
        return fn

    return register
