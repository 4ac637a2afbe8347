"""What the verifier tests share: small modules built around a body, and the check that one fails."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from despina.compiler.ir.builder import Builder
from despina.compiler.ir.core import Block, Function, IRError, Module, Value
from despina.compiler.ir.types import PointerType, TileType, Type, float32, int32
from despina.compiler.ir.verifier import VerificationError, verify

PTR = PointerType(float32)
BAD: Any = 1  # a value of the wrong kind wherever it is put
POINTER_TO_TILE: Any = TileType((2,), float32)  # what a PointerType may not point to
Build = Callable[[Builder, list[Value]], Any]


def kernel(
    build: Build = lambda b, a: None, arg_types: Sequence[Type] = (PTR, int32), helpers: Sequence[Function] = ()
) -> Module:
    """A module whose kernel `k` runs `build`, then `return()` unless `build` ended the body itself."""
    body = Block(list(arg_types))
    b = Builder(body)
    build(b, body.args)
    if not body.ops or body.ops[-1].name not in ("return", "yield", "condition"):
        b.create("return")
    return Module([*helpers, Function("k", body, [f"a{i}" for i in range(len(arg_types))], [], True)])


def helper(
    name: str = "h",
    arg_types: Sequence[Type] = (float32,),
    result_types: Sequence[Type] = (float32,),
    build: Build | None = None,
) -> Function:
    body = Block(list(arg_types))
    b = Builder(body)
    if build is not None:
        build(b, body.args)
    else:
        b.create("return", body.args[: len(result_types)])
    return Function(name, body, [f"p{i}" for i in range(len(arg_types))], list(result_types))


def fails(m: Any, *fragments: str) -> str:
    with pytest.raises(VerificationError) as info:
        verify(m)
    assert isinstance(info.value, IRError)
    for fragment in fragments:
        assert fragment in str(info.value)
    return str(info.value)


def const(b: Builder, value: Any = 1, ty: Type = int32) -> Value:
    return b.constant(value, ty)


def region(b: Builder, arg_types: Sequence[Type], fill: Callable[[Builder, list[Value]], Any]) -> Block:
    block = Block(list(arg_types))
    with b.at(block):
        fill(b, block.args)
    return block


def yield_(*values: Value) -> Callable[[Builder, list[Value]], Any]:
    return lambda b, args: b.create("yield", list(values))
