"""Control flow in the op catalogue (`ops.OPS`): `for`, `if` and `while` with their regions, the
terminators `yield`, `condition` and `return`, and `call` of a `@jit` helper, with their attribute
schemas and type rules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .attrs import optional, required
from .core import Block, IRError
from .ops import _define, _scalar_of, _yield_types
from .types import TileType, Type, int1


def _for(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    if len(t) < 3 or len(r) != 1:
        raise IRError("'for' takes lower bound, upper bound, step, the initial carried values and one region")
    bound = t[0]
    if isinstance(bound, TileType) or not _scalar_of(bound, "for").is_int() or t[1] != bound or t[2] != bound:
        raise IRError(f"'for' bounds and step must be integer scalars of one type, got {', '.join(map(str, t[:3]))}")
    carried = list(t[3:])
    if [v.type for v in r[0].args] != [bound] + carried:
        raise IRError("'for' region arguments must be the induction variable and the carried values")
    if _yield_types(r[0], "for") != carried:
        raise IRError(f"'for' body must yield the carried types ({', '.join(map(str, carried))})")
    return carried


def _if(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    if len(t) != 1 or t[0] != int1 or len(r) != 2:
        raise IRError("'if' takes one int1 scalar condition and two regions (then, else)")
    then, other = _yield_types(r[0], "if"), _yield_types(r[1], "if")
    if then != other:
        raise IRError(f"'if' branches yield different types: ({', '.join(map(str, then))}) vs ({', '.join(map(str, other))})")
    return then


def _while(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    if len(r) != 2:
        raise IRError("'while' takes two regions (before, after)")
    before, after = r
    if [v.type for v in before.args] != list(t):
        raise IRError("'while' before-region arguments must match the initial values")
    cond = before.terminator
    if cond is None or cond.name != "condition":
        raise IRError("'while' before-region must end with 'condition'")
    results = [v.type for v in cond.operands[1:]]
    if [v.type for v in after.args] != results:
        raise IRError("'while' after-region arguments must match the values passed by 'condition'")
    if _yield_types(after, "while") != list(t):
        raise IRError("'while' after-region must yield the initial values' types")
    return results


def _condition(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    if not t or t[0] != int1:
        raise IRError("'condition' takes an int1 scalar and the values to pass on")
    return []


def _call(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    if not isinstance(a.get("callee"), str):
        raise IRError("'call' needs a 'callee' name")
    results = a.get("results", [])
    if not isinstance(results, list):
        raise IRError("'call' attribute 'results' must list the result types")
    return list(results)


_define("for", _for, {"num_stages": optional("int", "none"), "loop_unroll_factor": optional("int", "none"),
                      "flatten": optional("bool"), "warp_specialize": optional("bool")}, num_regions=1)
_define("if", _if, num_regions=2)
_define("while", _while, num_regions=2)
_define("yield", lambda t, a, r: [], terminator=True)
_define("condition", _condition, terminator=True)
_define("return", lambda t, a, r: [], terminator=True)
_define("call", _call, {"callee": required("str"), "results": optional("types")}, side_effects=True)
