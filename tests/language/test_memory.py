"""`tl.load`, `tl.store` and the atomics, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import despina
import despina.language as tl
from despina.compiler.ir.printer import print_module

from .reference import DTYPES, as_dtype, is_float, sample

N = 32


@despina.jit
def masked_copy_kernel(x_ptr, out_ptr, n, N: tl.constexpr, OTHER: tl.constexpr):
    offs = tl.arange(0, N)
    mask = offs < n
    if OTHER is None:
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x, mask=mask)
    else:
        x = tl.load(x_ptr + offs, mask=mask, other=OTHER)
        tl.store(out_ptr + offs, x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_load_with_other(device, dtype):
    x = sample(dtype, N, 1)
    out = device.zeros(N, dtype)
    masked_copy_kernel[(1,)](device.put(x, dtype), out, 20, N=N, OTHER=3)
    np.testing.assert_array_equal(device.get(out), np.where(np.arange(N) < 20, x, 3))


@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_store_leaves_the_rest(device, dtype):
    x = sample(dtype, N, 1)
    before = sample(dtype, N, 2)
    out = device.put(before, dtype)
    masked_copy_kernel[(1,)](device.put(x, dtype), out, 11, N=N, OTHER=None)
    np.testing.assert_array_equal(device.get(out), np.where(np.arange(N) < 11, x, before))


@despina.jit
def other_tensor_kernel(x_ptr, y_ptr, out_ptr, n, N: tl.constexpr):
    offs = tl.arange(0, N)
    y = tl.load(y_ptr + offs)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs >= n, other=y * 2))


def test_other_can_be_a_tile(device):
    x, y = np.arange(N, dtype=np.float32), np.full(N, -1.0, np.float32)
    out = device.zeros(N, "fp32")
    other_tensor_kernel[(1,)](device.put(x), device.put(y), out, 8, N=N)
    np.testing.assert_array_equal(device.get(out), np.where(np.arange(N) >= 8, x, -2.0))


@despina.jit
def masked_2d_kernel(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.arange(0, BM)[:, None]
    cols = tl.arange(0, BN)[None, :]
    x = tl.load(x_ptr + rows * N + cols, mask=(rows < M) & (cols < N), other=-1.0)
    tl.store(out_ptr + rows * BN + cols, x)


def test_masked_2d_load_out_of_bounds_lanes_read_nothing(device):
    x = np.arange(3 * 5, dtype=np.float32).reshape(3, 5)
    out = device.zeros((4, 8), "fp32")
    masked_2d_kernel[(1,)](device.put(x), out, 3, 5, BM=4, BN=8)
    expected = np.full((4, 8), -1.0, np.float32)
    expected[:3, :5] = x
    np.testing.assert_array_equal(device.get(out), expected)


@despina.jit
def scalar_mask_kernel(x_ptr, out_ptr, flag, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs, mask=flag > 0, other=0.0)
    tl.store(out_ptr + offs, x + 1, mask=flag > 0)


@pytest.mark.parametrize("flag", [0, 1])
def test_scalar_mask_broadcasts(device, flag):
    x = np.arange(N, dtype=np.float32)
    out = device.put(np.full(N, 9.0, np.float32))
    scalar_mask_kernel[(1,)](device.put(x), out, flag, N=N)
    np.testing.assert_array_equal(device.get(out), x + 1 if flag else np.full(N, 9.0))


@despina.jit
def scalar_access_kernel(x_ptr, out_ptr, i):
    v = tl.load(x_ptr + i)
    tl.static_assert(v.shape == ())
    tl.store(out_ptr, v * 2)
    tl.store(out_ptr + 1, v, mask=i > 100)
    tl.store(i + out_ptr + 1 - 1 + 2, tl.load(x_ptr + i - 1, mask=i > 0, other=-5.0))


@pytest.mark.parametrize("i", [0, 3])
def test_scalar_loads_and_stores(device, i):
    x = np.arange(8, dtype=np.float32) + 10
    out = device.put(np.zeros(8, np.float32))
    scalar_access_kernel[(1,)](device.put(x), out, i)
    got = device.get(out)
    assert got[0] == x[i] * 2 and got[1] == 0
    assert got[i + 2] == (x[i - 1] if i > 0 else -5.0)


@despina.jit
def store_cast_kernel(out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, offs)
    tl.store(out_ptr + N + offs, 2.5)
    tl.store(out_ptr + 2 * N + offs, offs.to(tl.float64) / 2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_store_converts_to_the_pointee_type(device, dtype):
    n = 8
    out = device.zeros(3 * n, dtype)
    store_cast_kernel[(1,)](out, N=n)
    half = np.arange(n) / 2
    expected = np.concatenate([np.arange(n), [2.5] * n, half]) if is_float(dtype) else \
        np.concatenate([np.arange(n), [2] * n, np.trunc(half)])
    np.testing.assert_array_equal(device.get(out), as_dtype(expected, dtype))


@despina.jit
def bool_kernel(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    tl.static_assert(x.dtype == tl.int1)
    tl.store(out_ptr + offs, ~x.to(tl.int32) & 1)
    tl.store(out_ptr + N + offs, tl.where(x, 5, 6))


def test_bool_arrays(device):
    x = np.arange(N) % 3 == 0
    out = device.zeros(2 * N, "int32")
    bool_kernel[(1,)](device.put(x), out, N=N)
    np.testing.assert_array_equal(device.get(out), np.concatenate([(~x.astype(np.int32)) & 1, np.where(x, 5, 6)]))


@despina.jit
def pointer_walk_kernel(x_ptr, out_ptr, n, N: tl.constexpr):
    p = x_ptr + tl.arange(0, N)
    acc = tl.zeros((N,), tl.float32)
    for _ in range(n):
        acc += tl.load(p)
        p += N
    q = out_ptr + N - tl.arange(0, N) - 1
    tl.store(q, acc)
    tl.store(tl.arange(0, N) + (out_ptr + N), acc * 0 + 1)


def test_pointer_arithmetic_and_loop_carried_pointers(device):
    x = np.arange(3 * N, dtype=np.float32).reshape(3, N)
    out = device.zeros(2 * N, "fp32")
    pointer_walk_kernel[(1,)](device.put(x), out, 3, N=N)
    np.testing.assert_array_equal(device.get(out), np.concatenate([x.sum(0)[::-1], np.ones(N)]))


@despina.jit
def cache_kernel(x_ptr, out_ptr, N: tl.constexpr, LOAD_CACHE: tl.constexpr, STORE_CACHE: tl.constexpr,
                 EVICT: tl.constexpr, VOLATILE: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs, cache_modifier=LOAD_CACHE, eviction_policy=EVICT, volatile=VOLATILE)
    tl.store(out_ptr + offs, x + 1, cache_modifier=STORE_CACHE, eviction_policy=EVICT)


@pytest.mark.parametrize(("load_cache", "store_cache", "evict", "volatile"), [
    ("", "", "", False), (".ca", ".wb", "evict_first", True), (".cg", ".cg", "evict_last", False),
    (".cv", ".cs", "evict_normal", True), (".cg", ".wt", "", False),
])
def test_cache_modifiers_eviction_policy_and_volatile(device, trace, load_cache, store_cache, evict, volatile):
    x = np.arange(N, dtype=np.float32)
    out = device.zeros(N, "fp32")
    meta = {"N": N, "LOAD_CACHE": load_cache, "STORE_CACHE": store_cache, "EVICT": evict, "VOLATILE": volatile}
    cache_kernel[(1,)](device.put(x), out, **meta)
    np.testing.assert_array_equal(device.get(out), x + 1)
    text = print_module(trace(cache_kernel, x, out, **meta), locs=False)
    volatile_text = "true" if volatile else "false"
    assert 'load(%' in text and f'cache = "{load_cache}", evict = "{evict}", volatile = {volatile_text}' in text
    assert f'cache = "{store_cache}", evict = "{evict}"}}' in text


# ---- atomics ---------------------------------------------------------------------------------

P, BLOCK = 4, 16


@despina.jit
def atomic_kernel(ptr, val_ptr, old_ptr, K: tl.constexpr, BLOCK: tl.constexpr, OP: tl.constexpr,
                  SEM: tl.constexpr, SCOPE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs % 5 != 3
    old = OP(ptr + offs % K, tl.load(val_ptr + offs), mask=mask, sem=SEM, scope=SCOPE)
    tl.store(old_ptr + offs, old, mask=mask)


ATOMICS = {
    "add": (tl.atomic_add, lambda a, b: a + b, ["int32", "uint32", "int64", "uint64", "fp16", "bf16", "fp32", "fp64"]),
    "max": (tl.atomic_max, np.maximum, ["int32", "uint32", "int64", "uint64", "fp32", "fp64"]),
    "min": (tl.atomic_min, np.minimum, ["int32", "uint32", "int64", "uint64", "fp32", "fp64"]),
    "and": (tl.atomic_and, np.bitwise_and, ["int32", "uint32", "int64", "uint64"]),
    "or": (tl.atomic_or, np.bitwise_or, ["int32", "uint32", "int64", "uint64"]),
    "xor": (tl.atomic_xor, np.bitwise_xor, ["int32", "uint32", "int64", "uint64"]),
    "xchg": (tl.atomic_xchg, lambda a, b: b, ["int32", "uint32", "int64", "uint64", "fp32", "fp64"]),
}
ATOMIC_CASES = [(name, dtype) for name, (_, _, dtypes) in ATOMICS.items() for dtype in dtypes]


def run_atomic(device, name, dtype, init, vals, k, sem=None, scope=None):
    mem = device.put(init, dtype)
    old = device.zeros(P * BLOCK, dtype)
    atomic_kernel[(P,)](mem, device.put(vals, dtype), old, K=k, BLOCK=BLOCK, OP=ATOMICS[name][0], SEM=sem, SCOPE=scope)
    return device.get(mem), device.get(old)


def _values(name: str, dtype: str) -> np.ndarray:
    if name == "add":
        return as_dtype(np.ones(P * BLOCK), dtype)
    return sample(dtype, P * BLOCK, 11, low=-50 if is_float(dtype) else None, high=50 if is_float(dtype) else None)


MASK = np.arange(P * BLOCK) % 5 != 3


@pytest.mark.parametrize(("name", "dtype"), ATOMIC_CASES)
def test_atomic_without_contention_returns_the_old_value(device, name, dtype):
    init, vals = sample(dtype, P * BLOCK, 10, low=-50, high=50) if is_float(dtype) else sample(dtype, P * BLOCK, 10), \
        _values(name, dtype)
    mem, old = run_atomic(device, name, dtype, init, vals, P * BLOCK)
    with np.errstate(all="ignore"):
        expected = as_dtype(ATOMICS[name][1](init, vals), dtype)
    np.testing.assert_array_equal(mem, np.where(MASK, expected, init))
    np.testing.assert_array_equal(old[MASK], init[MASK])


@pytest.mark.parametrize(("name", "dtype"), ATOMIC_CASES)
def test_atomic_under_contention(device, name, dtype):
    k = 4
    init = sample(dtype, k, 12, low=-50, high=50).round() if is_float(dtype) else sample(dtype, k, 12)
    vals = _values(name, dtype)
    mem, old = run_atomic(device, name, dtype, init, vals, k)
    fn = ATOMICS[name][1]
    for a in range(k):
        mine = np.flatnonzero(MASK & (np.arange(P * BLOCK) % k == a))
        if name == "xchg":
            # The exchanges form one chain: every value is returned once except the last one written.
            assert sorted(old[mine].tolist() + [mem[a]]) == sorted(vals[mine].tolist() + [init[a]])
            continue
        expected = init[a]
        with np.errstate(all="ignore"):
            for i in mine:
                expected = as_dtype(fn(expected, vals[i]), dtype)
        assert mem[a] == expected
        if name == "add":
            with np.errstate(all="ignore"):
                tickets = init[a] + np.arange(len(mine), dtype=init.dtype)
            np.testing.assert_array_equal(np.sort(old[mine]), np.sort(as_dtype(tickets, dtype)))


@pytest.mark.parametrize("scope", [None, "gpu", "cta", "sys"])
@pytest.mark.parametrize("sem", [None, "relaxed", "acquire", "release", "acq_rel"])
def test_atomic_sem_and_scope(device, trace, sem, scope):
    init, vals = np.zeros(4, np.int32), np.ones(P * BLOCK, np.int32)
    mem, _ = run_atomic(device, "add", "int32", init, vals, 4, sem, scope)
    assert mem.sum() == MASK.sum()
    text = print_module(trace(atomic_kernel, init, vals, vals, K=4, BLOCK=BLOCK, OP=tl.atomic_add, SEM=sem, SCOPE=scope))
    assert f'scope = "{scope or "gpu"}", sem = "{sem or "acq_rel"}"' in text


@despina.jit
def atomic_scalar_kernel(counter_ptr, out_ptr):
    pid = tl.program_id(0)
    ticket = tl.atomic_add(counter_ptr, 1)
    tl.store(out_ptr + pid, ticket)
    tl.atomic_max(counter_ptr + 1, pid)
    tl.atomic_min(counter_ptr + 2, -pid, mask=pid > 2)


def test_scalar_atomics_hand_out_unique_tickets(device):
    counter = device.put(np.zeros(3, np.int32))
    out = device.zeros(16, "int32")
    atomic_scalar_kernel[(16,)](counter, out)
    np.testing.assert_array_equal(np.sort(device.get(out)), np.arange(16))
    np.testing.assert_array_equal(device.get(counter), [16, 15, -15])


@despina.jit
def cas_kernel(ptr, out_ptr, SEM: tl.constexpr, SCOPE: tl.constexpr):
    pid = tl.program_id(0)
    old = tl.atomic_cas(ptr, 0, pid + 1, sem=SEM, scope=SCOPE)
    tl.store(out_ptr + pid, old)


@pytest.mark.parametrize(("sem", "scope"), [(None, None), ("acquire", "cta"), ("relaxed", "sys")])
@pytest.mark.parametrize("dtype", ["int32", "uint32", "int64", "uint64", "fp32", "fp64"])
def test_atomic_cas_only_one_program_wins(device, dtype, sem, scope):
    mem = device.zeros(1, dtype)
    out = device.zeros(8, dtype)
    cas_kernel[(8,)](mem, out, SEM=sem, SCOPE=scope)
    winner = device.get(mem)[0]
    olds = device.get(out)
    assert 1 <= winner <= 8
    assert olds[int(winner) - 1] == 0
    assert (olds == 0).sum() == 1 and (olds[olds != 0] == winner).all()


@despina.jit
def cas_counter_kernel(ptr, BLOCK: tl.constexpr):
    done = False
    while not done:
        seen = tl.load(ptr, volatile=True)
        done = tl.atomic_cas(ptr, seen, seen + 1) == seen


@despina.jit
def cas_tile_kernel(ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    old = tl.atomic_cas(ptr + offs, offs * 0 + 7, offs + 100)
    tl.store(out_ptr + offs, old)


def test_atomic_cas_retry_loop_counts_every_program(device):
    counter = device.zeros(1, "int32")
    cas_counter_kernel[(12,)](counter, BLOCK=1)
    assert device.get(counter)[0] == 12


def test_atomic_cas_on_tiles(device):
    mem = device.put(np.array([7, 0, 7, 1] * 4, np.int64))
    out = device.zeros(16, "int64")
    cas_tile_kernel[(1,)](mem, out, BLOCK=16)
    start = np.array([7, 0, 7, 1] * 4)
    np.testing.assert_array_equal(device.get(out), start)
    np.testing.assert_array_equal(device.get(mem), np.where(start == 7, np.arange(16) + 100, start))
