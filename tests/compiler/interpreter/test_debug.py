"""`device_print`, `device_assert`, the no-op ops, and the error for an op without a rule."""

from __future__ import annotations

import numpy as np
import pytest

from despina.compiler.errors import KernelRuntimeError
from despina.compiler.interpreter import UnsupportedOpError, run_kernel
from despina.compiler.ir.core import Op
from despina.compiler.ir.types import ScalarType, int1, int32

from .kernel import FILE, K, ptr


def test_print_one_line_per_program_and_element(capsys: pytest.CaptureFixture[str]) -> None:
    k = K(x=ptr("int32"))
    pid = k.pid()
    k.void("device_print", k.op("add", k.splat(pid, 3), k.arange(3)), prefix="v: ")
    k.void("device_print", pid, prefix="pid=")
    k.run(2, np.zeros(1, np.int32))
    assert capsys.readouterr().out.splitlines() == [
        "pid (0, 0, 0) idx (0) v: 0",
        "pid (0, 0, 0) idx (1) v: 1",
        "pid (0, 0, 0) idx (2) v: 2",
        "pid (1, 0, 0) idx (0) v: 1",
        "pid (1, 0, 0) idx (1) v: 2",
        "pid (1, 0, 0) idx (2) v: 3",
        "pid (0, 0, 0) idx () pid=0",
        "pid (1, 0, 0) idx () pid=1",
    ]


def test_print_2d_hex_several_operands_and_only_active_programs(capsys: pytest.CaptureFixture[str]) -> None:
    k = K(x=ptr("int32"))
    pid = k.pid()
    t = k.op("reshape", k.op("sub", k.arange(4), k.splat(k.const(1), 4)), shape=[2, 2])
    f = k.op("splat", k.const(1.5, ScalarType("fp32")), shape=[1])

    def then() -> list:
        k.void("device_print", t, f, prefix="t ", hex=True)
        return []

    k.if_(k.op("cmp", pid, k.const(1), pred="eq"), then, lambda: [])
    k.run(3, np.zeros(1, np.int32))
    assert capsys.readouterr().out.splitlines() == [
        "pid (1, 0, 0) idx (0, 0) t (operand 0) 0xffffffff",
        "pid (1, 0, 0) idx (0, 1) t (operand 0) 0x00000000",
        "pid (1, 0, 0) idx (1, 0) t (operand 0) 0x00000001",
        "pid (1, 0, 0) idx (1, 1) t (operand 0) 0x00000002",
        "pid (1, 0, 0) idx (0) t (operand 1) 0x3fc00000",
    ]


def test_print_floats_and_bools(capsys: pytest.CaptureFixture[str]) -> None:
    k = K(x=ptr("int32"))
    k.void("device_print", k.const(0.1, ScalarType("fp32")), k.const(True, int1), k.const(2.5, ScalarType("bf16")))
    k.run(1, np.zeros(1, np.int32))
    assert capsys.readouterr().out.splitlines() == [
        "pid (0, 0, 0) idx () (operand 0) 0.1",
        "pid (0, 0, 0) idx () (operand 1) 1",
        "pid (0, 0, 0) idx () (operand 2) 2.5",
    ]


def test_assert_names_message_kernel_line_program_and_element() -> None:
    k = K("checked", x=ptr("int32"))
    v = k.op("load", k.at(k.arg["x"], k.offsets(8)))
    k.line(21).void("device_assert", k.op("cmp", v, k.splat(k.const(100), 8), pred="lt"), msg="x must stay below 100")
    x = np.arange(32, dtype=np.int32)
    k.run(4, x)
    x[21] = 100
    x[30] = 200
    with pytest.raises(KernelRuntimeError) as excinfo:
        k.run(4, x)
    msg = str(excinfo.value)
    assert "'checked'" in msg and f"{FILE}:21" in msg and "x must stay below 100" in msg
    assert "program (2, 0, 0)" in msg and "element (5)" in msg


def test_assert_ignores_inactive_programs_and_reports_scalars() -> None:
    k = K("scalar_check", x=ptr("int32"))
    pid = k.pid()

    def then() -> list:
        k.void("device_assert", k.lt(pid, k.const(5)), msg="pid < 5")
        return []

    k.if_(k.lt(pid, k.const(6)), then, lambda: [])
    with pytest.raises(KernelRuntimeError, match=r"pid < 5 \(program \(5, 0, 0\)\)"):
        k.run(10, np.zeros(1, np.int32))


def test_no_op_ops() -> None:
    k = K(x=ptr("int32"))
    offs = k.op(
        "multiple_of", k.op("max_contiguous", k.op("max_constancy", k.arange(4), values=[1]), values=[4]), values=[4]
    )
    k.void("assume", k.lt(k.pid(), k.const(100)))
    k.void("barrier")
    k.void("store", k.at(k.arg["x"], offs), offs)
    x = np.zeros(4, np.int32)
    k.run(1, x)
    np.testing.assert_array_equal(x, np.arange(4))


def test_an_op_without_a_rule_is_named() -> None:
    k = K("odd", x=ptr("int32"))
    module = k.module()
    module.kernel.body.ops.insert(0, Op("frobnicate", [], [int32]))
    with pytest.raises(UnsupportedOpError, match="no rule for op 'frobnicate'.*'odd'"):
        run_kernel(module, (1, 1, 1), [np.zeros(1, np.int32)])
