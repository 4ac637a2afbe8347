"""Kernel errors in control flow: loops, branches, returns (see test_errors.py for the scheme)."""

from __future__ import annotations

import functools

import numpy as np

import despina
import despina.language as tl

from .error_kit import compile_error, expect_in

X = np.zeros(16, np.float32)
expect = functools.partial(expect_in, __file__)


# ---- control flow ----------------------------------------------------------------------------


@despina.jit
def break_runtime_loop_kernel(x_ptr, n):
    for _i in range(n):
        break  # E:breakdynamic
    tl.store(x_ptr, 1.0)


@despina.jit
def break_runtime_cond_kernel(x_ptr, n):
    for i in tl.static_range(4):
        if n > i:
            break  # E:breakcond
    tl.store(x_ptr, 1.0)


def test_break_where_it_is_not_defined(trace):
    expect(compile_error(trace, break_runtime_loop_kernel, X, 3), "break_runtime_loop_kernel", "breakdynamic", "break",
           "'break' is supported only in loops unrolled at compile time", "use a mask")
    expect(compile_error(trace, break_runtime_cond_kernel, X, 3), "break_runtime_cond_kernel", "breakcond", "break",
           "'break' under a run-time condition is not supported", "use a mask")


@despina.jit
def tile_if_kernel(x_ptr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    if x > 0:  # E:tileif
        x = -x
    tl.store(x_ptr + tl.arange(0, 16), x)


def test_if_on_a_tile(trace):
    expect(compile_error(trace, tile_if_kernel, X), "tile_if_kernel", "tileif", "x > 0",
           "an `if` condition must be a scalar, got tile<16xint1>; use tl.where for tiles")


@despina.jit
def one_sided_return_helper(x):
    if x > 0:  # E:onesided
        return x
    return -x


@despina.jit
def one_sided_return_kernel(x_ptr):
    tl.store(x_ptr, one_sided_return_helper(tl.load(x_ptr)))


@despina.jit
def both_sided_return_helper(x):
    if x > 0:  # E:bothsided
        return x
    else:
        return -x


@despina.jit
def both_sided_return_kernel(x_ptr):
    tl.store(x_ptr, both_sided_return_helper(tl.load(x_ptr)))


def test_returning_values_under_a_runtime_if(trace):
    expect(compile_error(trace, one_sided_return_kernel, X), "one_sided_return_kernel", "onesided", "if",
           "returning values from inside a run-time `if` is not supported", "assign the value and return it at the end",
           helper="one_sided_return_helper")
    expect(compile_error(trace, both_sided_return_kernel, X), "both_sided_return_kernel", "bothsided", "if",
           "returning values from inside a run-time `if` is not supported", "assign the value and return it at the end",
           helper="both_sided_return_helper")


@despina.jit
def branch_constexpr_kernel(x_ptr, n):
    mode = "a"
    if n > 0:  # E:branchconstexpr
        mode = "b"
    tl.store(x_ptr, 1.0 if mode == "a" else 2.0)


def test_constexpr_differing_between_runtime_branches(trace):
    expect(compile_error(trace, branch_constexpr_kernel, X, 1), "branch_constexpr_kernel", "branchconstexpr", "if",
           "'mode' takes different compile-time values in the two branches", "same constexpr on both sides")


@despina.jit
def branch_type_kernel(x_ptr, n):
    y = tl.zeros((16,), tl.float32)
    if n > 0:  # E:branchtype
        y = tl.zeros((16,), tl.int32)
    tl.store(x_ptr + tl.arange(0, 16), y)


@despina.jit
def branch_shape_kernel(x_ptr, n):
    y = tl.zeros((16,), tl.float32)
    if n > 0:  # E:branchshape
        y = tl.zeros((32,), tl.float32)
    tl.store(x_ptr + tl.arange(0, 16), y)


def test_type_and_shape_mismatch_between_branches(trace):
    expect(compile_error(trace, branch_type_kernel, X, 1), "branch_type_kernel", "branchtype", "if",
           "'y' is tile<16xint32> after the `if` branch but tile<16xfp32> after the `else` branch",
           "convert one side (e.g. with .to())")
    expect(compile_error(trace, branch_shape_kernel, X, 1), "branch_shape_kernel", "branchshape", "if",
           "'y' is tile<32xfp32> after the `if` branch but tile<16xfp32> after the `else` branch")


@despina.jit
def loop_type_kernel(x_ptr, n):
    acc = tl.zeros((16,), tl.int32)
    for _i in range(n):  # E:looptype
        acc = acc + 0.5
    tl.store(x_ptr + tl.arange(0, 16), acc)


@despina.jit
def loop_shape_kernel(x_ptr, n):
    acc = tl.zeros((16,), tl.float32)
    while n > 0:  # E:loopshape
        acc = tl.zeros((32,), tl.float32)
        n -= 1
    tl.store(x_ptr + tl.arange(0, 16), acc)


def test_loop_carried_type_and_shape_changes(trace):
    expect(compile_error(trace, loop_type_kernel, X, 2), "loop_type_kernel", "looptype", "for",
           "'acc' enters the loop as tile<16xint32> but the body makes it tile<16xfp32>",
           "give it that type before the loop")
    expect(compile_error(trace, loop_shape_kernel, X, 2), "loop_shape_kernel", "loopshape", "while",
           "'acc' enters the loop as tile<16xfp32> but the body makes it tile<32xfp32>")


@despina.jit
def chained_literals_kernel(x_ptr, n):
    a = 0
    b = 0
    c = 0
    for _i in range(n):
        c = c + b
        b = b + a
        a = a + 0.5
    tl.store(x_ptr, a + b + c)


def test_chained_weak_loop_values_settle(device):
    out = device.zeros(1, "fp32")
    chained_literals_kernel[(1,)](out, 4)
    a = b = c = 0.0
    for _ in range(4):
        c, b, a = c + b, b + a, a + 0.5
    assert device.get(out)[0] == a + b + c


@despina.jit
def loop_tuple_kernel(x_ptr, n):
    acc = (0, 0)
    for i in range(n):  # E:looptuple
        acc = (acc[0] + i, acc[1] + 1)
    tl.store(x_ptr, acc[0])


@despina.jit
def branch_tuple_kernel(x_ptr, n):
    pair = (tl.load(x_ptr), 1)
    if n > 0:  # E:branchtuple
        pair = (pair[0] + 1, 2)
    tl.store(x_ptr, pair[0])


def test_tuples_changed_under_runtime_control_flow(trace):
    expect(compile_error(trace, loop_tuple_kernel, X, 3), "loop_tuple_kernel", "looptuple", "for",
           "'acc' changes inside a run-time loop but only tensors and numbers can be carried",
           "unpack tuples into separate variables")
    expect(compile_error(trace, branch_tuple_kernel, X, 3), "branch_tuple_kernel", "branchtuple", "if",
           "'pair' takes different compile-time values in the two branches", "unpack tuples into separate variables")


@despina.jit
def for_else_kernel(x_ptr, n):
    for _i in range(n):  # E:forelse
        pass
    else:
        pass


@despina.jit
def while_else_kernel(x_ptr, n):
    while n > 0:  # E:whileelse
        n -= 1
    else:
        pass


def test_loop_else(trace):
    expect(compile_error(trace, for_else_kernel, X, 1), "for_else_kernel", "forelse", "for",
           "for-else is not supported in kernels", "flag")
    expect(compile_error(trace, while_else_kernel, X, 1), "while_else_kernel", "whileelse", "while",
           "while-else is not supported in kernels", "flag")


@despina.jit
def iterate_tile_kernel(x_ptr):
    for _v in tl.arange(0, 16):  # E:iteratetile
        pass


@despina.jit
def loop_target_kernel(x_ptr, n):
    for _i, _j in range(n):  # E:looptarget
        pass


@despina.jit
def loop_bound_kernel(x_ptr, n):
    for _i in range(n * 1.5):  # E:loopbound
        pass


def test_loop_headers(trace):
    expect(compile_error(trace, iterate_tile_kernel, X), "iterate_tile_kernel", "iteratetile", "tl.arange",
           "a kernel loop iterates over range(...), tl.range(...), tl.static_range(...) or a constexpr tuple, not tensor")
    expect(compile_error(trace, loop_target_kernel, X, 3), "loop_target_kernel", "looptarget", "_i, _j",
           "the loop variable must be a single name")
    expect(compile_error(trace, loop_bound_kernel, X, 3), "loop_bound_kernel", "loopbound", "range(",
           "loop bounds must be integer scalars, got fp32", "convert")


@despina.jit
def while_constexpr_kernel(x_ptr, N: tl.constexpr):
    while N > 0:  # E:whileconstexpr
        pass


@despina.jit
def while_tile_kernel(x_ptr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    while x > 0:  # E:whiletile
        x -= 1


def test_while_conditions(trace):
    expect(compile_error(trace, while_constexpr_kernel, X, N=2), "while_constexpr_kernel", "whileconstexpr", "N > 0",
           "a `while` condition must depend on run-time values", "tl.static_range")
    expect(compile_error(trace, while_tile_kernel, X), "while_tile_kernel", "whiletile", "x > 0",
           "a `while` condition must be a scalar, got tile<16xint1>", "tl.max")
