"""`tl.extra.cuda.libdevice` (Triton's tutorial 07) against references computed with Python's `math`
and integer arithmetic, element by element: the interpreter's NumPy and the GPU's libdevice alike."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

import despina
import despina.language as tl
from despina.language.extra import libdevice
from despina.language.extra.cuda import libdevice as cuda_libdevice

N = 64


@despina.jit
def asin_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    x = libdevice.asin(x)
    tl.store(y_ptr + offsets, x, mask=mask)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tutorial_07_asin(device, dtype):
    n = 1000
    x = np.random.default_rng(0).uniform(-1, 1, n).astype(dtype)
    y = device.zeros(n, "fp32" if dtype == np.float32 else "fp64")
    asin_kernel[(-(-n // 256),)](device.put(x), y, n, BLOCK_SIZE=256)
    expected = np.array([math.asin(v) for v in x.astype(float)])
    np.testing.assert_allclose(device.get(y), expected, rtol=2e-7 if dtype == np.float32 else 1e-15, atol=1e-7)


def test_the_namespaces_are_one_module():
    assert libdevice is cuda_libdevice is tl.extra.cuda.libdevice is tl.extra.libdevice
    assert len(libdevice.FUNCTIONS) == 197
    assert libdevice.FUNCTIONS["asin"] == ((("fp32",), "__nv_asinf", "fp32"), (("fp64",), "__nv_asin", "fp64"))


@despina.jit
def call_kernel(x_ptr, y_ptr, z_ptr, out_ptr, N: tl.constexpr, FN: tl.constexpr, ARITY: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    if ARITY == 1:
        r = FN(x)
    elif ARITY == 2:
        r = FN(x, tl.load(y_ptr + offs))
    else:
        r = FN(x, tl.load(y_ptr + offs), tl.load(z_ptr + offs))
    tl.static_assert(r.dtype == out_ptr.dtype.element_ty, f"result is {r.dtype}")
    tl.store(out_ptr + offs, r)


def run(device, fn, out_dtype, *args):
    out = device.zeros(N, out_dtype)
    padded = list(args) + [args[0]] * (3 - len(args))
    call_kernel[(1,)](*[device.put(a) for a in padded], out, N=N, FN=fn, ARITY=len(args))
    return device.get(out)


def elementwise(fn, *args):
    return np.array([fn(*(v.item() for v in vs)) for vs in zip(*args)])


def _gamma(v):
    try:
        return math.gamma(v)
    except (ValueError, OverflowError):
        return math.nan


FLOAT_UNARY = {
    "acos": (math.acos, -1, 1), "atan": (math.atan, -4, 4), "sinh": (math.sinh, -4, 4), "cosh": (math.cosh, -4, 4),
    "tanh": (math.tanh, -4, 4), "asinh": (math.asinh, -4, 4), "acosh": (math.acosh, 1, 8),
    "atanh": (math.atanh, -0.9, 0.9), "exp10": (lambda v: 10.0**v, -3, 3), "expm1": (math.expm1, -1, 1),
    "log10": (math.log10, 0.1, 100), "log1p": (math.log1p, -0.5, 4), "cbrt": (lambda v: math.copysign(abs(v) ** (1 / 3), v), -8, 8),
    "erfc": (math.erfc, -2, 2), "lgamma": (math.lgamma, 0.5, 8), "tgamma": (_gamma, 0.5, 6),
    "trunc": (math.trunc, -8, 8), "round": (lambda v: math.copysign(math.floor(abs(v) + 0.5), v), -8, 8),
    "rint": (round, -8, 8), "sinpi": (lambda v: math.sin(math.pi * v), -2, 2), "tan": (math.tan, -1.2, 1.2),
}


@pytest.mark.parametrize("dtype", ["fp32", "fp64"])
@pytest.mark.parametrize("name", list(FLOAT_UNARY))
def test_float_functions(device, name, dtype):
    ref, low, high = FLOAT_UNARY[name]
    x = np.random.default_rng(1).uniform(low, high, N).astype(np.float32 if dtype == "fp32" else np.float64)
    if name in ("round", "rint"):
        x[:8] = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, -3.5]
    got = run(device, getattr(libdevice, name), dtype, x)
    np.testing.assert_allclose(got, elementwise(ref, x), rtol=4e-6 if dtype == "fp32" else 1e-13, atol=1e-6 if dtype == "fp32" else 1e-14)


FLOAT_BINARY = {
    "atan2": (math.atan2, (-4, 4), (-4, 4)), "hypot": (math.hypot, (-4, 4), (-4, 4)),
    "fmod": (math.fmod, (-10, 10), (0.5, 3)), "copysign": (math.copysign, (-4, 4), (-4, 4)),
    "pow": (math.pow, (0.1, 4), (-3, 3)), "remainder": (math.remainder, (-10, 10), (0.5, 3)),
}


@pytest.mark.parametrize("dtype", ["fp32", "fp64"])
@pytest.mark.parametrize("name", list(FLOAT_BINARY))
def test_float_binary_functions(device, name, dtype):
    ref, (lx, hx), (ly, hy) = FLOAT_BINARY[name]
    rng = np.random.default_rng(2)
    npt = np.float32 if dtype == "fp32" else np.float64
    x, y = rng.uniform(lx, hx, N).astype(npt), rng.uniform(ly, hy, N).astype(npt)
    got = run(device, getattr(libdevice, name), dtype, x, y)
    np.testing.assert_allclose(got, elementwise(ref, x, y), rtol=4e-6 if dtype == "fp32" else 1e-13, atol=1e-6 if dtype == "fp32" else 1e-14)


def test_mixed_signatures_and_promotion(device):
    x = np.random.default_rng(3).uniform(-4, 4, N).astype(np.float32)
    e = np.arange(N, dtype=np.int32) % 7 - 3
    np.testing.assert_array_equal(run(device, libdevice.ldexp, "fp32", x, e), elementwise(math.ldexp, x, e).astype(np.float32))
    np.testing.assert_allclose(run(device, libdevice.pow, "fp32", np.abs(x) + 0.5, e),
                               elementwise(lambda a, b: a**b, np.abs(x) + 0.5, e), rtol=4e-6)
    # fp32 with fp64 promotes to fp64, as in Triton
    y = x.astype(np.float64) / 3
    np.testing.assert_allclose(run(device, libdevice.atan2, "fp64", x, y), elementwise(math.atan2, x, y), rtol=1e-13)


def _bits32(v: int) -> int:
    return v & 0xFFFFFFFF


INT_FUNCTIONS = {
    "clz": (lambda v: 32 - _bits32(v).bit_length(), "int32"),
    "popc": (lambda v: bin(_bits32(v)).count("1"), "int32"),
    "brev": (lambda v: int(np.uint32(int(f"{_bits32(v):032b}"[::-1], 2)).view(np.int32)), "int32"),
    "ffs": (lambda v: (_bits32(v) & -_bits32(v)).bit_length(), "int32"),
}


@pytest.mark.parametrize("name", list(INT_FUNCTIONS))
def test_integer_functions(device, name):
    ref, out = INT_FUNCTIONS[name]
    x = np.random.default_rng(4).integers(-(2**31), 2**31, N, dtype=np.int64).astype(np.int32)
    x[:3] = [0, -1, 1]
    np.testing.assert_array_equal(run(device, getattr(libdevice, name), out, x), elementwise(ref, x))


def test_mulhi_and_byte_perm(device):
    rng = np.random.default_rng(5)
    x, y = (rng.integers(-(2**31), 2**31, N, dtype=np.int64).astype(np.int32) for _ in range(2))
    np.testing.assert_array_equal(run(device, libdevice.mulhi, "int32", x, y), elementwise(lambda a, b: (a * b) >> 32, x, y))
    s = rng.integers(0, 2**16, N).astype(np.int32)

    def perm(a, b, sel):
        pool = (_bits32(b) << 32) | _bits32(a)
        return int(np.uint32(sum(((pool >> (8 * ((sel >> (4 * k)) & 7))) & 0xFF) << (8 * k) for k in range(4))).view(np.int32))

    np.testing.assert_array_equal(run(device, libdevice.byte_perm, "int32", x, y, s), elementwise(perm, x, y, s))


def _f32(v: float) -> float:
    return struct.unpack("f", struct.pack("f", v))[0]


def test_conversions_and_classification(device):
    x = np.random.default_rng(6).uniform(-100, 100, N).astype(np.float32)
    x[:6] = [2.5, -2.5, 0.5, -0.0, np.nan, np.inf]
    for name, ref in (("float2int_rn", round), ("float2int_rz", math.trunc), ("float2int_rd", math.floor),
                      ("float2int_ru", math.ceil)):
        finite = np.isfinite(x)
        got = run(device, getattr(libdevice, name), "int32", x)
        np.testing.assert_array_equal(got[finite], elementwise(ref, x[finite]), err_msg=name)
    np.testing.assert_array_equal(run(device, libdevice.isnan, "int32", x), np.isnan(x).astype(np.int32))
    np.testing.assert_array_equal(run(device, libdevice.signbit, "int32", x) != 0, np.signbit(x))
    np.testing.assert_array_equal(run(device, libdevice.float_as_int, "int32", x), x.view(np.int32))
    d = x.astype(np.float64)
    np.testing.assert_array_equal(run(device, libdevice.double2hiint, "int32", d), (d.view(np.int64) >> 32).astype(np.int32))


def test_directed_rounding(device):
    rng = np.random.default_rng(7)
    x, y = rng.uniform(0.5, 4, N).astype(np.float32), rng.uniform(0.5, 4, N).astype(np.float32)
    exact = [a / b for a, b in zip(x.astype(float), y.astype(float))]
    down, up = run(device, libdevice.div_rd, "fp32", x, y), run(device, libdevice.div_ru, "fp32", x, y)
    for q, lo, hi in zip(exact, down, up):
        assert lo <= q <= hi and (lo == hi == _f32(q) or np.nextafter(lo, np.float32(np.inf)) == hi)


@despina.jit
def no_version_kernel(x_ptr):
    libdevice.asin(tl.load(x_ptr))


def test_a_signature_libdevice_lacks_is_an_error(device):
    with pytest.raises(despina.CompilationError, match=r"libdevice.asin has no version for \(fp16\); it takes \(fp32\); \(fp64\)"):
        no_version_kernel[(1,)](device.put(np.zeros(1, np.float16)))


def test_an_unknown_function_names_the_table():
    with pytest.raises(AttributeError, match="libdevice has no function 'asinn'"):
        libdevice.asinn  # noqa: B018


@despina.jit
def bessel_kernel(x_ptr, out_ptr):
    tl.store(out_ptr, libdevice.j0(tl.load(x_ptr)))


def test_the_interpreter_names_a_function_it_cannot_compute(monkeypatch):
    monkeypatch.setenv("DESPINA_INTERPRET", "1")
    with pytest.raises(despina.KernelRuntimeError, match=r"libdevice's __nv_j0f has no NumPy counterpart in the "
                                                          r"interpreter; run this kernel on the GPU"):
        bessel_kernel[(1,)](np.ones(1, np.float32), np.zeros(1, np.float32))
