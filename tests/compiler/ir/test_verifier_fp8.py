"""What the IR allows of the 8-bit floats: loads, stores, selects, casts to and from fp16, bf16 and fp32
(to fp8 rounding to nearest even only) and `dot` into fp32; no constants, no arithmetic, no
comparisons, no atomics, no scalar kernel arguments."""

from __future__ import annotations

from typing import Any

import pytest
from verifier_kit import fails, kernel

from despina.compiler.ir.core import Op, Value
from despina.compiler.ir.types import PointerType, TileType, Type, float8e4nv, float16, float32, int1, int32
from despina.compiler.ir.verifier import verify

P8 = PointerType(float8e4nv)


def _with(name: str, operands: Any, result: Type, **attrs: Any) -> Any:
    """A kernel that loads an fp8 scalar `x` and appends `name(operands(x))` unchecked (the verifier's to judge)."""
    def build(b: Any, a: list[Value]) -> None:
        x = b.value("load", [a[0]])
        b.block.ops.append(Op(name, operands(x), [result], attrs))

    return kernel(build, (P8,))


def test_fp8_moves_and_casts_verify() -> None:
    def build(b: Any, a: list[Value]) -> None:
        x = b.value("load", [a[0]])
        wide = b.value("cast", [x], to=float32)
        for to in (float16, float32):
            b.value("cast", [b.value("cast", [x], to=to)], to=float8e4nv, rounding="rtne")
        flag = b.constant(True, int1)
        b.create("store", [a[0], b.value("select", [flag, x, b.value("cast", [wide], to=float8e4nv)])])

    verify(kernel(build, (P8,)))


@pytest.mark.parametrize(("name", "operands", "result", "attrs", "message"), [
    ("add", lambda x: [x, x], float8e4nv, {}, "'add' does not take fp8e4nv operands"),
    ("neg", lambda x: [x], float8e4nv, {}, "'neg' does not take fp8e4nv operands"),
    ("cmp", lambda x: [x, x], int1, {"pred": "lt"}, "'cmp' does not take fp8e4nv operands"),
    ("cast", lambda x: [x], int32, {"to": int32}, "fp8 casts take only fp16, bf16, fp32"),
    ("cast", lambda x: [x], PointerType(float32), {"to": PointerType(float32)}, "fp8 casts take only"),
])
def test_fp8_arithmetic_and_other_casts_are_refused(name, operands, result, attrs, message) -> None:
    fails(_with(name, operands, result, **attrs), message)


def test_rounding_to_fp8_is_to_nearest_even_only() -> None:
    def build(b: Any, a: list[Value]) -> None:
        b.block.ops.append(Op("cast", [b.constant(1.0, float32)], [float8e4nv], {"to": float8e4nv, "rounding": "rtz"}))

    fails(kernel(build, (P8,)), "rounds to nearest even only")


def test_no_fp8_constants_and_no_scalar_fp8_arguments() -> None:
    def build(b: Any, a: list[Value]) -> None:
        b.block.ops.append(Op("constant", [], [float8e4nv], {"value": 1.0, "type": float8e4nv}))

    fails(kernel(build, (P8,)), "the IR has no fp8 constants")
    fails(kernel(arg_types=(P8, float8e4nv)), "a kernel takes fp8 values only through pointers")


def test_fp8_dots_accumulate_in_fp32() -> None:
    def build(b: Any, a: list[Value]) -> None:
        x = b.value("splat", [b.value("load", [a[0]])], shape=[16, 16])
        acc = b.constant(0.0, TileType((16, 16), float16))
        b.block.ops.append(Op("dot", [x, x, acc], [acc.type], {}))

    fails(kernel(build, (P8,)), "'dot' of fp8e4nv operands accumulates in fp32, not fp16")


def test_no_fp8_atomics() -> None:
    def build(b: Any, a: list[Value]) -> None:
        x = b.value("load", [a[0]])
        b.block.ops.append(Op("atomic_rmw", [a[0], x], [float8e4nv], {"kind": "xchg", "sem": "relaxed", "scope": "gpu"}))

    fails(kernel(build, (P8,)), "'atomic_rmw' does not take fp8e4nv operands")
