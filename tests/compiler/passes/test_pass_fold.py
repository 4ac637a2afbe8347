"""The folder on whole modules: chains, splats, identities, control flow, nested regions."""

from __future__ import annotations

from passes_util import filecheck, for_loop, if_op, kernel, region, run

from despina.compiler.ir.types import PointerType, TileType, float32, int1, int8, int32, uint32
from despina.compiler.passes.dce import dce
from despina.compiler.passes.fold import fold

I32x4 = TileType((4,), int32)


def test_chain_of_constants_folds_to_one() -> None:
    m, b, (ptr,) = kernel(PointerType(int8))
    two, three = b.constant(100, int8), b.constant(3, int8)
    s = b.value("mul", [b.value("add", [two, three]), three])  # (100 + 3) * 3 = 309 -> 53 in int8
    b.create("store", [ptr, s])
    b.create("return")
    filecheck(
        run(m, fold, dce),
        """
        CHECK: %1 = constant() {type = type(int8), value = 53} : int8
        CHECK-NEXT: store(%0, %1)
        CHECK-NOT: add(
        CHECK-NOT: mul(
        """,
    )


def test_splats_fold_to_splats() -> None:
    m, b, (ptr,) = kernel(PointerType(float32))
    x = b.value("splat", [b.constant(1.5, float32)], shape=[4, 8])
    y = b.constant(0.25, TileType((4, 8), float32))
    z = b.value("trans", [b.value("add", [x, y])], perm=[1, 0])
    c = b.value("cmp", [z, z], pred="eq")
    b.create("store", [b.value("splat", [ptr], shape=[8, 4]), b.value("select", [c, z, z]), c])
    b.create("return")
    filecheck(
        run(m, fold, dce),
        """
        CHECK: = constant() {type = type(tile<8x4xfp32>), value = 1.75} : tile<8x4xfp32>
        CHECK: = constant() {type = type(tile<8x4xint1>), value = true} : tile<8x4xint1>
        CHECK: store(
        CHECK-NOT: add(
        """,
    )


def test_integer_identities() -> None:
    m, b, (ptr, x) = kernel(PointerType(int32), int32)
    zero, one, ones = b.constant(0, int32), b.constant(1, int32), b.constant(-1, int32)
    v = b.value("add", [zero, x])
    v = b.value("mul", [v, one])
    v = b.value("and", [v, ones])
    v = b.value("xor", [v, zero])
    v = b.value("shl", [v, zero])
    b.create("store", [ptr, v])
    b.create("store", [ptr, b.value("mul", [x, zero])])
    b.create("store", [ptr, b.value("sub", [x, x])])
    b.create("store", [ptr, b.value("or", [ones, x])])
    b.create("return")
    filecheck(
        run(m, fold, dce),
        """
        CHECK: store(%0, %1)
        CHECK: %2 = constant() {type = type(int32), value = 0} : int32
        CHECK-NEXT: store(%0, %2)
        CHECK: = constant() {type = type(int32), value = 0} : int32
        CHECK: = constant() {type = type(int32), value = -1} : int32
        CHECK-NOT: add(
        CHECK-NOT: mul(
        """,
    )


def test_float_identities_are_left_alone() -> None:
    m, b, (ptr, x) = kernel(PointerType(float32), float32)
    b.create("store", [ptr, b.value("add", [x, b.constant(0.0, float32)])])
    b.create("store", [ptr, b.value("mul", [x, b.constant(0.0, float32)])])
    b.create("return")
    out = run(m, fold)
    filecheck(out, "CHECK: add(%1, %2)\nCHECK: mul(%1, %4)")


def test_select_on_a_constant_condition() -> None:
    m, b, (ptr, x, y) = kernel(PointerType(int32), int32, int32)
    b.create("store", [ptr, b.value("select", [b.constant(False, int1), x, y])])
    b.create("return")
    filecheck(run(m, fold, dce), "CHECK: store(%0, %2)\nCHECK-NOT: select(")


def test_if_on_a_constant_condition_inside_a_loop() -> None:
    m, b, (ptr, x, n) = kernel(PointerType(int32), int32, int32)

    def body(a: list) -> list:
        flag = b.value("cmp", [b.constant(1, int32), b.constant(2, int32)], pred="lt")
        branch = if_op(b, flag, lambda: [b.value("add", [a[1], a[0]])], lambda: [b.value("sub", [a[1], a[0]])])
        return [branch.result]

    loop = for_loop(b, b.constant(0, int32), n, b.constant(1, int32), [x], body)
    b.create("store", [ptr, loop.result])
    b.create("return")
    filecheck(
        run(m, fold, dce),
        """
        CHECK: ^(%6: int32, %7: int32):
        CHECK-NEXT: %8 = add(%7, %6) : int32
        CHECK-NEXT: yield(%8)
        CHECK-NOT: if(
        CHECK-NOT: sub(
        """,
    )


def test_loop_with_zero_trips_yields_its_initial_values() -> None:
    m, b, (ptr, x) = kernel(PointerType(int32), int32)
    five, three, one = b.constant(5, int32), b.constant(3, int32), b.constant(1, int32)
    dead = for_loop(b, five, three, one, [x], lambda a: [b.value("add", [a[1], a[1]])])
    live = for_loop(b, three, five, one, [x], lambda a: [b.value("add", [a[1], a[1]])])
    b.create("store", [ptr, dead.result])
    b.create("store", [ptr, live.result])
    b.create("return")
    out = run(m, fold, dce)
    assert out.count("= for(") == 1
    filecheck(out, "CHECK: store(%0, %1)")


def test_loop_bounds_whose_signedness_matters_are_left_alone() -> None:
    # -1 >= 3 is false when signed and true when unsigned: the loop's trip count depends on it.
    m, b, (ptr, x) = kernel(PointerType(uint32), uint32)
    lb, ub, one = b.constant(2**32 - 1, uint32), b.constant(3, uint32), b.constant(1, uint32)
    loop = for_loop(b, lb, ub, one, [x], lambda a: [a[0]])
    b.create("store", [ptr, loop.result])
    b.create("return")
    assert "= for(" in run(m, fold)


def test_folds_inside_reduce_regions() -> None:
    m, b, (ptr,) = kernel(PointerType(int32))
    data = b.value("arange", start=0, end=4)
    body = region(b, [int32, int32], lambda a: [b.value("add", [b.constant(3, int32), b.constant(4, int32)])])
    combine = b.create("reduce", [data], {"axis": 0}, regions=[body])
    b.create("store", [ptr, combine.result])
    b.create("return")
    filecheck(
        run(m, fold, dce),
        "CHECK: ^(%3: int32, %4: int32):\nCHECK-NEXT: %5 = constant() {type = type(int32), value = 7}",
    )


def test_shape_ops_of_a_tile_constant() -> None:
    m, b, (ptr,) = kernel(PointerType(int32))
    c = b.constant(7, I32x4)
    e = b.value("expand_dims", [c], axis=0)
    r = b.value("reshape", [b.value("broadcast", [e], shape=[2, 4])], shape=[8])
    lo, hi = b.create("split", [b.value("reshape", [r], shape=[4, 2])]).results
    j = b.value("cat", [lo, hi])
    b.create("store", [b.value("splat", [ptr], shape=[8]), j])
    b.create("return")
    filecheck(run(m, fold, dce), "CHECK: = constant() {type = type(tile<8xint32>), value = 7}\nCHECK-NEXT: = splat(")
