from __future__ import annotations

from passes_util import filecheck, for_loop, if_op, kernel, region, run

from despina.compiler.ir.core import Block
from despina.compiler.ir.types import PointerType, TileType, float32, int32
from despina.compiler.passes.dce import dce

I32x4 = TileType((4,), int32)


def test_unused_chains_go_and_stores_keep_what_they_use() -> None:
    m, b, (ptr, x) = kernel(PointerType(float32), float32)
    dead = b.value("exp", [b.value("add", [x, x])])
    b.value("mul", [dead, dead])
    kept = b.value("sub", [x, x])
    b.create("store", [ptr, kept])
    b.create("return")
    filecheck(
        run(m, dce),
        """
        CHECK: kernel
        CHECK-NEXT: %2 = sub(%1, %1) : fp32
        CHECK-NEXT: store(%0, %2)
        CHECK-NEXT: return()
        """,
    )


def test_unused_load_goes_volatile_load_and_side_effects_stay() -> None:
    m, b, (ptr, c) = kernel(PointerType(float32), int32)
    b.value("load", [ptr])
    b.create("load", [ptr], {"volatile": True})
    b.create("atomic_rmw", [ptr, b.value("load", [ptr])], {"kind": "fadd", "sem": "relaxed", "scope": "gpu"})
    b.create("assume", [b.value("cmp", [c, c], pred="eq")])
    b.create("barrier")
    b.create("return")
    out = run(m, dce)
    assert out.count("load(") == 2
    filecheck(
        out,
        """
        CHECK: = load(%0) {volatile = true}
        CHECK-NEXT: = load(%0) : fp32
        CHECK-NEXT: atomic_rmw(
        CHECK-NEXT: cmp(
        CHECK-NEXT: assume(
        CHECK-NEXT: barrier()
        """,
    )


def test_pure_loop_with_unused_results_goes_whole() -> None:
    m, b, (ptr, x, n) = kernel(PointerType(float32), float32, int32)
    zero, one = b.constant(0, int32), b.constant(1, int32)
    for_loop(b, zero, n, one, [x], lambda a: [b.value("add", [a[1], a[1]])])
    b.create("return")
    filecheck(run(m, dce), "CHECK: kernel\nCHECK-NEXT: return()")


def test_loop_with_a_store_stays_and_its_body_is_cleaned() -> None:
    m, b, (ptr, x, n) = kernel(PointerType(float32), float32, int32)
    zero, one = b.constant(0, int32), b.constant(1, int32)

    def body(a: list) -> list:
        b.value("mul", [a[1], a[1]])  # dead inside the loop
        b.create("store", [ptr, a[1]])
        return [b.value("add", [a[1], a[1]])]

    for_loop(b, zero, n, one, [x], body)
    b.create("return")
    filecheck(
        run(m, dce),
        """
        CHECK: = for(%3, %2, %4, %1) (
        CHECK: ^(%6: int32, %7: fp32):
        CHECK-NEXT: store(%0, %7)
        CHECK-NEXT: %8 = add(%7, %7) : fp32
        CHECK-NEXT: yield(%8)
        CHECK-NOT: mul(
        """,
    )


def test_if_with_side_effects_stays_and_pure_if_goes() -> None:
    m, b, (ptr, x, c) = kernel(PointerType(float32), float32, int32)
    cond = b.value("cmp", [c, c], pred="eq")
    if_op(b, cond, lambda: [b.value("neg", [x])], lambda: [x])

    def then() -> list:
        b.value("abs", [x])
        b.create("store", [ptr, x])
        return []

    if_op(b, cond, then, lambda: [])
    b.create("return")
    out = run(m, dce)
    assert out.count("if(") == 1 and "neg(" not in out and "abs(" not in out
    filecheck(out, "CHECK: if(%3) (\nCHECK: store(%0, %1)")


def test_unused_reduce_and_while_go() -> None:
    m, b, (ptr, x) = kernel(PointerType(int32), int32)
    data = b.value("arange", start=0, end=4)
    b.create("reduce", [data], {"axis": 0}, regions=[region(b, [int32, int32], lambda a: [b.value("add", a)])])
    before = Block([int32])
    with b.at(before):
        b.create("condition", [b.value("cmp", [before.args[0], x], pred="lt"), before.args[0]])
    after = region(b, [int32], lambda a: [b.value("add", [a[0], a[0]])])
    b.create("while", [x], regions=[before, after])
    b.create("return")
    filecheck(run(m, dce), "CHECK: kernel\nCHECK-NEXT: return()")


def test_unused_inline_asm_goes_only_when_declared_pure() -> None:
    m, b, (x,) = kernel(int32)
    for pure in (True, False):
        b.create("inline_asm", [x], {"asm": "mov.b32 $0, $1;", "constraints": "=r,r", "pure": pure, "pack": 1,
                                     "results": [int32]})
    b.create("return")
    out = run(m, dce)
    assert out.count("inline_asm(") == 1
    filecheck(out, "CHECK: inline_asm(%0) {asm = \"mov.b32 $0, $1;\", constraints = \"=r,r\", pack = 1, pure = false")
