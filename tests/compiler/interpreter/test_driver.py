"""The driver: batches of programs, grids, arguments, and pointers whose base differs per program."""

from __future__ import annotations

import numpy as np
import pytest

import despina.compiler.interpreter.core as core
from despina.compiler.ir.types import ScalarType, float16, int8, int32, int64, uint32

from .kernel import K, ptr, vector_add

SEM = {"sem": "relaxed", "scope": "gpu"}


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of a few programs, so that a launch runs as many batches and a partial one."""
    monkeypatch.setattr(core, "BATCH_ELEMENTS", 3 * 256)


@pytest.mark.usefixtures("small_batches")
def test_many_batches_with_a_partial_last_one() -> None:
    n = 256 * 10 - 17
    x, y = np.arange(n, dtype=np.float32), np.ones(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    vector_add(256).run(10, x, y, out, n)
    np.testing.assert_array_equal(out, x + 1)


@pytest.mark.usefixtures("small_batches")
def test_program_ids_across_batches_of_a_3d_grid(capsys: pytest.CaptureFixture[str]) -> None:
    k = K(out=ptr("int32"), counter=ptr("int32"))
    x, y, z = (k.pid(a) for a in range(3))
    ticket = k.op("atomic_rmw", k.arg["counter"], k.const(1), kind="add", **SEM)
    linear = k.op("add", x, k.op("mul", k.const(5), k.op("add", y, k.op("mul", k.const(3), z))))
    k.void("store", k.op("addptr", k.arg["out"], linear), ticket)
    k.void("device_print", k.op("splat", z, shape=[256]), prefix="z=")
    out, counter = np.full(30, -1, np.int32), np.zeros(1, np.int32)
    k.run((5, 3, 2), out, counter)
    # Programs run (and take tickets) in order x, then y, then z.
    np.testing.assert_array_equal(out, np.arange(30))
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 30 * 256
    assert lines[0] == "pid (0, 0, 0) idx (0) z=0" and lines[-1] == "pid (4, 2, 1) idx (255) z=1"


def test_row_pointers_that_differ_per_program() -> None:
    # out[r, :] = a[r, :] * 2 with a row pointer per program, then a chained offset.
    k = K(a=ptr("fp16"), out=ptr("fp16"), stride=int32)
    row = k.op("mul", k.pid(), k.arg["stride"])
    a_row = k.op("addptr", k.arg["a"], row)
    half = k.at(k.op("addptr", k.arg["out"], row), k.arange(8))
    rest = k.op("addptr", half, k.splat(k.const(8), 8))
    v = k.op("load", k.at(a_row, k.arange(16)))
    lo, hi = k.ops("split", k.op("trans", k.op("reshape", v, shape=[2, 8]), perm=[1, 0]))
    k.void("store", half, k.op("add", lo, lo))
    k.void("store", rest, k.op("add", hi, hi))
    a = np.arange(6 * 20, dtype=np.float16).reshape(6, 20)
    out = np.zeros((6, 20), np.float16)
    k.run(6, a, out, 20)
    np.testing.assert_array_equal(out[:, :16], a[:, :16] * 2)
    np.testing.assert_array_equal(out[:, 16:], 0)


@pytest.mark.parametrize(
    "value, ty, expected",
    [
        (np.int64(7), int32, 7),
        (2**31, int32, -(2**31)),
        (-1, uint32, 2**32 - 1),
        (np.float32(1.5), float16, 1.5),
        (True, int8, 1),
        (np.int16(-3), int64, -3),
    ],
)
def test_scalar_arguments_take_the_parameter_type(value: object, ty: ScalarType, expected: float) -> None:
    k = K(out=ptr(ty), v=ty)
    k.void("store", k.arg["out"], k.arg["v"])
    out = np.zeros(
        1,
        dtype={"int32": np.int32, "uint32": np.uint32, "fp16": np.float16, "int8": np.int8, "int64": np.int64}[ty.name],
    )
    k.run(1, out, value)
    assert out[0] == expected
