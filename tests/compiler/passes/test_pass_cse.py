from __future__ import annotations

from passes_util import filecheck, for_loop, if_op, kernel, region, run

from despina.compiler.ir.types import PointerType, float32, int32, int64
from despina.compiler.passes.cse import cse
from despina.compiler.passes.dce import dce


def test_equal_pure_ops_are_merged() -> None:
    m, b, (ptr, x, y) = kernel(PointerType(float32), float32, float32)
    b.create("store", [ptr, b.value("mul", [b.value("add", [x, y]), b.value("add", [x, y])])])
    b.create("store", [ptr, b.value("mul", [b.value("add", [x, y]), b.value("add", [x, y])])])
    b.create("return")
    filecheck(
        run(m, cse),
        """
        CHECK: %3 = add(%1, %2) : fp32
        CHECK-NEXT: %4 = mul(%3, %3) : fp32
        CHECK-NEXT: store(%0, %4)
        CHECK-NEXT: store(%0, %4)
        """,
    )


def test_attributes_and_types_keep_ops_apart() -> None:
    m, b, (ptr, x) = kernel(PointerType(int32), int32)
    for pred in ("lt", "gt", "lt"):
        b.value("cmp", [x, x], pred=pred)
    for value, ty in ((0.0, float32), (-0.0, float32), (1, int32), (1, int64), (1, int32)):
        b.constant(value, ty)
    b.create("return")
    out = run(m, cse)
    assert out.count("cmp(") == 2
    filecheck(
        out,
        """
        CHECK: value = 0.0}
        CHECK-NEXT: value = -0.0}
        CHECK-NEXT: {type = type(int32), value = 1}
        CHECK-NEXT: {type = type(int64), value = 1}
        CHECK-NEXT: return()
        """,
    )


def test_outer_value_replaces_inner_one_never_the_reverse() -> None:
    m, b, (ptr, x, n) = kernel(PointerType(int32), int32, int32)
    outer = b.value("add", [x, x])
    zero, one = b.constant(0, int32), b.constant(1, int32)
    loop = for_loop(b, zero, n, one, [x], lambda a: [b.value("mul", [b.value("add", [x, x]), b.value("sub", [x, n])])])
    late = b.value("sub", [x, n])  # the loop's sub is inside its region: not visible here
    b.create("store", [ptr, b.value("add", [outer, late])])
    b.create("store", [ptr, loop.result])
    b.create("return")
    out = run(m, cse, dce)
    assert out.count("sub(%1, %2)") == 2
    filecheck(
        out,
        """
        CHECK: %3 = add(%1, %1) : int32
        CHECK: ^(%7: int32, %8: int32):
        CHECK-NEXT: %9 = sub(%1, %2) : int32
        CHECK-NEXT: %10 = mul(%3, %9) : int32
        CHECK-NEXT: yield(%10)
        CHECK: %11 = sub(%1, %2) : int32
        CHECK-NEXT: %12 = add(%3, %11) : int32
        """,
    )


def test_sibling_regions_do_not_share() -> None:
    m, b, (ptr, c, x) = kernel(PointerType(int32), int32, int32)
    cond = b.value("cmp", [c, x], pred="lt")
    branch = if_op(b, cond, lambda: [b.value("neg", [x])], lambda: [b.value("neg", [x])])
    b.create("store", [ptr, branch.result])
    b.create("return")
    assert run(m, cse).count("neg(%2)") == 2


def test_loads_and_stores_are_never_merged() -> None:
    m, b, (ptr, x) = kernel(PointerType(float32), float32)
    first = b.value("load", [ptr])
    b.create("store", [ptr, x])
    second = b.value("load", [ptr])
    b.create("store", [ptr, b.value("add", [first, second])])
    b.create("store", [ptr, b.value("add", [first, second])])
    b.create("return")
    out = run(m, cse)
    assert out.count("load(%0)") == 2 and out.count("store(") == 3 and out.count("add(") == 1


def test_deeply_nested_uses_reach_the_outermost_copy() -> None:
    m, b, (ptr, x, n) = kernel(PointerType(int32), int32, int32)
    zero, one = b.constant(0, int32), b.constant(1, int32)

    def inner(a: list) -> list:
        c = b.value("cmp", [a[0], b.constant(1, int32)], pred="eq")
        return [if_op(b, c, lambda: [b.constant(0, int32)], lambda: [a[1]]).result]

    loop = for_loop(b, zero, n, one, [x], lambda a: [for_loop(b, b.constant(0, int32), n, one, [a[1]], inner).result])
    b.create("store", [ptr, loop.result])
    b.create("return")
    out = run(m, cse)
    assert out.count("= constant()") == 2
    filecheck(
        out,
        "CHECK: %5 = for(%3, %2, %4, %1) (\nCHECK: %8 = for(%3, %2, %4, %7) (\nCHECK: = cmp(%9, %4)\nCHECK: yield(%3)",
    )


def test_combine_regions_do_not_reuse_outer_values() -> None:
    m, b, (ptr,) = kernel(PointerType(int32))
    one = b.constant(1, int32)
    data = b.value("arange", start=0, end=4)
    body = region(b, [int32, int32], lambda a: [b.value("add", [a[0], b.constant(1, int32)])])
    total = b.create("reduce", [data], {"axis": 0}, regions=[body]).result
    b.create("store", [ptr, b.value("add", [total, one])])
    b.create("return")
    filecheck(run(m, cse), "CHECK: ^(%4: int32, %5: int32):\nCHECK-NEXT: %6 = constant()")
