"""Philox random numbers: bit-exact against a NumPy Philox, deterministic for a seed and offsets."""

from __future__ import annotations

import numpy as np
import pytest

import despina
import despina.language as tl

from .reference import philox, uint_to_uniform

N = 64


@despina.jit
def randint_kernel(out_ptr, seed, N: tl.constexpr, ROUNDS: tl.constexpr):
    offs = tl.program_id(0) * N + tl.arange(0, N)
    r = tl.randint(seed, offs, n_rounds=ROUNDS)
    tl.static_assert(r.dtype == tl.uint32)
    tl.store(out_ptr + offs, r)


@despina.jit
def randint4x_kernel(out_ptr, seed, N: tl.constexpr):
    offs = tl.arange(0, N)
    a, b, c, d = tl.randint4x(seed, offs)
    tl.store(out_ptr + offs, a)
    tl.store(out_ptr + N + offs, b)
    tl.store(out_ptr + 2 * N + offs, c)
    tl.store(out_ptr + 3 * N + offs, d)


@despina.jit
def float_random_kernel(out_ptr, seed, offset, N: tl.constexpr):
    offs = offset + tl.arange(0, N)
    u = tl.rand(seed, offs)
    z = tl.randn(seed, offs)
    tl.static_assert(u.dtype == tl.float32 and z.dtype == tl.float32)
    tl.store(out_ptr + tl.arange(0, N), u)
    tl.store(out_ptr + N + tl.arange(0, N), z)


@pytest.mark.parametrize("rounds", [10, 7])
@pytest.mark.parametrize("seed", [0, 12345, 2**40 + 17, 2**63 - 1])
def test_randint_matches_philox(device, seed, rounds):
    out = device.zeros(4 * N, "uint32")
    randint_kernel[(4,)](out, seed, N=N, ROUNDS=rounds)
    expected = philox(seed, np.arange(4 * N), n_rounds=rounds)[0]
    np.testing.assert_array_equal(device.get(out), expected)


@pytest.mark.parametrize("seed", [3, 2**35 + 5])
def test_randint4x_matches_philox(device, seed):
    out = device.zeros(4 * N, "uint32")
    randint4x_kernel[(1,)](out, seed, N=N)
    np.testing.assert_array_equal(device.get(out), np.concatenate(philox(seed, np.arange(N))))


def test_philox_reference_known_answers():
    # Random123's published known-answer vectors for philox4x32-10 and philox4x64-10, zero counter and key.
    assert [hex(v[0]) for v in philox(0, np.zeros(1, np.uint64))] == ["0x6627e8d5", "0xe169c58d", "0xbc57ac4c", "0x9b00dbd8"]
    assert [hex(v[0]) for v in philox(0, np.zeros(1, np.uint64), bits=64)] == [
        "0x16554d9eca36314c", "0xdb20fe9d672d0fdc", "0xd7e772cee186176b", "0x7e68b68aec7ba23b"]


@despina.jit
def wide_random_kernel(bits_ptr, u_ptr, seed, base, N: tl.constexpr):
    offs = base + tl.arange(0, N).to(tl.int64)
    r = tl.randint(seed, offs)
    tl.static_assert(r.dtype == tl.uint64)
    tl.store(bits_ptr + tl.arange(0, N), r)
    tl.store(u_ptr + tl.arange(0, N), tl.rand(seed, offs))


def test_64_bit_offsets_use_philox_4x64(device):
    seed, base = 77, 2**40
    bits, u = device.zeros(N, "uint64"), device.zeros(N, "fp32")
    wide_random_kernel[(1,)](bits, u, seed, base, N=N)
    expected = philox(seed, np.arange(base, base + N, dtype=np.int64).view(np.uint64), bits=64)[0]
    np.testing.assert_array_equal(device.get(bits), expected)
    np.testing.assert_array_equal(device.get(u), uint_to_uniform(expected))


