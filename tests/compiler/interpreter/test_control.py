"""Control flow when the programs of a batch agree and when they diverge."""

from __future__ import annotations

import numpy as np
import pytest

from despina.compiler.errors import KernelRuntimeError
from despina.compiler.ir.types import float32 as fp32
from despina.compiler.ir.types import float64, int1, int32, int64

from .kernel import K, ptr


def test_divergent_if_merges_results_and_masks_stores() -> None:
    k = K(x=ptr("int32"), out=ptr("int32"), touched=ptr("int32"))
    pid = k.pid()
    x = k.op("load", k.op("addptr", k.arg["x"], pid))
    even = k.op("cmp", k.op("rem", pid, k.const(2)), k.const(0), pred="eq")

    def then() -> list:
        k.void("store", k.op("addptr", k.arg["touched"], pid), k.const(1))
        return [k.op("mul", x, k.const(2))]

    r = k.if_(even, then, lambda: [k.op("add", x, k.const(100))])[0]
    k.void("store", k.op("addptr", k.arg["out"], pid), r)
    x_, out, touched = np.arange(10, dtype=np.int32), np.zeros(10, np.int32), np.zeros(10, np.int32)
    k.run(10, x_, out, touched)
    even_ = np.arange(10) % 2 == 0
    np.testing.assert_array_equal(out, np.where(even_, x_ * 2, x_ + 100))
    np.testing.assert_array_equal(touched, even_)


def test_inactive_programs_make_no_out_of_bounds_accesses() -> None:
    k = K(x=ptr("fp32"), out=ptr("fp32"), n=int32)
    pid = k.pid()
    inside = k.lt(pid, k.arg["n"])

    def then() -> list:
        k.void("store", k.op("addptr", k.arg["out"], pid), k.op("load", k.op("addptr", k.arg["x"], pid)))
        return []

    k.if_(inside, then, lambda: [])
    x, out = np.arange(5, dtype=np.float32), np.zeros(5, np.float32)
    k.run(64, x, out, 5)
    np.testing.assert_array_equal(out, x)


def test_uniform_if_runs_one_branch() -> None:
    k = K(out=ptr("int32"), flag=int1)
    r = k.if_(k.arg["flag"], lambda: [k.const(1)], lambda: [k.const(2)])[0]
    k.void("store", k.op("addptr", k.arg["out"], k.pid()), r)
    for flag, value in ((True, 1), (False, 2)):
        out = np.zeros(4, np.int32)
        k.run(4, out, flag)
        np.testing.assert_array_equal(out, value)


def test_for_with_per_program_trip_counts() -> None:
    # out[p] = sum(range(p)); log[p, i] = i for i < p, written from inside the loop.
    k = K(out=ptr("int64"), log=ptr("int32"))
    pid = k.pid()

    def body(i, acc):
        k.void("store", k.op("addptr", k.arg["log"], k.op("add", k.op("mul", pid, k.const(8)), i)), i)
        return [k.op("add", acc, k.op("cast", i, to=int64))]

    total = k.for_(k.const(0), pid, k.const(1), [k.const(0, int64)], body)[0]
    k.void("store", k.op("addptr", k.arg["out"], pid), total)
    out, log = np.zeros(8, np.int64), np.full((8, 8), -1, np.int32)
    k.run(8, out, log)
    np.testing.assert_array_equal(out, [sum(range(p)) for p in range(8)])
    np.testing.assert_array_equal(log, [[i if i < p else -1 for i in range(8)] for p in range(8)])


@pytest.mark.parametrize("lo, hi, step", [(10, 0, -3), (0, 10, 3), (5, 5, 1), (7, 3, 2)])
def test_for_steps(lo: int, hi: int, step: int) -> None:
    k = K(out=ptr("int32"))
    count, last = k.for_(
        k.const(lo),
        k.const(hi),
        k.const(step),
        [k.const(0), k.const(-1)],
        lambda i, c, _: [k.op("add", c, k.const(1)), i],
    )
    k.void("store", k.arg["out"], count)
    k.void("store", k.op("addptr", k.arg["out"], k.const(1)), last)
    out = np.zeros(2, np.int32)
    k.run(1, out)
    expected = list(range(lo, hi, step))
    assert list(out) == [len(expected), expected[-1] if expected else -1]


