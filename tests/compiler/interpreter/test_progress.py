"""While loops that never end: the error names the kernel, the loop's line, the program and what to do."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

import despina
import despina.language as tl
from despina.compiler.errors import KernelRuntimeError

from .scheduling import fallbacks, line_of


@despina.jit(interpret=True)
def wait_for_later(flag):
    pid = tl.program_id(0)
    if pid == 0:
        while tl.load(flag, volatile=True) == 0:  # waits for program 1
            pass
    if pid == 1:
        tl.store(flag, 1)


def test_waiting_for_a_later_program_is_an_error_naming_kernel_line_and_program(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Found in an iteration, not at the step bound.
    monkeypatch.setenv("DESPINA_INTERPRET_MAX_STEPS", "100000")
    start = time.perf_counter()
    with pytest.raises(KernelRuntimeError) as info:
        wait_for_later[(2,)](np.zeros(1, np.int32))
    assert time.perf_counter() - start < 5
    assert str(info.value) == (
        f"kernel 'wait_for_later' at {line_of(__file__, 'waits for program 1')}: this while loop never ends: an iteration "
        "of program (0, 0, 0) changed nothing that the next one depends on (no program left the loop, memory did "
        "not change), so it would repeat forever. If it waits for another program (a lock, a flag), that program "
        "must come earlier in the grid: the interpreter runs programs that wait on each other one at a time, in "
        "grid order. Otherwise fix the loop's condition."
    )


@despina.jit(interpret=True)
def count_forever(out):
    i = 0
    while i >= 0:  # never ends
        i = (i + 1) % 1000
    tl.store(out, i)


def test_a_loop_that_never_ends_stops_at_the_step_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DESPINA_INTERPRET_MAX_STEPS", "300")
    with pytest.raises(KernelRuntimeError) as info:
        count_forever[(4,)](np.zeros(1, np.int32))
    message = str(info.value)
    assert message.startswith(
        f"kernel 'count_forever' at {line_of(__file__, 'never ends')}: this while loop did not end within 300 "
        "iterations (program (0, 0, 0) and 3 more of its batch). If it needs more, raise DESPINA_INTERPRET_MAX_STEPS."
    )
    assert message.endswith("Otherwise fix the loop's condition.")


@despina.jit(interpret=True)
def count_up(out, n):
    i = 0
    while i < n:
        i += 1
    tl.store(out, i)


def test_the_step_bound_lets_a_long_loop_finish(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DESPINA_INTERPRET_MAX_STEPS", "1000")
    out = np.zeros(1, np.int32)
    count_up[(1,)](out, 1000)
    assert out[0] == 1000
    with pytest.raises(KernelRuntimeError, match="did not end within 1000 iterations"):
        count_up[(1,)](out, 1001)


@despina.jit(interpret=True)
def stuck_in_place(out, n):
    x = tl.program_id(0) * 0 + 1
    while x < n:  # repeats itself
        x = x * 1
    tl.store(out, x)


def test_a_loop_back_in_the_same_state_fails_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Its condition depends on x, but x comes back unchanged: found in a few iterations, not at the bound.
    monkeypatch.setenv("DESPINA_INTERPRET_MAX_STEPS", "100000")
    start = time.perf_counter()
    with pytest.raises(
        KernelRuntimeError, match=re.escape(f"at {line_of(__file__, 'repeats itself')}: this while loop never ends")
    ):
        stuck_in_place[(3,)](np.zeros(1, np.int32), 10)
    assert time.perf_counter() - start < 5


@despina.jit(interpret=True)
def spin_counting(flag, out, STEP: tl.constexpr):
    pid = tl.program_id(0)
    tries = 0
    if pid == 1:
        # STEP=0: the condition ignores `tries`; STEP=1: it reads an address computed from it.
        while tl.load(flag + (tries // 1_000_000) * STEP) == 0:
            tries += 1
        tl.store(out, tries)
    if pid == 0:
        tl.store(flag, 1)


def test_a_spin_loop_counting_its_tries_is_seen_waiting_at_once(
    monkeypatch: pytest.MonkeyPatch, log: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("DESPINA_INTERPRET_MAX_STEPS", "100000")
    flag, out = np.zeros(1, np.int32), np.full(1, -1, np.int32)
    spin_counting[(2,)](flag, out, STEP=0)
    assert out[0] == 0
    [message] = fallbacks(log)
    assert "(an iteration changed nothing)" in message


def test_a_wait_the_loop_cannot_prove_falls_back_at_the_step_bound(
    monkeypatch: pytest.MonkeyPatch, log: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("DESPINA_INTERPRET_MAX_STEPS", "200")
    flag, out = np.zeros(1, np.int32), np.full(1, -1, np.int32)
    spin_counting[(2,)](flag, out, STEP=1)
    assert out[0] == 0
    [message] = fallbacks(log)
    assert "(over 200 iterations)" in message


@pytest.mark.parametrize("value", ["many", "0", "-5"])
def test_a_bad_step_bound_is_named(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("DESPINA_INTERPRET_MAX_STEPS", value)
    with pytest.raises(ValueError, match=f"DESPINA_INTERPRET_MAX_STEPS='{value}': expected a positive whole number"):
        count_up[(1,)](np.zeros(1, np.int32), 3)


@despina.jit(interpret=True)
def left_behind(flags, out):
    pid = tl.program_id(0)
    # Program 0 reads flags[0] (set) and leaves; program 1 reads flags[1] until program 0 sets it.
    # The row of program 0 goes on changing after it left, that of program 1 does not.
    k = 3 - pid
    while tl.load(flags + (k == 2).to(tl.int32), volatile=True) == 0:
        k = tl.where(k == 2, k, k + 1)
    tl.store(out + pid, k)
    if pid == 0:
        tl.store(flags + 1, 1)


def test_programs_that_left_the_loop_do_not_hide_a_stall(
    monkeypatch: pytest.MonkeyPatch, log: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("DESPINA_INTERPRET_MAX_STEPS", "100000")
    flags, out = np.array([1, 0], np.int32), np.zeros(2, np.int32)
    left_behind[(2,)](flags, out)
    np.testing.assert_array_equal(out, [3, 2])
    [message] = fallbacks(log)
    assert "(an iteration changed nothing)" in message
