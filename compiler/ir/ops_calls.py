"""The ops that call out of the tile IR: libdevice functions (`extern_elementwise`) and inline PTX
(`inline_asm`), in the op catalogue (`ops.OPS`) with their attribute schemas and type rules."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .attrs import required
from .core import Block, IRError
from .ops import _define, _scalar_of, _type_attr
from .types import ScalarType, Type, int1, shape_of, with_shape

# ---- calls into libdevice ------------------------------------------------------------------

LIBDEVICE_SYMBOL = re.compile(r"__nv_[a-z0-9_]+")


def _extern_elementwise(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    if not t:
        raise IRError("'extern_elementwise' takes at least one operand")
    shape = shape_of(t[0])
    if any(shape_of(x) != shape for x in t):
        raise IRError(f"'extern_elementwise' operands must share a shape, got {', '.join(map(str, t))}")
    for x in t:
        _scalar_of(x, "extern_elementwise")
    symbol, result = a.get("symbol"), _type_attr(a, "result")
    if not isinstance(symbol, str) or not LIBDEVICE_SYMBOL.fullmatch(symbol):
        raise IRError(f"'extern_elementwise' calls libdevice functions (__nv_...), got {symbol!r}")
    if not isinstance(result, ScalarType):
        raise IRError(f"'extern_elementwise' result must be a scalar type, got {result}")
    return [with_shape(result, shape)]


_define("extern_elementwise", _extern_elementwise, {"symbol": required("str"), "result": required("type")})

# ---- inline assembly ------------------------------------------------------------------------


def asm_registers(elem: ScalarType, pack: int) -> tuple[int, int]:
    """How `pack` elements of `elem` reach one instance of inline assembly: (registers, elements per
    register); elements narrower than 32 bits share 32-bit registers, as in Triton."""
    per = max(1, min(pack, 32 // elem.primitive_bitwidth))
    return pack // per, per


def _inline_asm(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    if not t:
        raise IRError("'inline_asm' takes at least one operand")
    shape = shape_of(t[0])
    if any(shape_of(x) != shape for x in t):
        raise IRError(f"'inline_asm' operands must share a shape, got {', '.join(map(str, t))}")
    for x in t:
        if _scalar_of(x, "inline_asm") == int1:
            raise IRError("'inline_asm' operands cannot be int1; pass them as int8")
    results = a.get("results")
    if not isinstance(results, (list, tuple)) or not results or not all(
            isinstance(e, ScalarType) and e != int1 for e in results):
        raise IRError(f"'inline_asm' results must list one or more scalar types other than int1, got {results!r}")
    pack = a.get("pack")
    if not isinstance(pack, int) or isinstance(pack, bool) or pack < 1 or pack & (pack - 1):
        raise IRError(f"'inline_asm' pack must be a power of two, got {pack!r}")
    return [with_shape(e, shape) for e in results]


_define("inline_asm", _inline_asm, {"asm": required("str"), "constraints": required("str"), "pure": required("bool"),
                                    "pack": required("int"), "results": required("types")})