def test_for_with_per_program_bounds_and_negative_step() -> None:
    k = K(out=ptr("int32"))
    pid = k.pid()
    count = k.for_(pid, k.const(0), k.const(-2), [k.const(0)], lambda i, c: [k.op("add", c, i)])[0]
    k.void("store", k.op("addptr", k.arg["out"], pid), count)
    out = np.zeros(9, np.int32)
    k.run(9, out)
    np.testing.assert_array_equal(out, [sum(range(p, 0, -2)) for p in range(9)])


def test_loop_carried_pointers() -> None:
    # Row sums of an 8x64 matrix, 16 columns at a time, advancing a tile of pointers.
    k = K(a=ptr("fp32"), out=ptr("fp32"))
    pid = k.pid()
    row = k.op("addptr", k.arg["a"], k.op("mul", pid, k.const(64)))
    ptrs = k.at(row, k.arange(16))
    zero = k.splat(k.const(0.0, fp32), 16)

    def body(i, acc, p):
        return [k.op("add", acc, k.op("load", p)), k.op("addptr", p, k.splat(k.const(16), 16))]

    acc, _ = k.for_(k.const(0), k.const(4), k.const(1), [zero, ptrs], body)
    total = k.combine("reduce", [acc], lambda a, b: [k.op("add", a, b)], axis=0)[0]
    k.void("store", k.op("addptr", k.arg["out"], pid), total)
    a = np.random.default_rng(0).random((8, 64), dtype=np.float32)
    out = np.zeros(8, np.float32)
    k.run(8, a, out)
    np.testing.assert_allclose(out, a.sum(axis=1), rtol=1e-6)


def _collatz_steps(n: int) -> int:
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def test_divergent_while() -> None:
    k = K(out=ptr("int32"))
    pid = k.pid()
    start = k.op("add", pid, k.const(1))

    def before(n, steps):
        return [k.op("cmp", n, k.const(1), pred="ne"), n, steps]

    def after(n, steps):
        odd = k.op("cmp", k.op("and", n, k.const(1)), k.const(1), pred="eq")
        up = k.op("add", k.op("mul", n, k.const(3)), k.const(1))
        down = k.op("shr", n, k.const(1))
        return [k.op("select", odd, up, down), k.op("add", steps, k.const(1))]

    _, steps = k.while_([start, k.const(0)], before, after)
    k.void("store", k.op("addptr", k.arg["out"], pid), steps)
    out = np.zeros(40, np.int32)
    k.run(40, out)
    np.testing.assert_array_equal(out, [_collatz_steps(p + 1) for p in range(40)])


def test_while_results_come_from_condition_and_stores_stop_with_the_program() -> None:
    # Program p counts i up while i < p, storing i each round; the result is i * 10 at exit.
    k = K(out=ptr("int32"), log=ptr("int32"))
    pid = k.pid()

    def before(i):
        return [k.lt(i, pid), k.op("mul", i, k.const(10))]

    def after(i10):
        i = k.op("floordiv", i10, k.const(10))
        k.void(
            "store",
            k.op("addptr", k.arg["log"], k.op("add", k.op("mul", pid, k.const(6)), i)),
            k.op("add", i, k.const(1)),
        )
        return [k.op("add", i, k.const(1))]

    result = k.while_([k.const(0)], before, after)[0]
    k.void("store", k.op("addptr", k.arg["out"], pid), result)
    out, log = np.zeros(6, np.int32), np.zeros((6, 6), np.int32)
    k.run(6, out, log)
    np.testing.assert_array_equal(out, np.arange(6) * 10)
    np.testing.assert_array_equal(log, [[i + 1 if i < p else 0 for i in range(6)] for p in range(6)])


def test_nested_divergence() -> None:
    # For each program: for i in range(pid): if i % 2: acc += i  -- inside a divergent if.
    k = K(out=ptr("int32"))
    pid = k.pid()
    big = k.op("cmp", pid, k.const(3), pred="gt")

    def loop() -> list:
        def body(i, acc):
            odd = k.op("cmp", k.op("rem", i, k.const(2)), k.const(1), pred="eq")
            return k.if_(odd, lambda: [k.op("add", acc, i)], lambda: [acc])

        return k.for_(k.const(0), pid, k.const(1), [k.const(0)], body)

    r = k.if_(big, loop, lambda: [k.const(-1)])[0]
    k.void("store", k.op("addptr", k.arg["out"], pid), r)
    out = np.zeros(10, np.int32)
    k.run(10, out)
    np.testing.assert_array_equal(out, [sum(i for i in range(p) if i % 2) if p > 3 else -1 for p in range(10)])


