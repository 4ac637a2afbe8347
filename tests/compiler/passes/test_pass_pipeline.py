from __future__ import annotations

import numpy as np
import pytest
from passes_util import for_loop, helper, if_op, kernel, text

from despina.compiler.interpreter import run_kernel
from despina.compiler.ir.core import IRError, Module
from despina.compiler.ir.types import PointerType, TileType, float32, int8, int32
from despina.compiler.passes import PIPELINE, run_pipeline

F64 = TileType((64,), float32)
I32x16 = TileType((16,), int32)
I8x16 = TileType((16,), int8)


def _scaled_copy() -> Module:
    """out[i] = scale(x[i]) for i < n, with a helper, dead code and repeated index math."""
    m, b, (x_ptr, out_ptr, n) = kernel(PointerType(float32), PointerType(float32), int32)
    hb, (v,) = helper(m, "scale", [F64], [F64])
    two = hb.value("mul", [hb.constant(0.5, float32), hb.constant(4.0, float32)])
    hb.create(
        "return", [hb.value("mul", [v, hb.value("broadcast", [hb.value("splat", [two], shape=[64])], shape=[64])])]
    )

    def offsets() -> tuple:
        start = b.value("mul", [b.value("program_id", axis=0), b.constant(64, int32)])
        offs = b.value("add", [b.value("splat", [start], shape=[64]), b.value("arange", start=0, end=64)])
        return offs, b.value("cmp", [offs, b.value("splat", [n], shape=[64])], pred="lt")

    offs, mask = offsets()
    x = b.value("load", [b.value("addptr", [b.value("splat", [x_ptr], shape=[64]), offs]), mask])
    y = b.create("call", [x], {"callee": "scale", "results": [F64]}).result
    b.value("exp", [y])  # unused
    offs2, mask2 = offsets()
    b.create("store", [b.value("addptr", [b.value("splat", [out_ptr], shape=[64]), offs2]), y, mask2])
    b.create("return")
    return m


GOLDEN = """\
module {version = 1} {
func @k(%0: ptr<fp32>, %1: ptr<fp32>, %2: int32) kernel {names = ["a0", "a1", "a2"]} {
  %3 = program_id() {axis = 0} : int32
  %4 = constant() {type = type(int32), value = 64} : int32
  %5 = mul(%3, %4) : int32
  %6 = splat(%5) {shape = [64]} : tile<64xint32>
  %7 = arange() {end = 64, start = 0} : tile<64xint32>
  %8 = add(%6, %7) : tile<64xint32>
  %9 = splat(%2) {shape = [64]} : tile<64xint32>
  %10 = cmp(%8, %9) {pred = "lt"} : tile<64xint1>
  %11 = splat(%0) {shape = [64]} : tile<64xptr<fp32>>
  %12 = addptr(%11, %8) : tile<64xptr<fp32>>
  %13 = load(%12, %10) : tile<64xfp32>
  %14 = constant() {type = type(tile<64xfp32>), value = 2.0} : tile<64xfp32>
  %15 = mul(%13, %14) : tile<64xfp32>
  %16 = splat(%1) {shape = [64]} : tile<64xptr<fp32>>
  %17 = addptr(%16, %8) : tile<64xptr<fp32>>
  store(%17, %15, %10)
  return()
}
}
"""


def test_pipeline_golden() -> None:
    assert text(run_pipeline(_scaled_copy(), verify_each=True)) == GOLDEN


def test_pipeline_lists_the_passes_in_order() -> None:
    assert [name for name, _ in PIPELINE] == ["inline", "canonicalize", "fold", "cse", "scales", "dce"]


def test_dump_sees_the_module_after_each_pass() -> None:
    seen: list[tuple[str, int]] = []
    run_pipeline(_scaled_copy(), dump=lambda name, m: seen.append((name, len(m.kernel.body.ops))))
    assert [name for name, _ in seen] == [name for name, _ in PIPELINE]
    assert seen[-1][1] == GOLDEN.count("\n  ")


def test_verify_each_names_the_pass_that_broke_the_ir() -> None:
    def drop_first_op(m: Module) -> Module:
        del m.kernel.body.ops[0]
        return m

    with pytest.raises(IRError, match="after pass 'broken': function 'k', op 'mul'"):
        run_pipeline(_scaled_copy(), passes=PIPELINE[:1] + [("broken", drop_first_op)], verify_each=True)


def _mixed_arithmetic() -> Module:
    """out[i] = f(x[i]) over int8 wrap-around, C division, a loop, a constant branch and casts."""
    m, b, (x_ptr, out_ptr) = kernel(PointerType(int8), PointerType(int32))
    hb, (v, k) = helper(m, "step", [I32x16, int32], [I32x16])
    hb.create("return", [hb.value("add", [v, hb.value("splat", [k], shape=[16])])])
    start = b.value("mul", [b.value("program_id", axis=0), b.constant(16, int32)])
    offs = b.value("add", [b.value("splat", [start], shape=[16]), b.value("arange", start=0, end=16)])
    x = b.value("load", [b.value("addptr", [b.value("splat", [x_ptr], shape=[16]), offs])])
    hundred = b.constant(100, I8x16)
    y = b.value("mul", [x, b.value("add", [hundred, hundred])])  # int8 wrap: 100 + 100 = -56
    q = b.value("floordiv", [b.constant(-7, int32), b.constant(2, int32)])  # -3
    r = b.value("rem", [b.constant(-7, int32), b.constant(2, int32)])  # -1
    wide = b.value("cast", [y], to=int32)

    def body(a: list) -> list:
        def then() -> list:
            return [b.create("call", [a[1], a[0]], {"callee": "step", "results": [I32x16]}).result]

        cond = b.value("cmp", [q, r], pred="lt")
        return [if_op(b, cond, then, lambda: [a[1]]).result]

    loop = for_loop(b, b.constant(0, int32), b.constant(3, int32), b.constant(1, int32), [wide], body)
    scaled = b.value("mul", [loop.result, b.value("broadcast", [b.value("splat", [q], shape=[16])], shape=[16])])
    b.create("store", [b.value("addptr", [b.value("splat", [out_ptr], shape=[16]), offs]), scaled])
    b.create("return")
    return m


def test_pipeline_keeps_what_the_interpreter_computes() -> None:
    x = np.arange(-64, 64, dtype=np.int8)
    expected, got = np.zeros(128, np.int32), np.zeros(128, np.int32)
    run_kernel(run_pipeline(_mixed_arithmetic(), passes=PIPELINE[:1]), (8, 1, 1), [x, expected])
    optimized = run_pipeline(_mixed_arithmetic(), verify_each=True)
    run_kernel(optimized, (8, 1, 1), [x, got])
    assert np.array_equal(got, expected)
    assert np.array_equal(expected, ((x.astype(np.int8) * np.int8(-56)).astype(np.int32) + 3) * -3)
    out = text(optimized)
    assert "if(" not in out and "floordiv(" not in out and "call(" not in out
