"""The ops the GPU IR adds to the tile IR's catalogue (`ir.ops.OPS`), defined as the tile ops are.

Layout assignment inserts them; the backend's stages key their rules by both catalogues
(`ir.registry.OpRegistry`), so a lowering rule for an op defined nowhere is refused on import.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...ir.core import Block, IRError
from ...ir.ops import OpDef
from ...ir.types import Type

CONVERT = "convert_layout"


def _convert_layout(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    # The shape and element type are the operand's; the encoding (the type's layout) is the result's own.
    if len(t) != 1:
        raise IRError(f"'{CONVERT}' takes 1 operand, got {len(t)}")
    return [t[0]]


GPU_OPS: dict[str, OpDef] = {CONVERT: OpDef(CONVERT, _convert_layout)}