def test_call_runs_the_callee() -> None:
    k = K(out=ptr("int32"))
    clamp = k.helper(
        "clamp", [int32, int32], [int32], lambda x, hi: k.if_(k.op("cmp", x, hi, pred="gt"), lambda: [hi], lambda: [x])
    )
    twice = k.helper(
        "twice",
        [int32],
        [int32],
        lambda x: [k.op("add", *k.ops("call", x, k.const(5), callee=clamp, results=[int32]) * 2)],
    )
    pid = k.pid()
    r = k.ops("call", pid, callee=twice, results=[int32])[0]
    k.void("store", k.op("addptr", k.arg["out"], pid), r)
    out = np.zeros(8, np.int32)
    k.run(8, out)
    np.testing.assert_array_equal(out, 2 * np.minimum(np.arange(8), 5))


def test_zero_step_is_an_error() -> None:
    k = K("spin", out=ptr("int32"))
    k.line(4).for_(k.const(0), k.const(4), k.const(0), [], lambda i: [])
    with pytest.raises(KernelRuntimeError, match="'spin' at .*:4: 'for' loop with step 0"):
        k.run(1, np.zeros(1, np.int32))


def test_grid_axes() -> None:
    k = K(out=ptr("int32"))
    x, y, z = (k.pid(a) for a in range(3))
    nx, ny, nz = (k.op("num_programs", axis=a) for a in range(3))
    linear = k.op("add", x, k.op("mul", nx, k.op("add", y, k.op("mul", ny, z))))
    value = k.op("add", k.op("mul", x, k.const(10000)), k.op("add", k.op("mul", y, k.const(100)), z))
    k.void("store", k.op("addptr", k.arg["out"], linear), value)
    k.void("store", k.op("addptr", k.arg["out"], k.op("mul", k.op("mul", nx, ny), nz)), k.op("mul", nz, k.const(7)))
    out = np.zeros(3 * 4 * 5 + 1, np.int32)
    k.run((3, 4, 5), out)
    expected = [x * 10000 + y * 100 + z for z in range(5) for y in range(4) for x in range(3)]
    np.testing.assert_array_equal(out[:-1], expected)
    assert out[-1] == 35


def test_empty_grid_does_nothing() -> None:
    k = K(out=ptr("int32"))
    k.void("store", k.arg["out"], k.const(1))
    out = np.zeros(1, np.int32)
    k.run((0, 4, 1), out)
    assert out[0] == 0


def test_pointers_carried_through_divergent_trip_counts() -> None:
    # Program p sums x[8p : 8p + p] by walking a scalar pointer p steps.
    k = K(x=ptr("fp64"), out=ptr("fp64"))
    pid = k.pid()
    start = k.op("addptr", k.arg["x"], k.op("mul", pid, k.const(8)))

    def body(i, acc, p):
        return [k.op("add", acc, k.op("load", p)), k.op("addptr", p, k.const(1))]

    total, _ = k.for_(k.const(0), pid, k.const(1), [k.const(0.0, float64), start], body)
    k.void("store", k.op("addptr", k.arg["out"], pid), total)
    x, out = np.arange(64, dtype=np.float64), np.zeros(8)
    k.run(8, x, out)
    np.testing.assert_array_equal(out, [x[8 * p : 8 * p + p].sum() for p in range(8)])


def test_uniform_while_inside_a_divergent_branch() -> None:
    k = K(out=ptr("int32"))
    pid = k.pid()

    def loop() -> list:
        return k.while_([k.const(0)], lambda i: [k.lt(i, k.const(5)), i], lambda i: [k.op("add", i, k.const(1))])

    r = k.if_(k.lt(pid, k.const(2)), loop, lambda: [k.const(-1)])[0]
    k.void("store", k.op("addptr", k.arg["out"], pid), r)
    out = np.zeros(4, np.int32)
    k.run(4, out)
    np.testing.assert_array_equal(out, [5, 5, -1, -1])
