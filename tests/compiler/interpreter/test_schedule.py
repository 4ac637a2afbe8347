"""Scheduling: batches run as one vector, and one program at a time once programs wait on each other."""

from __future__ import annotations

import numpy as np
import pytest

import despina
import despina.compiler.interpreter.core as core
import despina.language as tl
from despina.compiler.errors import KernelRuntimeError

from .scheduling import fallbacks, line_of


@despina.jit(interpret=True)
def locked_sum(x, total, lock, counter, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    tl.atomic_add(counter, 1)
    v = tl.sum(tl.load(x + pid * BLOCK + tl.arange(0, BLOCK)), axis=0)
    while tl.atomic_cas(lock, 0, 1) == 1:  # spin
        pass
    tl.store(total, tl.load(total) + v)
    tl.atomic_xchg(lock, 0)


def test_a_spin_lock_taken_by_every_program_gives_the_exact_sum(log: pytest.LogCaptureFixture) -> None:
    x = np.random.default_rng(0).integers(-100, 100, 1000 * 16).astype(np.int32)
    total, lock, counter = np.zeros(1, np.int32), np.zeros(1, np.int32), np.zeros(1, np.int32)
    locked_sum[(1000,)](x, total, lock, counter, BLOCK=16)
    # The non-atomic read-add-write under the lock loses nothing; the lock is free again and the
    # atomic before the wait ran once per program although the batch started over.
    assert (total[0], lock[0], counter[0]) == (x.sum(), 0, 1000)
    [message] = fallbacks(log)
    assert (
        f"kernel 'locked_sum': the programs of the while loop at {line_of(__file__, 'spin')} wait on each other"
        in message
    )
    assert "running programs 0 to 999 of the grid one at a time, in order" in message


@despina.jit(interpret=True)
def grouped_locks(out, totals, locks, counter):
    pid = tl.program_id(0)
    tl.atomic_add(counter, 1)
    tl.store(out + pid, pid + 1)
    tl.device_print("p", pid)
    # Programs 0-19 have a lock (and a total) each; the others share lock 20.
    group = tl.minimum(pid, 20)
    while tl.atomic_cas(locks + group, 0, 1) == 1:
        pass
    tl.store(totals + group, tl.load(totals + group) + pid)
    tl.atomic_xchg(locks + group, 0)


def test_a_batch_that_stalls_starts_over_without_applying_anything_twice(
    monkeypatch: pytest.MonkeyPatch, log: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    # Batches of 8 programs: 0-7 and 8-15 run as vectors; 16-23 holds programs that share a lock.
    monkeypatch.setattr(core, "BATCH_ELEMENTS", 8)
    out, totals = np.zeros(40, np.int32), np.zeros(21, np.int32)
    locks, counter = np.zeros(21, np.int32), np.zeros(1, np.int32)
    grouped_locks[(40,)](out, totals, locks, counter)
    np.testing.assert_array_equal(out, np.arange(1, 41))
    np.testing.assert_array_equal(totals, [*range(20), sum(range(20, 40))])
    assert counter[0] == 40 and not locks.any()
    printed = capsys.readouterr().out.splitlines()
    assert printed == [f"pid ({p}, 0, 0) idx () p{p}" for p in range(40)]
    [message] = fallbacks(log)
    assert "running programs 16 to 39 of the grid one at a time" in message


@despina.jit(interpret=True)
def handoff(data, flag, out):
    pid = tl.program_id(0)
    if pid == 1:
        while tl.load(flag, volatile=True) == 0:
            pass
        tl.store(out, tl.load(data))
    if pid == 0:
        tl.store(data, 42)
        tl.atomic_xchg(flag, 1)


def test_a_program_waits_for_a_flag_that_an_earlier_program_sets(log: pytest.LogCaptureFixture) -> None:
    data, flag, out = np.zeros(1, np.int32), np.zeros(1, np.int32), np.zeros(1, np.int32)
    handoff[(2,)](data, flag, out)
    assert (out[0], flag[0]) == (42, 1)
    assert len(fallbacks(log)) == 1


@despina.jit(interpret=True)
def busy(x, n, out, counter, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    # A search whose trip count differs per program, writing as it goes.
    i = 0
    key = tl.load(x + pid % n)
    while tl.load(x + i) < key:
        tl.store(out + pid * BLOCK + offs, tl.zeros([BLOCK], dtype=tl.int32) + i)
        i += 1
    # A long uniform loop that reads memory and writes nothing.
    acc = 0
    j = 0
    while j < 3000:
        acc += tl.load(x + j % n)
        j += 1
    # Programs that race on one counter until it passes a bound.
    while tl.atomic_add(counter, 1) < 500:
        pass
    tl.store(out + pid * BLOCK + offs, tl.zeros([BLOCK], dtype=tl.int32) + acc, mask=offs == 1)


def test_normal_loops_run_as_vectors(monkeypatch: pytest.MonkeyPatch, log: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(core, "BATCH_ELEMENTS", 6 * 4)
    x = np.arange(0, 64, 2, dtype=np.int32)
    out, counter = np.full((20, 4), -1, np.int32), np.zeros(1, np.int32)
    busy[(20,)](x, x.size, out, counter, BLOCK=4)
    searched = np.array([p % x.size - 1 for p in range(20)])
    np.testing.assert_array_equal(out[:, 0], np.where(searched < 0, -1, searched))
    np.testing.assert_array_equal(out[:, 1], sum(x[j % x.size] for j in range(3000)))
    assert counter[0] >= 500
    assert fallbacks(log) == []


@despina.jit(interpret=True)
def shows_then_fails(flag, n):
    pid = tl.program_id(0)
    tl.device_print("seen", pid)
    i = 0
    while tl.load(flag) + i < n:
        i += 1
    tl.device_assert(pid < 2, "pid too large")


def test_output_held_for_a_batch_is_shown_before_its_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(KernelRuntimeError, match="pid too large"):
        shows_then_fails[(4,)](np.zeros(1, np.int32), 3)
    assert capsys.readouterr().out.splitlines() == [f"pid ({p}, 0, 0) idx () seen{p}" for p in range(4)]
