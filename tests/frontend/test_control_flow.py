"""Control flow in kernels: if/elif/else, for, while, loop-carried tiles, early return, static loops."""

from __future__ import annotations

import numpy as np
import pytest

import despina
import despina.language as tl
from despina.compiler.ir.printer import print_module

N = 16


@despina.jit
def branch_kernel(x_ptr, out_ptr, mode, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    if mode == 0:
        y = x + 1.0
    elif mode == 1:
        y = x * 2.0
    else:
        y = -x
    tl.store(out_ptr + offs, y)


@pytest.mark.parametrize("mode", [0, 1, 5])
def test_if_elif_else_on_runtime_scalar(device, mode):
    x = np.arange(N, dtype=np.float32)
    out = device.zeros(N, "fp32")
    branch_kernel[(1,)](device.put(x), out, mode, N=N)
    expected = {0: x + 1, 1: x * 2}.get(mode, -x)
    np.testing.assert_array_equal(device.get(out), expected)


@despina.jit
def constexpr_branch_kernel(x_ptr, out_ptr, N: tl.constexpr, MODE: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    if MODE == "double":
        x = x * 2
    elif MODE == "square":
        x = x * x
    else:
        tl.static_assert(MODE == "same")
    tl.store(out_ptr + offs, x)


@pytest.mark.parametrize("mode", ["double", "square", "same"])
def test_if_on_constexpr_is_resolved_at_compile_time(device, trace, mode):
    x = np.arange(N, dtype=np.int32)
    out = device.zeros(N, "int32")
    constexpr_branch_kernel[(1,)](device.put(x), out, N=N, MODE=mode)
    np.testing.assert_array_equal(device.get(out), {"double": x * 2, "square": x * x, "same": x}[mode])
    assert " if(" not in print_module(trace(constexpr_branch_kernel, x, out, N=N, MODE=mode), locs=False)


@despina.jit
def branch_changes_tile_kernel(x_ptr, out_ptr, flag, N: tl.constexpr):
    offs = tl.arange(0, N)
    acc = tl.zeros((N,), tl.float32)
    count = 0
    if flag > 0:
        acc = tl.load(x_ptr + offs)
        count = 2
    tl.store(out_ptr + offs, acc + count)


@pytest.mark.parametrize("flag", [0, 1])
def test_variables_changed_in_one_branch(device, flag):
    x = np.arange(N, dtype=np.float32) + 1
    out = device.zeros(N, "fp32")
    branch_changes_tile_kernel[(1,)](device.put(x), out, flag, N=N)
    np.testing.assert_array_equal(device.get(out), x + 2 if flag else np.zeros(N, np.float32))


@despina.jit
def branch_defines_kernel(out_ptr, flag, N: tl.constexpr):
    if flag:
        v = tl.full((N,), 3, tl.int32)
    else:
        v = tl.arange(0, N)
    tl.store(out_ptr + tl.arange(0, N), v)


@pytest.mark.parametrize("flag", [False, True])
def test_name_defined_in_both_branches(device, flag):
    out = device.zeros(N, "int32")
    branch_defines_kernel[(1,)](out, flag, N=N)
    np.testing.assert_array_equal(device.get(out), np.full(N, 3) if flag else np.arange(N))


@despina.jit
def nested_if_kernel(out_ptr, a, b):
    r = 0
    if a > 0:
        if b > 0:
            r = 1
        else:
            r = 2
    else:
        r = 3
    tl.store(out_ptr, r)


@pytest.mark.parametrize(("a", "b", "expected"), [(1, 1, 1), (1, -1, 2), (-1, 1, 3)])
def test_nested_runtime_if(device, a, b, expected):
    out = device.zeros(1, "int32")
    nested_if_kernel[(1,)](out, a, b)
    assert device.get(out)[0] == expected


@despina.jit
def early_return_kernel(x_ptr, out_ptr, n, N: tl.constexpr):
    pid = tl.program_id(0)
    if pid * N >= n:
        return
    offs = pid * N + tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + 1)


def test_early_return_skips_the_rest_of_the_kernel(device):
    x = np.arange(4 * N, dtype=np.int32)
    out = device.put(np.full(4 * N, -7, np.int32))
    early_return_kernel[(4,)](device.put(x), out, 2 * N, N=N)
    got = device.get(out)
    np.testing.assert_array_equal(got[: 2 * N], x[: 2 * N] + 1)
    np.testing.assert_array_equal(got[2 * N :], -7)


@despina.jit
def early_return_constexpr_kernel(out_ptr, SKIP: tl.constexpr):
    if SKIP:
        return
    tl.store(out_ptr, 1)


@pytest.mark.parametrize("skip", [False, True])
def test_early_return_under_constexpr(device, skip):
    out = device.zeros(1, "int32")
    early_return_constexpr_kernel[(1,)](out, SKIP=skip)
    assert device.get(out)[0] == (0 if skip else 1)


@despina.jit
def for_accumulate_kernel(x_ptr, out_ptr, n_rows, N: tl.constexpr):
    offs = tl.arange(0, N)
    acc = tl.zeros((N,), tl.float32)
    total = 0
    for i in range(0, n_rows):
        acc += tl.load(x_ptr + i * N + offs)
        total += i
    tl.store(out_ptr + offs, acc + total)


def test_for_loop_carries_tiles_and_scalars(device):
    x = np.arange(5 * N, dtype=np.float32).reshape(5, N)
    out = device.zeros(N, "fp32")
    for_accumulate_kernel[(1,)](device.put(x), out, 5, N=N)
    np.testing.assert_array_equal(device.get(out), x.sum(0) + 10)


@despina.jit
def for_weak_init_kernel(x_ptr, out_ptr, n, N: tl.constexpr):
    acc = 0
    for i in range(n):
        acc += tl.load(x_ptr + i * N + tl.arange(0, N))
    tl.store(out_ptr + tl.arange(0, N), acc)


def test_loop_retraces_when_a_literal_becomes_a_tile(device):
    x = np.arange(3 * N, dtype=np.float32).reshape(3, N) / 4
    out = device.zeros(N, "fp32")
    for_weak_init_kernel[(1,)](device.put(x), out, 3, N=N)
    np.testing.assert_allclose(device.get(out), x.sum(0))


@despina.jit
def for_step_kernel(out_ptr, lo, hi, step):
    total = 0
    count = 0
    for i in tl.range(lo, hi, step):
        total += i
        count += 1
    tl.store(out_ptr, total)
    tl.store(out_ptr + 1, count)


@pytest.mark.parametrize(("lo", "hi", "step"), [(0, 10, 1), (3, 20, 4), (5, 5, 1), (7, 2, 1)])
def test_for_bounds_and_step(device, lo, hi, step):
    out = device.zeros(2, "int32")
    for_step_kernel[(1,)](out, lo, hi, step)
    values = list(range(lo, hi, step))
    np.testing.assert_array_equal(device.get(out), [sum(values), len(values)])


@despina.jit
def nested_for_kernel(out_ptr, n, m):
    total = 0
    for i in range(n):
        for j in range(m):
            total += i * 10 + j
    tl.store(out_ptr, total)


def test_nested_runtime_loops(device):
    out = device.zeros(1, "int32")
    nested_for_kernel[(1,)](out, 3, 4)
    assert device.get(out)[0] == sum(i * 10 + j for i in range(3) for j in range(4))


@despina.jit
def if_in_loop_kernel(out_ptr, n):
    evens = 0
    odds = 0
    for i in range(n):
        if i % 2 == 0:
            evens += i
        else:
            odds += i
    tl.store(out_ptr, evens)
    tl.store(out_ptr + 1, odds)


def test_if_inside_a_loop(device):
    out = device.zeros(2, "int32")
    if_in_loop_kernel[(1,)](out, 9)
    np.testing.assert_array_equal(device.get(out), [0 + 2 + 4 + 6 + 8, 1 + 3 + 5 + 7])


@despina.jit
def while_kernel(out_ptr, n):
    i = 0
    x = 1
    while i < n:
        x = x * 3
        i += 1
    tl.store(out_ptr, x)
    tl.store(out_ptr + 1, i)


@pytest.mark.parametrize("n", [0, 1, 5])
def test_while_loop(device, n):
    out = device.zeros(2, "int32")
    while_kernel[(1,)](out, n)
    np.testing.assert_array_equal(device.get(out), [3**n, n])


@despina.jit
def while_tile_kernel(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    steps = 0
    while tl.max(x, 0) > 1:
        x = tl.where(x > 1, x // 2, x)
        steps += 1
    tl.store(out_ptr + offs, x)
    tl.store(out_ptr + N, steps)


def test_while_carries_a_tile_with_a_reduced_condition(device):
    x = np.array([1, 2, 9, 64] * (N // 4), dtype=np.int32)
    out = device.zeros(N + 1, "int32")
    while_tile_kernel[(1,)](device.put(x), out, N=N)
    got = device.get(out)
    np.testing.assert_array_equal(got[:N], np.ones(N))
    assert got[N] == 6


@despina.jit
def while_per_program_kernel(out_ptr):
    pid = tl.program_id(0)
    i = 0
    while i < pid:
        i += 1
    tl.store(out_ptr + pid, i * 2)


def test_while_trip_count_differs_between_programs(device):
    out = device.zeros(8, "int32")
    while_per_program_kernel[(8,)](out)
    np.testing.assert_array_equal(device.get(out), np.arange(8) * 2)


@despina.jit
def static_range_kernel(out_ptr, N: tl.constexpr):
    acc = tl.zeros((N,), tl.int32)
    for i in tl.static_range(4):
        acc += tl.arange(0, N) * i
    for j in tl.static_range(1, 8, 3):
        acc += j
    tl.store(out_ptr + tl.arange(0, N), acc)


def test_static_range_unrolls(device, trace):
    out = device.zeros(N, "int32")
    static_range_kernel[(1,)](out, N=N)
    np.testing.assert_array_equal(device.get(out), np.arange(N) * 6 + 1 + 4 + 7)
    assert " for(" not in print_module(trace(static_range_kernel, out, N=N), locs=False)


@despina.jit
def static_break_continue_kernel(out_ptr, LIMIT: tl.constexpr):
    total = 0
    for i in tl.static_range(10):
        if i == 2:
            continue
        if i == LIMIT:
            break
        total += i
    tl.store(out_ptr, total)


@pytest.mark.parametrize("limit", [5, 20])
def test_break_and_continue_in_static_range(device, limit):
    out = device.zeros(1, "int32")
    static_break_continue_kernel[(1,)](out, LIMIT=limit)
    assert device.get(out)[0] == sum(i for i in range(min(limit, 10)) if i != 2)


@despina.jit
def tuple_loop_kernel(out_ptr, SCALES: tl.constexpr):
    acc = 0.0
    for s in SCALES:
        acc += s
    tl.store(out_ptr, acc)


def test_loop_over_a_constexpr_tuple(device):
    out = device.zeros(1, "fp32")
    tuple_loop_kernel[(1,)](out, SCALES=(0.5, 1.5, 2.0))
    assert device.get(out)[0] == 4.0


@despina.jit
def tl_range_stages_kernel(x_ptr, out_ptr, n, N: tl.constexpr):
    acc = tl.zeros((N,), tl.float32)
    for i in tl.range(0, n, num_stages=2, loop_unroll_factor=2):
        acc += tl.load(x_ptr + i * N + tl.arange(0, N))
    tl.store(out_ptr + tl.arange(0, N), acc)


def test_tl_range_num_stages_is_recorded_and_runs(device, trace):
    x = np.arange(4 * N, dtype=np.float32).reshape(4, N)
    out = device.zeros(N, "fp32")
    tl_range_stages_kernel[(1,)](device.put(x), out, 4, N=N)
    np.testing.assert_array_equal(device.get(out), x.sum(0))
    text = print_module(trace(tl_range_stages_kernel, x, out, 4, N=N), locs=False)
    assert "num_stages = 2" in text and "loop_unroll_factor = 2" in text


@despina.jit
def augmented_kernel(out_ptr, N: tl.constexpr):
    x = tl.arange(0, N) + 1
    x += 3
    x -= 1
    x *= 4
    x //= 2
    x %= 7
    x <<= 2
    x >>= 1
    x |= 1
    x &= 0xF
    x ^= 5
    tl.store(out_ptr + tl.arange(0, N), x)


def test_augmented_assignment(device):
    out = device.zeros(N, "int32")
    augmented_kernel[(1,)](out, N=N)
    x = np.arange(N) + 1
    x = ((((((x + 3 - 1) * 4) // 2) % 7) << 2) >> 1 | 1) & 0xF ^ 5
    np.testing.assert_array_equal(device.get(out), x)


@despina.jit
def tuple_kernel(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    a, b = tl.load(x_ptr + offs), tl.load(x_ptr + N + offs)
    pair = (a, b)
    a, b = pair[1], pair[0]
    (c, d), e = (a + b, a - b), 3
    tl.store(out_ptr + offs, c * e)
    tl.store(out_ptr + N + offs, d)


def test_tuples_pack_unpack_and_index(device):
    x = np.arange(2 * N, dtype=np.int32)
    out = device.zeros(2 * N, "int32")
    tuple_kernel[(1,)](device.put(x), out, N=N)
    a, b = x[:N], x[N:]
    np.testing.assert_array_equal(device.get(out), np.concatenate([(a + b) * 3, b - a]))


@despina.jit
def constexpr_math_kernel(out_ptr, A: tl.constexpr, B: tl.constexpr):
    BLOCK: tl.constexpr = max(A, B) * 2
    SMALL: tl.constexpr = min(A, B) // 2 + A % 3
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, offs * 0 + SMALL + len((A, B)))


def test_min_max_and_arithmetic_on_constexprs(device):
    out = device.zeros(16, "int32")
    constexpr_math_kernel[(1,)](out, A=8, B=5)
    np.testing.assert_array_equal(device.get(out), np.full(16, 5 // 2 + 8 % 3 + 2))


@despina.jit
def minmax_tensor_kernel(x_ptr, out_ptr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    tl.store(out_ptr + tl.arange(0, N), min(max(x, -2), 3))


def test_python_min_max_on_tensors(device):
    x = np.arange(N, dtype=np.int32) - 8
    out = device.zeros(N, "int32")
    minmax_tensor_kernel[(1,)](device.put(x), out, N=N)
    np.testing.assert_array_equal(device.get(out), np.clip(x, -2, 3))


@despina.jit
def scale_helper(x, factor):
    return x * factor


@despina.jit
def swap_helper(a, b):
    return b, a


@despina.jit
def outer_helper(x, y, BIAS: tl.constexpr):
    u, v = swap_helper(x, y)
    return scale_helper(u, 2) + v + BIAS


@despina.jit
def calls_kernel(x_ptr, y_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    p, q = swap_helper(x, y)
    tl.store(out_ptr + offs, outer_helper(p, q, 100) + scale_helper(p, 3.0))


def test_calls_to_jit_functions_nested_and_returning_tuples(device):
    x = np.arange(N, dtype=np.float32)
    y = np.arange(N, dtype=np.float32) * 10
    out = device.zeros(N, "fp32")
    calls_kernel[(1,)](device.put(x), device.put(y), out, N=N)
    p, q = y, x
    np.testing.assert_array_equal(device.get(out), (q * 2 + p + 100) + p * 3)


@despina.jit
def void_helper(ptr, value):
    tl.store(ptr, value)


@despina.jit
def void_call_kernel(out_ptr):
    void_helper(out_ptr, 42)
    void_helper(out_ptr + 1, 7)


def test_call_of_a_helper_without_return(device):
    out = device.zeros(2, "int32")
    void_call_kernel[(1,)](out)
    np.testing.assert_array_equal(device.get(out), [42, 7])


@despina.jit
def conditional_return_helper(x, LIMIT: tl.constexpr):
    if LIMIT > 0:
        return x + LIMIT
    return x


@despina.jit
def conditional_helper_kernel(out_ptr, LIMIT: tl.constexpr):
    tl.store(out_ptr, conditional_return_helper(tl.full((), 1, tl.int32), LIMIT))


@pytest.mark.parametrize("limit", [0, 5])
def test_helper_with_returns_under_constexpr_conditions(device, limit):
    out = device.zeros(1, "int32")
    conditional_helper_kernel[(1,)](out, LIMIT=limit)
    assert device.get(out)[0] == 1 + limit


SCALE = tl.constexpr(3)
ENABLED = tl.constexpr(True)


@despina.jit
def global_kernel(out_ptr, N: tl.constexpr):
    x = tl.arange(0, N) * SCALE
    if ENABLED:
        x += 1
    tl.store(out_ptr + tl.arange(0, N), x)


def test_constexpr_globals(device):
    out = device.zeros(N, "int32")
    global_kernel[(1,)](out, N=N)
    np.testing.assert_array_equal(device.get(out), np.arange(N) * 3 + 1)


@despina.jit
def logical_scalar_kernel(out_ptr, a, b):
    r = 0
    if a > 0 and b > 0:
        r += 1
    if a > 0 or b > 0:
        r += 10
    if not a > 0:
        r += 100
    tl.store(out_ptr, r)


@pytest.mark.parametrize(("a", "b"), [(1, 1), (1, -1), (-1, 1), (-1, -1)])
def test_and_or_not_on_runtime_scalars(device, a, b):
    out = device.zeros(1, "int32")
    logical_scalar_kernel[(1,)](out, a, b)
    expected = (a > 0 and b > 0) * 1 + (a > 0 or b > 0) * 10 + (not a > 0) * 100
    assert device.get(out)[0] == expected


@despina.jit
def chained_compare_kernel(out_ptr, x):
    tl.store(out_ptr, 0 < x < 10)


@pytest.mark.parametrize("x", [-1, 5, 10])
def test_chained_comparison(device, x):
    out = device.zeros(1, "int1")
    chained_compare_kernel[(1,)](out, x)
    assert bool(device.get(out)[0]) == (0 < x < 10)


@despina.jit
def ifexp_kernel(out_ptr, x, FLAG: tl.constexpr):
    a = 1 if FLAG else 2
    b = x * 2 if x > 3 else x
    tl.store(out_ptr, a + b)


@pytest.mark.parametrize(("x", "flag"), [(1, True), (5, False)])
def test_conditional_expression(device, x, flag):
    out = device.zeros(1, "int32")
    ifexp_kernel[(1,)](out, x, FLAG=flag)
    assert device.get(out)[0] == (1 if flag else 2) + (x * 2 if x > 3 else x)


@despina.jit
def none_arg_kernel(x_ptr, bias_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    if bias_ptr is not None:
        x += tl.load(bias_ptr + offs)
    tl.store(out_ptr + offs, x)


@pytest.mark.parametrize("with_bias", [False, True])
def test_none_argument_is_a_constexpr(device, with_bias):
    x = np.arange(N, dtype=np.float32)
    bias = np.full(N, 0.5, np.float32)
    out = device.zeros(N, "fp32")
    none_arg_kernel[(1,)](device.put(x), device.put(bias) if with_bias else None, out, N=N)
    np.testing.assert_array_equal(device.get(out), x + 0.5 if with_bias else x)


@despina.jit
def tl_range_options_kernel(x_ptr, out_ptr, n, N: tl.constexpr, FLATTEN: tl.constexpr, WS: tl.constexpr,
                            NO_MULTI: tl.constexpr):
    acc = tl.zeros((N,), tl.float32)
    for i in tl.range(0, n, flatten=FLATTEN, warp_specialize=WS, disallow_acc_multi_buffer=NO_MULTI):
        acc += tl.load(x_ptr + i * N + tl.arange(0, N))
    tl.store(out_ptr + tl.arange(0, N), acc)


def test_tl_range_takes_triton_s_loop_options(device, trace):
    x = np.arange(4 * N, dtype=np.float32).reshape(4, N)
    out = device.zeros(N, "fp32")
    for flatten, ws, no_multi in ((False, False, True), (True, False, False), (False, True, False)):
        tl_range_options_kernel[(1,)](device.put(x), out, 4, N=N, FLATTEN=flatten, WS=ws, NO_MULTI=no_multi)
        np.testing.assert_array_equal(device.get(out), x.sum(0))
    text = print_module(trace(tl_range_options_kernel, x, out, 4, N=N, FLATTEN=True, WS=True, NO_MULTI=False),
                        locs=False)
    assert "flatten = true" in text and "warp_specialize = true" in text
