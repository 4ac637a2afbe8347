from __future__ import annotations

from passes_util import filecheck, for_loop, kernel, run

from despina.compiler.ir.types import PointerType, TileType, float32, int1, int32
from despina.compiler.passes.canonicalize import canonicalize
from despina.compiler.passes.dce import dce

F4x8 = TileType((4, 8), float32)


def test_shape_ops_to_the_same_type_and_same_type_casts_vanish() -> None:
    m, b, (ptr, x) = kernel(PointerType(float32), F4x8)
    y = b.value("broadcast", [x], shape=[4, 8])
    y = b.value("reshape", [y], shape=[4, 8])
    y = b.value("trans", [y], perm=[0, 1])
    y = b.value("cast", [y], to=float32)
    b.create("store", [b.value("splat", [ptr], shape=[4, 8]), y])
    b.create("return")
    filecheck(run(m, canonicalize, dce), "CHECK: = splat(%0)\nCHECK-NEXT: store(%2, %1)")


def test_square_transpose_is_not_an_identity() -> None:
    m, b, (ptr, x) = kernel(PointerType(float32), TileType((4, 4), float32))
    b.create("store", [b.value("splat", [ptr], shape=[4, 4]), b.value("trans", [x], perm=[1, 0])])
    b.create("return")
    assert "trans(%1) {perm = [1, 0]}" in run(m, canonicalize)


def test_shape_ops_of_a_splat_become_one_splat() -> None:
    m, b, (ptr, s) = kernel(PointerType(float32), float32)
    sp = b.value("splat", [s], shape=[8])
    e = b.value("expand_dims", [sp], axis=0)
    bc = b.value("broadcast", [e], shape=[4, 8])
    t = b.value("trans", [bc], perm=[1, 0])
    r = b.value("reshape", [t], shape=[32])
    b.create("store", [b.value("splat", [ptr], shape=[32]), r])
    b.create("return")
    filecheck(
        run(m, canonicalize, dce),
        """
        CHECK: %2 = splat(%1) {shape = [32]} : tile<32xfp32>
        CHECK-NOT: broadcast(
        CHECK-NOT: expand_dims(
        CHECK-NOT: trans(
        CHECK-NOT: reshape(
        """,
    )


def test_trans_of_trans_composes() -> None:
    m, b, (ptr, x) = kernel(PointerType(float32), TileType((2, 3, 4), float32))
    t1 = b.value("trans", [x], perm=[1, 2, 0])  # 3x4x2
    t2 = b.value("trans", [t1], perm=[2, 0, 1])  # back to 2x3x4
    t3 = b.value("trans", [t2], perm=[2, 1, 0])  # 4x3x2
    t4 = b.value("trans", [t3], perm=[1, 0, 2])  # 3x4x2 = x permuted by [1, 2, 0]
    b.create("store", [b.value("splat", [ptr], shape=[3, 4, 2]), t4])
    b.create("return")
    filecheck(
        run(m, canonicalize, dce),
        """
        CHECK: %2 = trans(%1) {perm = [1, 2, 0]} : tile<3x4x2xfp32>
        CHECK-NOT: trans(
        """,
    )


def test_reshape_of_reshape_is_one_reshape() -> None:
    m, b, (ptr, x) = kernel(PointerType(float32), F4x8)
    r1 = b.value("reshape", [x], shape=[32])
    r2 = b.value("reshape", [r1], shape=[2, 16])
    r3 = b.create("reshape", [r1], {"shape": [8, 4], "can_reorder": True}).result
    b.create("store", [b.value("splat", [ptr], shape=[2, 16]), r2])
    b.create("store", [b.value("splat", [ptr], shape=[8, 4]), r3])
    b.create("store", [b.value("splat", [ptr], shape=[4, 8]), b.value("reshape", [r1], shape=[4, 8])])
    b.create("return")
    filecheck(
        run(m, canonicalize, dce),
        """
        CHECK: = reshape(%1) {shape = [2, 16]} : tile<2x16xfp32>
        CHECK: = reshape(%1) {can_reorder = true, shape = [8, 4]} : tile<8x4xfp32>
        CHECK: store(%6, %1)
        CHECK-NOT: shape = [32]
        """,
    )


def test_select_of_one_value_and_double_negation_inside_a_loop() -> None:
    m, b, (ptr, x, n, c) = kernel(PointerType(int32), int32, int32, int1)

    def body(a: list) -> list:
        v = b.value("not", [b.value("not", [a[1]])])
        w = b.value("neg", [b.value("neg", [v])])
        return [b.value("select", [c, w, w])]

    loop = for_loop(b, b.constant(0, int32), n, b.constant(1, int32), [x], body)
    b.create("store", [ptr, loop.result])
    b.create("return")
    filecheck(run(m, canonicalize, dce), "CHECK: ^(%7: int32, %8: int32):\nCHECK-NEXT: yield(%8)")
