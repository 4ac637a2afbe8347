"""The registry of lowering rules: one rule per tile-IR or GPU-IR op, `@lowering("add")`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import llvmlite.ir as ir

from ....ir.core import Op
from ....ir.ops import OPS
from ....ir.registry import OpRegistry
from ...gpuir.ops import GPU_OPS

if TYPE_CHECKING:
    from .context import Lowering

Regs = list[ir.Value]
"""A lowered value: the registers one thread holds, in its layout's register order."""

Rule = Callable[["Lowering", Op, list[Regs]], list[Regs]]
RULES: OpRegistry[Rule] = OpRegistry("NVPTX lowering", (OPS, GPU_OPS))
RULES.builtin("region terminators: `lower_block` hands them to the op that owns the region", "yield", "condition")
RULES.unsupported("calls are inlined before code generation (layout assignment refuses them)", "call")


def lowering(*names: str) -> Callable[[Rule], Rule]:
    """Register `fn` as the rule of ops `names`; it returns one `Regs` per op result."""
    return RULES.register(*names)
