"""Compiler hints, loop ranges, compile-time checks and prints, device prints and asserts, barriers."""

from __future__ import annotations

import numpy as np
import pytest

import despina
import despina.language as tl
from despina.compiler.errors import KernelRuntimeError
from despina.compiler.ir.printer import print_module

N = 16


@despina.jit
def hints_kernel(x_ptr, out_ptr, n, N: tl.constexpr):
    tl.assume(n % 16 == 0)
    tl.assume(n > 0)
    pid = tl.program_id(0)
    start = tl.multiple_of(pid * N, 16)
    offs = tl.max_contiguous(tl.multiple_of(start + tl.arange(0, N), 16), 16)
    rows = tl.max_constancy(offs[:, None] // N + tl.zeros((N, 2), tl.int32), (N, 1))
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.sum(rows, 1).to(tl.float32))


def test_hints_keep_the_values_and_reach_the_ir(device, trace):
    x = np.arange(2 * N, dtype=np.float32)
    out = device.zeros(2 * N, "fp32")
    hints_kernel[(2,)](device.put(x), out, 2 * N, N=N)
    np.testing.assert_array_equal(device.get(out), x + 2 * (np.arange(2 * N) // N))
    text = print_module(trace(hints_kernel, x, out, 2 * N, N=N), locs=False)
    assert "multiple_of(" in text and "values = [16]" in text
    assert "max_contiguous(" in text and "max_constancy(" in text and "values = [16, 1]" in text
    assert text.count("assume(") == 2


@despina.jit
def ranges_kernel(out_ptr, n, STAGES: tl.constexpr):
    total = 0
    for i in tl.range(1, n, 2, num_stages=STAGES):
        total += i
    for j in tl.static_range(0, 12, 4):
        total += j * 100
    for k in tl.range(n):
        total += k * 1000
    tl.store(out_ptr, total)


def test_range_and_static_range(device, trace):
    out = device.zeros(1, "int32")
    ranges_kernel[(1,)](out, 7, STAGES=3)
    assert device.get(out)[0] == (1 + 3 + 5) + (0 + 4 + 8) * 100 + sum(range(7)) * 1000
    text = print_module(trace(ranges_kernel, out, 7, STAGES=3), locs=False)
    assert text.count(" for(") == 2 and "num_stages = 3" in text


@despina.jit
def static_kernel(out_ptr, N: tl.constexpr):
    tl.static_assert(N % 2 == 0, "N must be even")
    tl.static_print("compiling with N =", N)
    tl.store(out_ptr + tl.arange(0, N), tl.arange(0, N))


def test_static_assert_and_static_print_run_once_per_compilation(device, capsys):
    kernel = despina.jit(static_kernel.fn)  # not yet compiled, whichever tests ran it before
    out = device.zeros(N, "int32")
    kernel[(1,)](out, N=N)
    kernel[(1,)](out, N=N)
    assert capsys.readouterr().out.count(f"compiling with N = {N}") == 1
    np.testing.assert_array_equal(device.get(out), np.arange(N))


@despina.jit
def device_print_kernel(x_ptr, HEX: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 4))
    tl.device_print("x: ", x, hex=HEX)


@pytest.mark.parametrize("hex_", [False, True])
def test_device_print_prints_every_program_and_element(device, capfd, hex_):
    x = np.array([1, 2, 3, 255], np.int32)
    device_print_kernel[(2,)](device.put(x), HEX=hex_)
    out = capfd.readouterr().out
    lines = [line for line in out.splitlines() if "x: " in line]
    assert len(lines) == 8
    for value in x:
        text = f"0x{value:08x}" if hex_ else str(value)
        assert sum(line.rstrip().endswith(text) for line in lines) == 2


@despina.jit
def print_builtin_kernel(x_ptr, N: tl.constexpr):
    print("constexpr only", N)
    print("value", tl.load(x_ptr))


def test_python_print_in_a_kernel(device, capfd):
    kernel = despina.jit(print_builtin_kernel.fn)  # not yet compiled: the compile-time print runs here
    kernel[(1,)](device.put(np.array([7.5], np.float32)), N=N)
    out = capfd.readouterr().out
    assert f"constexpr only {N}" in out
    assert any("value" in line and "7.5" in line for line in out.splitlines())


@despina.jit(debug=True)  # device_assert checks on the GPU too (debug is on by default only in the interpreter)
def device_assert_kernel(x_ptr, n, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    tl.device_assert(x >= 0, "x must be non-negative", mask=offs < n)


@despina.jit(debug=False)
def device_assert_nodebug_kernel(x_ptr, n, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.device_assert(tl.load(x_ptr + offs) >= 0, "x must be non-negative")


@despina.jit(debug=True)
def assert_statement_kernel(x_ptr):
    x = tl.load(x_ptr)
    assert x > 0, "x must be positive"


def test_device_assert(device):
    x = np.arange(N, dtype=np.int32)
    x[10] = -1
    device_assert_kernel[(1,)](device.put(x), 10, N=N)
    with pytest.raises(KernelRuntimeError, match="x must be non-negative") as info:
        device_assert_kernel[(1,)](device.put(x), 11, N=N)
    assert "device_assert_kernel" in str(info.value) and "test_debug.py" in str(info.value)
    with pytest.raises(KernelRuntimeError, match="x must be positive"):
        assert_statement_kernel[(1,)](device.put(np.array([0], np.int32)))
    assert_statement_kernel[(1,)](device.put(np.array([1], np.int32)))


def test_device_assert_is_compiled_out_without_debug(device, trace):
    x = np.full(N, -1, np.int32)
    device_assert_nodebug_kernel[(1,)](device.put(x), N, N=N)
    assert "device_assert(%" not in print_module(trace(device_assert_nodebug_kernel, x, N, N=N))


@despina.jit
def barrier_kernel(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))
    tl.debug_barrier()
    tl.store(out_ptr + offs, tl.load(out_ptr + N - 1 - offs) * 2)


def test_debug_barrier(device, trace):
    x = np.arange(N, dtype=np.float32)
    out = device.zeros(N, "fp32")
    barrier_kernel[(1,)](device.put(x), out, N=N)
    np.testing.assert_array_equal(device.get(out), x[::-1] * 2)
    assert "barrier()" in print_module(trace(barrier_kernel, x, out, N=N))