@pytest.mark.parametrize("offset", [0, 1000])
def test_rand_and_randn_follow_from_the_bits(device, offset):
    seed = 42
    out = device.zeros(2 * N, "fp32")
    float_random_kernel[(1,)](out, seed, offset, N=N)
    got = device.get(out)
    c = philox(seed, np.arange(offset, offset + N))
    np.testing.assert_array_equal(got[:N], uint_to_uniform(c[0]))
    u1 = np.maximum(np.float32(1.0e-7), uint_to_uniform(c[0]))
    u2 = uint_to_uniform(c[1])
    normal = np.sqrt(-2.0 * np.log(u1.astype(np.float64))) * np.cos(2 * np.pi * u2.astype(np.float64))
    np.testing.assert_allclose(got[N:], normal, rtol=1e-4, atol=1e-4)
    assert ((got[:N] >= 0) & (got[:N] < 1)).all()


def test_same_seed_and_offsets_give_the_same_numbers(device):
    first, second, other = (device.zeros(2 * N, "fp32") for _ in range(3))
    float_random_kernel[(1,)](first, 7, 0, N=N)
    float_random_kernel[(1,)](second, 7, 0, N=N)
    float_random_kernel[(1,)](other, 8, 0, N=N)
    np.testing.assert_array_equal(device.get(first), device.get(second))
    assert (device.get(first) != device.get(other)).mean() > 0.9


@despina.jit
def distribution_kernel(out_ptr, seed, N: tl.constexpr):
    offs = tl.program_id(0) * N + tl.arange(0, N)
    tl.store(out_ptr + offs, tl.rand(seed, offs))
    tl.store(out_ptr + 4096 + offs, tl.randn(seed, offs))


def test_rand_is_uniform_and_randn_is_standard_normal(device):
    out = device.zeros(8192, "fp32")
    distribution_kernel[(16,)](out, 2024, N=256)
    u, z = device.get(out)[:4096], device.get(out)[4096:]
    assert abs(u.mean() - 0.5) < 0.02 and abs(u.var() - 1 / 12) < 0.01
    assert abs(z.mean()) < 0.05 and abs(z.std() - 1) < 0.05


@despina.jit
def dropout_kernel(x_ptr, out_ptr, n, p, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    keep = tl.rand(seed, offs) > p
    tl.store(out_ptr + offs, tl.where(keep, x / (1 - p), 0.0), mask=mask)


def test_low_memory_dropout_is_reproducible(device):
    x = np.ones(1000, np.float32)
    a, b = device.zeros(1000, "fp32"), device.zeros(1000, "fp32")
    dropout_kernel[(despina.cdiv(1000, 128),)](device.put(x), a, 1000, 0.25, 99, BLOCK=128)
    dropout_kernel[(despina.cdiv(1000, 256),)](device.put(x), b, 1000, 0.25, 99, BLOCK=256)
    np.testing.assert_array_equal(device.get(a), device.get(b))
    keep = uint_to_uniform(philox(99, np.arange(1000))[0]) > np.float32(0.25)
    np.testing.assert_allclose(device.get(a), np.where(keep, 1 / 0.75, 0.0), rtol=1e-6)


@despina.jit
def rand4x_kernel(out_ptr, seed, N: tl.constexpr):
    offs = tl.arange(0, N)
    a, b, c, d = tl.rand4x(seed, offs)
    e, f, g, h = tl.randn4x(seed, offs)
    tl.store(out_ptr + offs, a + b + c + d)
    tl.store(out_ptr + N + offs, e + f + g + h)


def test_rand4x_and_randn4x(device):
    out = device.zeros(2 * N, "fp32")
    rand4x_kernel[(1,)](out, 5, N=N)
    bits = philox(5, np.arange(N))
    np.testing.assert_allclose(device.get(out)[:N], sum(uint_to_uniform(b) for b in bits), rtol=1e-6)
    assert np.isfinite(device.get(out)[N:]).all()
