"""The 8-bit floats `tl.float8e4nv` (e4m3fn) and `tl.float8e5` (e5m2): loads, stores, casts (every bit
pattern decoded; rounding to nearest even, ties included; saturation; NaN) and `tl.dot`, against
the NumPy references of fp8_reference.py. fp8 arrays are passed as their bits:
`despina.reinterpret(uint8 array, tl.float8e4nv)`."""

from __future__ import annotations

import numpy as np
import pytest

import despina
import despina.language as tl

from .fp8_reference import MAX_FINITE, encode, midpoints, values

FP8 = {"fp8e4nv": tl.float8e4nv, "fp8e5": tl.float8e5}
N = 256


@despina.jit
def convert_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x.to(out_ptr.dtype.element_ty), mask=mask)


def fp8_array(device, bits: np.ndarray, name: str):
    return despina.reinterpret(device.put(np.asarray(bits, np.uint8)), FP8[name])


def convert(x: object, out: object, n: int) -> None:
    convert_kernel[(despina.cdiv(n, 128),)](x, out, n, BLOCK=128)


def same_bits(got: np.ndarray, want: np.ndarray, name: str) -> None:
    """Equal bit patterns, where any NaN pattern matches any other (NaN payloads are not compared)."""
    table = values(name)
    nan = np.isnan(table[want])
    np.testing.assert_array_equal(np.isnan(table[got]), nan)
    np.testing.assert_array_equal(got[~nan], want[~nan])


@pytest.mark.parametrize("name", FP8)
@pytest.mark.parametrize("dst", ["fp16", "bf16", "fp32", "fp64"])
def test_every_bit_pattern_decodes(device, name, dst):
    out = device.zeros(N, dst)
    convert(fp8_array(device, np.arange(N), name), out, N)
    np.testing.assert_array_equal(device.get(out).astype(np.float64), values(name))


@pytest.mark.parametrize("name", FP8)
def test_decoded_constants(name):
    table = values(name)
    assert np.nanmax(table[np.isfinite(table)]) == MAX_FINITE[name]
    if name == "fp8e4nv":
        assert np.flatnonzero(np.isnan(table)).tolist() == [0x7F, 0xFF] and not np.isinf(table).any()
        assert table[1] == 2.0**-9 and table[0x7E] == 448.0
    else:
        assert np.flatnonzero(np.isinf(table)).tolist() == [0x7C, 0xFC] and np.isnan(table).sum() == 6
        assert table[1] == 2.0**-16 and table[0x7B] == 57344.0


def _inputs(name: str) -> np.ndarray:
    """Ties (every midpoint), values just off them, beyond the largest finite value, infinities, NaN,
    signed zeros, subnormal ties and random values over the whole range."""
    mids = midpoints(name)
    top = MAX_FINITE[name]
    rng = np.random.default_rng(0)
    special = [np.inf, -np.inf, np.nan, 0.0, -0.0, top, -top, top * 1.03, top * 1.07, -top * 1.5, 1e30, -1e30]
    spread = rng.standard_normal(600) * np.exp2(rng.integers(-20, 18, 600))
    return np.concatenate([mids, np.nextafter(mids.astype(np.float32), np.float32(np.inf)), special, spread])


@pytest.mark.parametrize("name", FP8)
@pytest.mark.parametrize("src", ["fp32", "fp16", "bf16"])
def test_rounding_to_fp8_is_nearest_even_and_saturates(device, name, src):
    x = _inputs(name)
    if src == "fp16":
        x = x[np.isnan(x) | (np.abs(x) <= 65504) | np.isinf(x)]
    held = device.get(device.put(x, src)).astype(np.float64)  # the values the kernel reads
    want = np.array([encode(v, name) for v in held], dtype=np.uint8)
    out = fp8_array(device, np.zeros(len(x)), name)
    convert(device.put(x, src), out, len(x))
    same_bits(device.bits(out), want, name)


