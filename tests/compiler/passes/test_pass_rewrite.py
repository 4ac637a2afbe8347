"""The shared pass machinery: use replacement, cloning, side effects."""

from __future__ import annotations

import re

from passes_util import for_loop, kernel, text

from despina.compiler.ir.core import Op
from despina.compiler.ir.types import PointerType, float32, int32
from despina.compiler.ir.verifier import verify
from despina.compiler.passes.rewrite import clone_op, has_side_effects, replace_all_uses


def test_replace_all_uses_reaches_nested_regions() -> None:
    m, b, (ptr, x, y, n) = kernel(PointerType(float32), float32, float32, int32)
    loop = for_loop(b, b.constant(0, int32), n, b.constant(1, int32), [x], lambda a: [b.value("add", [a[1], x])])
    b.create("store", [ptr, b.value("mul", [loop.result, x])])
    b.create("return")
    replace_all_uses(m.kernel, {x: y})
    out = text(m)
    body = out.split("kernel", 1)[1].split("\n", 1)[1]
    assert not re.search(r"%1\b", body)
    assert "add(%8, %2)" in out and "for(%4, %3, %5, %2)" in out and "mul(%6, %2)" in out
    verify(m)


def test_clone_op_copies_regions_and_attributes() -> None:
    m, b, (x, n) = kernel(float32, int32)
    loop = for_loop(b, b.constant(0, int32), n, b.constant(1, int32), [x], lambda a: [b.value("neg", [a[1]])])
    loop.attrs["num_stages"] = 3
    copy = clone_op(loop, {})
    assert copy.regions[0] is not loop.regions[0]
    assert copy.regions[0].ops[0].operands[0] is copy.regions[0].args[1]
    copy.attrs["num_stages"] = 1
    assert loop.attrs["num_stages"] == 3


def test_side_effects_look_inside_regions_and_at_volatile_loads() -> None:
    m, b, (ptr, x, n) = kernel(PointerType(float32), float32, int32)
    zero, one = b.constant(0, int32), b.constant(1, int32)
    pure = for_loop(b, zero, n, one, [x], lambda a: [a[1]])

    def body(a: list) -> list:
        b.create("store", [ptr, a[1]])
        return [a[1]]

    effect = for_loop(b, zero, n, one, [x], body)
    assert not has_side_effects(pure) and has_side_effects(effect)
    assert not has_side_effects(b.create("load", [ptr]))
    assert has_side_effects(b.create("load", [ptr], {"volatile": True}))
    assert has_side_effects(Op("made_up", [], []))
