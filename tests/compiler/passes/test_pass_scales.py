from __future__ import annotations

from typing import Any

import pytest
from passes_util import filecheck, helper, kernel, region, run

from despina.compiler.ir.builder import Builder
from despina.compiler.ir.core import Value
from despina.compiler.ir.types import PointerType, TileType, float32, int1
from despina.compiler.passes.dce import dce
from despina.compiler.passes.scales import take_out_scales

F4x8 = TileType((4, 8), float32)
INF = float("inf")


def row_max(b: Builder, x: Value, combine: str = "maximum", nan: str = "none") -> Value:
    attrs = {"propagate_nan": nan} if combine != "add" else {}
    body = region(b, [float32, float32], lambda a: [b.value(combine, a, **attrs)])
    return b.create("reduce", [x], {"axis": 1}, regions=[body]).result


def scaled(positive: list[int], scale: Any = None, combine: str = "maximum", nan: str = "none") -> str:
    """A kernel storing reduce `combine`(x * splat(s)) with s argument 2, or `scale(b, s)` if given."""
    m, b, (ptr, x, s) = kernel(PointerType(float32), F4x8, float32)
    m.attrs["positive"] = positive
    factor = b.value("splat", [scale(b, s) if scale else s], shape=[4, 8])
    r = row_max(b, b.value("mul", [x, factor]), combine, nan)
    b.create("store", [b.value("splat", [ptr], shape=[4]), r])
    b.create("return")
    return run(m, take_out_scales, dce)


def test_a_positive_scale_leaves_the_reduction():
    filecheck(scaled([2]), """
        CHECK: = reduce(%1) {axis = 1}
        CHECK: maximum(
        CHECK: %7 = splat(%2) {shape = [4]} : tile<4xfp32>
        CHECK-NEXT: %8 = mul(%3, %7)
        CHECK-NEXT: %9 = splat(%0)
        CHECK-NEXT: store(%9, %8)
        """)
    assert "shape = [4, 8]" not in scaled([2])


@pytest.mark.parametrize("combine", ["maximum", "minimum"])
def test_max_and_min_of_a_scale_known_positive_through_a_constant_at_least_1(combine):
    out = scaled([2], lambda b, s: b.value("mul", [s, b.value("constant", type=float32, value=1.44269504)]), combine)
    assert "reduce(%1)" in out and f"{combine}(" in out


@pytest.mark.parametrize(("positive", "factor", "why"), [
    ([], None, "the argument is not known positive"),
    ([2], 0.5, "a product with a constant below 1 can round to 0"),
    ([2], -1.0, "a negative constant"),
])
def test_a_scale_not_known_positive_stays(positive, factor, why):
    out = scaled(positive, None if factor is None else
                 lambda b, s: b.value("mul", [b.value("constant", type=float32, value=factor), s]))
    assert "reduce(%1)" not in out, why


def test_nan_propagating_max_and_sums_keep_their_product():
    assert "reduce(%1)" not in scaled([2], nan="all")
    assert "reduce(%1)" not in scaled([2], combine="add")


def masked(fill: float, scale: float | None, twice: bool = False, swap: bool = False) -> str:
    """reduce max(select(c, x * S, fill)), S = splat(argument 3) or the constant tile `scale`; with `twice`, the
    product is also stored."""
    m, b, (ptr, x, c, s) = kernel(PointerType(float32), F4x8, TileType((4, 8), int1), float32)
    m.attrs["positive"] = [3]
    factor = b.value("splat", [s], shape=[4, 8]) if scale is None else b.value("constant", type=F4x8, value=scale)
    product = b.value("mul", [factor, x])
    other = b.value("constant", type=F4x8, value=fill)
    picked = b.value("select", [c, other, product] if swap else [c, product, other])
    b.create("store", [b.value("splat", [ptr], shape=[4]), row_max(b, picked)])
    if twice:
        b.create("store", [b.value("splat", [ptr], shape=[4, 8]), product])
    b.create("return")
    return run(m, take_out_scales, dce)


@pytest.mark.parametrize("swap", [False, True])
def test_a_mask_with_minus_infinity_commutes_with_the_scale(swap):
    picked = "select(%2, %4, %1)" if swap else "select(%2, %1, %4)"
    filecheck(masked(-INF, None, swap=swap), f"""
        CHECK: %4 = constant() {{type = type(tile<4x8xfp32>), value = float(-inf)}}
        CHECK-NEXT: %5 = {picked}
        CHECK: %7 = reduce(%5)
        CHECK-NOT: mul(
        CHECK: %11 = splat(%3) {{shape = [4]}}
        CHECK-NEXT: %12 = mul(%7, %11)
        """)


def test_a_constant_positive_tile_scales_the_result_as_a_constant():
    filecheck(masked(-INF, 0.125), """
        CHECK: %5 = select(%2, %1, %4)
        CHECK: %7 = reduce(%5)
        CHECK: %11 = constant() {type = type(tile<4xfp32>), value = 0.125}
        CHECK-NEXT: %12 = mul(%7, %11)
        """)


def test_a_mask_of_a_finite_value_or_a_product_used_twice_keeps_the_product_in_place():
    assert "select(%2, %1" not in masked(0.0, None)
    assert "select(%2, %1" not in masked(-INF, None, twice=True)


def test_a_helper_function_sees_constant_scales_only():
    """`positive` names the kernel's arguments: a helper's (a `noinline` one's) are not known positive, its
    constants are."""
    m, b, (ptr, x, s) = kernel(PointerType(float32), F4x8, float32)
    m.attrs["positive"] = [2]
    b.create("return")
    hb, (hx, hs) = helper(m, "h", [F4x8, float32], [TileType((4,), float32)])
    by_arg = row_max(hb, hb.value("mul", [hx, hb.value("splat", [hs], shape=[4, 8])]))
    by_constant = row_max(hb, hb.value("mul", [hx, hb.value("constant", type=F4x8, value=0.5)]))
    hb.create("return", [hb.value("add", [by_arg, by_constant])])
    out = run(m, take_out_scales, dce)
    helper_text = out[out.index("func @h"):]
    assert helper_text.count("reduce(%3)") == 1 and "value = 0.5} : tile<4xfp32>" in helper_text