@pytest.mark.parametrize("name", FP8)
def test_fp8_through_fp32_to_integers_and_from_fp64(device, name):
    bits = np.arange(N)
    finite = np.isfinite(values(name)) & (np.abs(values(name)) < 2**31)
    out = device.zeros(N, "int32")
    convert(fp8_array(device, bits, name), out, N)
    np.testing.assert_array_equal(device.get(out)[finite], np.trunc(values(name)[finite]).astype(np.int32))
    x = np.array([1.0625, -3.3, 300.0, 1e6, -2.0**-12], np.float64)
    out8 = fp8_array(device, np.zeros(len(x)), name)
    convert(device.put(x, "fp64"), out8, len(x))
    want = np.array([encode(float(np.float32(v)), name) for v in x], np.uint8)
    same_bits(device.bits(out8), want, name)


@despina.jit
def between_fp8_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs).to(out_ptr.dtype.element_ty), mask=offs < n)


def test_e4m3_to_e5m2_and_back(device):
    bits = np.arange(N)
    out = fp8_array(device, np.zeros(N), "fp8e5")
    between_fp8_kernel[(1,)](fp8_array(device, bits, "fp8e4nv"), out, N, BLOCK=N)
    want = np.array([encode(v, "fp8e5") for v in values("fp8e4nv")], np.uint8)
    same_bits(device.bits(out), want, "fp8e5")


@despina.jit
def full_kernel(out_ptr, VALUE: tl.constexpr, DTYPE: tl.constexpr):
    offs = tl.arange(0, 16)
    tl.store(out_ptr + offs, tl.full((16,), VALUE, DTYPE))


@pytest.mark.parametrize("name", FP8)
def test_constants_of_fp8_type_round_like_casts(device, name):
    for value in (0.0, 1.1, 1e9, -3.75):
        out = fp8_array(device, np.zeros(16), name)
        full_kernel[(1,)](out, VALUE=value, DTYPE=FP8[name])
        assert device.bits(out).tolist() == [encode(value, name)] * 16


@despina.jit
def fp8_dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b))


@pytest.mark.parametrize("names", [("fp8e4nv", "fp8e4nv"), ("fp8e5", "fp8e5"), ("fp8e4nv", "fp8e5")])
def test_fp8_dot_is_the_exact_product_rounded_once_to_fp32(device, names):
    m, n, k = 64, 64, 64
    rng = np.random.default_rng(1)
    # Multiples of 1/2 up to 2: every partial sum fits the few bits that Hopper's fp8 tensor cores
    # accumulate in, so the GPU's product is exact too.
    pick = [np.flatnonzero(np.isin(values(nm), np.arange(-2, 2.5, 0.5))) for nm in names]
    a_bits, b_bits = rng.choice(pick[0], (m, k)), rng.choice(pick[1], (k, n))
    c = device.zeros((m, n), "fp32")
    fp8_dot_kernel[(1,)](fp8_array(device, a_bits, names[0]), fp8_array(device, b_bits, names[1]), c, M=m, N=n, K=k)
    want = (values(names[0])[a_bits] @ values(names[1])[b_bits]).astype(np.float32)
    np.testing.assert_array_equal(device.get(c), want)


def test_torch_fp8_dtypes_are_fp8_pointers():
    from despina.arguments import element_type

    assert element_type("torch.float8_e4m3fn") == tl.float8e4nv
    assert element_type("torch.float8_e5m2") == tl.float8e5


def test_torch_cpu_fp8_tensors(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("DESPINA_INTERPRET", "1")
    x = torch.linspace(-500, 500, 300)
    out = torch.zeros(300, dtype=torch.float8_e4m3fn)
    convert(x, out, 300)
    assert torch.equal(out.view(torch.uint8), x.to(torch.float8_e4m3fn).view(torch.uint8))
    back = torch.zeros(300)
    convert(out, back, 300)
    assert torch.equal(back, out.float())
