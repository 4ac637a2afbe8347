"""`tl.cast` and `.to(dtype, bitcast=, fp_downcast_rounding=)` between every pair of dtypes."""

from __future__ import annotations

import numpy as np
import pytest

import despina
import despina.language as tl

from .reference import DTYPES, INT_DTYPES, NUMPY, as_dtype, bf16_bits, is_float, sample, tolerance

N = 32


@despina.jit
def cast_kernel(x_ptr, out_ptr, N: tl.constexpr, BITCAST: tl.constexpr, ROUNDING: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = x.to(out_ptr.dtype.element_ty, bitcast=BITCAST, fp_downcast_rounding=ROUNDING)
    tl.static_assert(y.dtype == out_ptr.dtype.element_ty)
    tl.store(out_ptr + offs, y)


@despina.jit
def tl_cast_kernel(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.cast(tl.load(x_ptr + offs), out_ptr.dtype.element_ty))


def run_cast(device, x, src, dst, bitcast=False, rounding=None):
    out = device.zeros(N, dst)
    cast_kernel[(1,)](device.put(x, src), out, N=N, BITCAST=bitcast, ROUNDING=rounding)
    return device.get(out)


def _values(src: str, dst: str) -> np.ndarray:
    """Values every conversion src -> dst defines: in both ranges, with fractions for floats."""
    unsigned = src.startswith("u") or dst.startswith("u")
    x = np.linspace(0 if unsigned else -100, 100, N)
    if not is_float(src):
        x = np.trunc(x)
    return as_dtype(x, src)


@pytest.mark.parametrize("dst", DTYPES)
@pytest.mark.parametrize("src", DTYPES)
def test_cast_between_all_dtypes(device, src, dst):
    x = _values(src, dst)
    expected = as_dtype(np.trunc(x.astype(np.float64)) if not is_float(dst) else x.astype(np.float64), dst)
    got = run_cast(device, x, src, dst)
    if is_float(dst):
        np.testing.assert_allclose(got, expected, **tolerance(dst))
    else:
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dst", INT_DTYPES)
@pytest.mark.parametrize("src", INT_DTYPES)
def test_integer_casts_wrap_and_extend(device, src, dst):
    x = sample(src, N, 3)
    np.testing.assert_array_equal(run_cast(device, x, src, dst), x.astype(NUMPY[dst]))


@pytest.mark.parametrize("src", DTYPES)
def test_cast_to_int1_is_nonzero(device, src):
    x = sample(src, N, 4)
    x[::3] = 0
    np.testing.assert_array_equal(run_cast(device, x, src, "int1"), x != 0)


@pytest.mark.parametrize("dst", DTYPES)
def test_cast_from_int1(device, dst):
    x = np.arange(N) % 3 == 0
    np.testing.assert_array_equal(run_cast(device, x, "int1", dst), x.astype(np.float64))


@pytest.mark.parametrize(("src", "dst"), [("fp32", "fp16"), ("fp32", "bf16"), ("fp64", "fp32"), ("fp64", "fp16")])
def test_float_downcast_rounds_to_nearest_even(device, src, dst):
    rng = np.random.default_rng(5)
    x = as_dtype(rng.uniform(-3, 3, N), src)
    got = run_cast(device, x, src, dst)
    np.testing.assert_array_equal(got, as_dtype(x, dst))


def _toward_zero(x: np.ndarray, dst: str) -> np.ndarray:
    if dst == "bf16":
        return ((x.view(np.uint32) >> 16) << 16).view(np.float32)
    nearest = x.astype(np.float16)
    away = np.abs(nearest.astype(np.float32)) > np.abs(x)
    return np.where(away, np.nextafter(nearest, np.float16(0)), nearest)


@pytest.mark.parametrize("dst", ["fp16", "bf16"])
def test_fp_downcast_rounding_rtz(device, dst):
    rng = np.random.default_rng(6)
    x = rng.uniform(-3, 3, N).astype(np.float32)
    np.testing.assert_array_equal(run_cast(device, x, "fp32", dst, rounding="rtz"), _toward_zero(x, dst))
    np.testing.assert_array_equal(run_cast(device, x, "fp32", dst, rounding="rtne"), as_dtype(x, dst))


def test_float_to_int_truncates_toward_zero(device):
    x = np.array([-2.7, -2.5, -0.5, 0.5, 1.5, 2.5, 2.7, -1.0] * 4, np.float32)
    np.testing.assert_array_equal(run_cast(device, x, "fp32", "int32"), [-2, -2, 0, 0, 1, 2, 2, -1] * 4)


BITCAST_PAIRS = [(a, b) for a in DTYPES for b in DTYPES
                 if np.dtype(NUMPY[a] if a != "bf16" else np.float16).itemsize
                 == np.dtype(NUMPY[b] if b != "bf16" else np.float16).itemsize]


def _bits(x: np.ndarray, dtype: str) -> np.ndarray:
    return bf16_bits(x) if dtype == "bf16" else x.view(np.dtype(f"u{x.dtype.itemsize}"))


@pytest.mark.parametrize(("src", "dst"), BITCAST_PAIRS)
def test_bitcast_keeps_the_bits(device, src, dst):
    x = sample(src, N, 7)
    out = device.zeros(N, dst)
    cast_kernel[(1,)](device.put(x, src), out, N=N, BITCAST=True, ROUNDING=None)
    np.testing.assert_array_equal(device.bits(out), _bits(x, src))


@pytest.mark.parametrize("dst", ["fp16", "int64", "uint8"])
def test_tl_cast(device, dst):
    x = np.arange(N, dtype=np.float32)
    out = device.zeros(N, dst)
    tl_cast_kernel[(1,)](device.put(x), out, N=N)
    np.testing.assert_array_equal(device.get(out), x)


@despina.jit
def pointer_cast_kernel(x_ptr, bits_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    address = x_ptr.to(tl.int64)
    back = address.to(tl.pointer_type(tl.float32))
    tl.store(out_ptr + offs, tl.load(back + offs) * 2)
    as_int = x_ptr.to(tl.pointer_type(tl.int32))
    tl.store(bits_ptr + offs, tl.load(as_int + offs))


def test_pointer_casts(device):
    x = np.arange(N, dtype=np.float32) + 0.5
    bits, out = device.zeros(N, "int32"), device.zeros(N, "fp32")
    pointer_cast_kernel[(1,)](device.put(x), bits, out, N=N)
    np.testing.assert_array_equal(device.get(out), x * 2)
    np.testing.assert_array_equal(device.get(bits), x.view(np.int32))


@despina.jit
def dtype_attrs_kernel(x_ptr, out_ptr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    tl.static_assert(x_ptr.dtype.element_ty == tl.float16)
    tl.static_assert(x_ptr.dtype == tl.pointer_type(tl.float16))
    tl.static_assert(x.dtype == tl.float16 and x.shape == (N,) and x.dtype.is_floating())
    tl.static_assert(x.dtype.primitive_bitwidth == 16)
    tl.store(out_ptr, x.to(tl.float32).numel)


def test_dtype_and_shape_attributes(device):
    out = device.zeros(1, "int32")
    dtype_attrs_kernel[(1,)](device.put(np.zeros(N, np.float16)), out, N=N)
    assert device.get(out)[0] == N
