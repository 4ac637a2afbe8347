from __future__ import annotations

import pytest
from passes_util import filecheck, for_loop, helper, kernel, run

from despina.compiler.ir.core import IRError
from despina.compiler.ir.types import PointerType, TileType, float32, int32
from despina.compiler.passes.inline import inline

F32x4 = TileType((4,), float32)


def test_call_becomes_callee_body_and_helpers_are_dropped() -> None:
    m, b, (x,) = kernel(float32)
    hb, (p,) = helper(m, "twice", [float32], [float32])
    hb.create("return", [hb.value("add", [p, p])])
    r = b.create("call", [x], {"callee": "twice", "results": [float32]}).result
    b.value("mul", [r, x])
    b.create("return")
    filecheck(
        run(m, inline),
        """
        CHECK: func @k(%0: fp32) kernel
        CHECK-NEXT: %1 = add(%0, %0) : fp32
        CHECK-NEXT: %2 = mul(%1, %0) : fp32
        CHECK-NEXT: return()
        CHECK-NOT: call(
        CHECK-NOT: func @twice
        """,
    )
    assert [f.name for f in m.functions] == ["k"]


def test_nested_helpers_inside_a_loop_are_inlined() -> None:
    m, b, (x, n) = kernel(float32, int32)
    ib, (q,) = helper(m, "inner", [float32], [float32])
    ib.create("return", [ib.value("neg", [q])])
    ob, (p,) = helper(m, "outer", [float32], [float32])
    r = ob.create("call", [p], {"callee": "inner", "results": [float32]}).result
    ob.create("return", [ob.value("add", [r, p])])
    zero, one = b.constant(0, int32), b.constant(1, int32)

    def body(args: list) -> list:
        return [b.create("call", [args[1]], {"callee": "outer", "results": [float32]}).result]

    for_loop(b, zero, n, one, [x], body)
    b.create("return")
    filecheck(
        run(m, inline),
        """
        CHECK: = for(
        CHECK: ^(%5: int32, %6: fp32):
        CHECK-NEXT: %7 = neg(%6) : fp32
        CHECK-NEXT: %8 = add(%7, %6) : fp32
        CHECK-NEXT: yield(%8)
        CHECK-NOT: call(
        """,
    )


def test_helper_called_twice_is_copied_each_time_and_keeps_its_regions() -> None:
    m, b, (ptr, x, n) = kernel(PointerType(float32), float32, int32)
    hb, (p, k) = helper(m, "acc", [float32, int32], [float32])
    zero, one = hb.constant(0, int32), hb.constant(1, int32)
    loop = for_loop(hb, zero, k, one, [p], lambda a: [hb.value("add", [a[1], a[1]])])
    hb.create("return", [loop.result])
    r1 = b.create("call", [x, n], {"callee": "acc", "results": [float32]}).result
    r2 = b.create("call", [r1, n], {"callee": "acc", "results": [float32]}).result
    b.create("store", [ptr, r2])
    b.create("return")
    out = run(m, inline)
    assert out.count("= for(") == 2
    filecheck(
        out,
        """
        CHECK: %5 = for(%3, %2, %4, %1) (
        CHECK: ) : fp32
        CHECK: %11 = for(%9, %2, %10, %5) (
        CHECK: store(%0, %11)
        """,
    )


def test_helper_that_returns_its_argument() -> None:
    m, b, (ptr, x) = kernel(PointerType(float32), float32)
    hb, (p,) = helper(m, "ident", [float32], [float32])
    hb.create("return", [p])
    r = b.create("call", [x], {"callee": "ident", "results": [float32]}).result
    b.create("store", [ptr, r])
    b.create("return")
    filecheck(run(m, inline), "CHECK: store(%0, %1)")


def test_helper_without_results_keeps_its_side_effects() -> None:
    m, b, (ptr, x) = kernel(PointerType(float32), float32)
    hb, (p, v) = helper(m, "put", [PointerType(float32), float32], [])
    hb.create("store", [p, v])
    hb.create("return")
    b.create("call", [ptr, x], {"callee": "put", "results": []})
    b.create("return")
    filecheck(run(m, inline), "CHECK: store(%0, %1)\nCHECK-NEXT: return()")


def test_recursion_is_an_error() -> None:
    m, b, (x,) = kernel(float32)
    hb, (p,) = helper(m, "f", [float32], [float32])
    hb.create("return", [hb.create("call", [p], {"callee": "f", "results": [float32]}).result])
    b.create("call", [x], {"callee": "f", "results": [float32]})
    b.create("return")
    with pytest.raises(IRError, match="recursive call to 'f'"):
        inline(m)


def test_mismatched_call_is_an_error() -> None:
    m, b, (x,) = kernel(F32x4)
    hb, (p,) = helper(m, "f", [float32], [float32])
    hb.create("return", [p])
    b.create("call", [x], {"callee": "f", "results": [float32]})
    b.create("return")
    with pytest.raises(IRError, match="passes \\(tile<4xfp32>\\), the function takes \\(fp32\\)"):
        inline(m)


def test_unknown_callee_is_an_error() -> None:
    m, b, (x,) = kernel(float32)
    b.create("call", [x], {"callee": "nowhere", "results": []})
    b.create("return")
    with pytest.raises(IRError, match="no function named 'nowhere'"):
        inline(m)
