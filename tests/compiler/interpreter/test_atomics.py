"""Atomics under contention: every lane of every program updates memory in some serial order."""

from __future__ import annotations

import numpy as np
import pytest

from despina.compiler.ir.types import ScalarType, int32

from .kernel import K, ptr
from .reference import NUMPY, bf16, from_memory, to_memory

SEM = {"sem": "acq_rel", "scope": "gpu"}


def test_thousand_programs_increment_one_counter_and_get_distinct_tickets() -> None:
    k = K(counter=ptr("int32"), tickets=ptr("int32"))
    old = k.op("atomic_rmw", k.arg["counter"], k.const(1), kind="add", **SEM)
    k.void("store", k.op("addptr", k.arg["tickets"], k.pid()), old)
    counter, tickets = np.array([5], np.int32), np.zeros(1000, np.int32)
    k.run(1000, counter, tickets)
    assert counter[0] == 1005
    np.testing.assert_array_equal(np.sort(tickets), np.arange(5, 1005))


def test_histogram() -> None:
    k = K(x=ptr("int32"), bins=ptr("int32"), n=int32)
    offs = k.offsets(256)
    mask = k.lt(offs, k.splat(k.arg["n"], 256))
    v = k.op("load", k.at(k.arg["x"], offs), mask)
    k.void("atomic_rmw", k.at(k.arg["bins"], v), k.splat(k.const(1), 256), mask, kind="add", **SEM)
    x = np.random.default_rng(0).integers(0, 32, 10_000).astype(np.int32)
    bins = np.zeros(32, np.int32)
    k.run((10_000 + 255) // 256, x, bins, 10_000)
    np.testing.assert_array_equal(bins, np.bincount(x, minlength=32))


def _apply_serially(kind: str, memory: np.ndarray, idx: np.ndarray, values: np.ndarray) -> np.ndarray:
    old = np.zeros_like(values)
    for lane, (i, v) in enumerate(zip(idx, values)):
        old[lane] = memory[i]
        if kind == "add":
            memory[i] = memory[i] + v
        elif kind in ("max", "umax"):
            memory[i] = max(memory[i], v)
        elif kind in ("min", "umin"):
            memory[i] = min(memory[i], v)
        elif kind == "and":
            memory[i] &= v
        elif kind == "or":
            memory[i] |= v
        elif kind == "xor":
            memory[i] ^= v
        else:
            memory[i] = v
    return old


@pytest.mark.parametrize(
    "kind, dtype",
    [
        ("add", "int64"),
        ("max", "int32"),
        ("min", "int16"),
        ("umax", "uint32"),
        ("umin", "uint8"),
        ("and", "int32"),
        ("or", "uint16"),
        ("xor", "int8"),
        ("xchg", "int32"),
        ("add", "uint8"),
    ],
)
@pytest.mark.parametrize("used", [True, False])
def test_rmw_kinds_return_old_values_of_a_serial_order(kind: str, dtype: str, used: bool) -> None:
    # 4 programs x 16 lanes hit 5 addresses; lanes run in program order, then lane order.
    k = K(target=ptr(dtype), where=ptr("int32"), vals=ptr(dtype), old=ptr(dtype))
    offs = k.offsets(16)
    where = k.op("load", k.at(k.arg["where"], offs))
    result = k.op("atomic_rmw", k.at(k.arg["target"], where), k.op("load", k.at(k.arg["vals"], offs)), kind=kind, **SEM)
    if used:
        k.void("store", k.at(k.arg["old"], offs), result)
    rng = np.random.default_rng(1)
    np_dtype = NUMPY[dtype]
    where_, vals = rng.integers(0, 5, 64).astype(np.int32), rng.integers(0, 100, 64).astype(np_dtype)
    target, old = rng.integers(0, 100, 5).astype(np_dtype), np.zeros(64, np_dtype)
    expected_target = target.copy()
    with np.errstate(over="ignore"):
        expected_old = _apply_serially(kind, expected_target, where_, vals)
    k.run(4, target, where_, vals, old)
    np.testing.assert_array_equal(target, expected_target)
    if used:
        np.testing.assert_array_equal(old, expected_old)


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32", "fp64"])
def test_float_atomic_add(dtype: str) -> None:
    k = K(acc=ptr(dtype), x=ptr(dtype), old=ptr(dtype))
    offs = k.offsets(8)
    result = k.op(
        "atomic_rmw",
        k.at(k.arg["acc"], k.op("and", offs, k.splat(k.const(3), 8))),
        k.op("load", k.at(k.arg["x"], offs)),
        kind="fadd",
        **SEM,
    )
    k.void("store", k.at(k.arg["old"], offs), result)
    x = np.arange(32, dtype=np.float64) * 0.25
    acc, old = np.zeros(4), np.zeros(32)
    acc_mem, old_mem = to_memory(acc, dtype), to_memory(old, dtype)
    k.run(4, acc_mem, to_memory(x, dtype), old_mem)
    np.testing.assert_array_equal(from_memory(acc_mem, dtype), [x[i::4].sum() for i in range(4)])
    # Each old value is the sum of the lanes before it at that address.
    np.testing.assert_array_equal(from_memory(old_mem, dtype), [x[i % 4 : i : 4].sum() for i in range(32)])


def test_bf16_atomic_add_rounds_each_update() -> None:
    k = K(acc=ptr("bf16"), x=ptr("bf16"))
    k.void("atomic_rmw", k.splat(k.arg["acc"], 4), k.op("load", k.at(k.arg["x"], k.arange(4))), kind="fadd", **SEM)
    acc = to_memory(np.ones(1), "bf16")
    k.run(1, acc, to_memory(np.full(4, 2.0**-8), "bf16"))
    # 1 + 2**-8 is a tie that rounds back to 1, every time.
    assert from_memory(acc, "bf16")[0] == 1.0
    assert bf16(np.array([1 + 2.0**-8]))[0] == 1.0


def test_masked_atomics_and_inactive_programs_do_nothing() -> None:
    k = K(counter=ptr("int32"))
    pid = k.pid()
    offs = k.arange(8)
    mask = k.lt(offs, k.splat(pid, 8))
    inside = k.lt(pid, k.const(4))

    def then() -> list:
        k.void("atomic_rmw", k.splat(k.arg["counter"], 8), k.splat(k.const(1), 8), mask, kind="add", **SEM)
        return []

    k.if_(inside, then, lambda: [])
    counter = np.zeros(1, np.int32)
    k.run(8, counter)
    assert counter[0] == 0 + 1 + 2 + 3


def test_compare_and_swap_lock_free_increment() -> None:
    # Each program claims the first free slot (value 0) by CAS, in a loop: every slot gets one owner.
    k = K(slots=ptr("int32"), owner=ptr("int32"))
    pid = k.pid()
    me = k.op("add", pid, k.const(1))

    def before(i):
        got = k.op("atomic_cas", k.op("addptr", k.arg["slots"], i), k.const(0), me, **SEM)
        return [k.op("cmp", got, k.const(0), pred="ne"), i]

    slot = k.while_([k.const(0)], before, lambda i: [k.op("add", i, k.const(1))])[0]
    k.void("store", k.op("addptr", k.arg["owner"], pid), slot)
    slots, owner = np.zeros(50, np.int32), np.zeros(50, np.int32)
    k.run(50, slots, owner)
    np.testing.assert_array_equal(np.sort(slots), np.arange(1, 51))
    np.testing.assert_array_equal(slots[owner], np.arange(1, 51))


def test_cas_on_floats_compares_bits() -> None:
    k = K(x=ptr("fp32"), old=ptr("fp32"))
    offs = k.arange(4)
    cmp = k.splat(k.const(-0.0, ScalarType("fp32")), 4)
    r = k.op("atomic_cas", k.at(k.arg["x"], offs), cmp, k.splat(k.const(7.0, ScalarType("fp32")), 4), **SEM)
    k.void("store", k.at(k.arg["old"], offs), r)
    x, old = np.array([0.0, -0.0, 1.0, -0.0], np.float32), np.zeros(4, np.float32)
    k.run(1, x, old)
    np.testing.assert_array_equal(x, [0.0, 7.0, 1.0, 7.0])
    assert np.signbit(old[1]) and not np.signbit(old[0])
