"""NumPy references for the language tests: dtypes, bf16 rounding, C integer division, Philox."""

from __future__ import annotations

from typing import Any

import numpy as np

# Every element type a kernel argument can have, by its IR name.
DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "fp16", "bf16", "fp32", "fp64")
INT_DTYPES = DTYPES[:8]
SIGNED_DTYPES = DTYPES[:4]
FLOAT_DTYPES = DTYPES[8:]
NUMPY: dict[str, Any] = {
    "int1": np.bool_, "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
    "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
    "fp16": np.float16, "bf16": np.float32, "fp32": np.float32, "fp64": np.float64,
}


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def bf16_bits(x: Any) -> np.ndarray:
    """The bf16 bit patterns of float values, rounded to nearest even (NaN stays NaN)."""
    f = np.ascontiguousarray(x, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return np.where(np.isnan(f), 0x7FC0, rounded).astype(np.uint16)


def bf16_from_bits(bits: Any) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def bf16_round(x: Any) -> np.ndarray:
    """float values rounded to the nearest bf16, held as float32."""
    return bf16_from_bits(bf16_bits(x))


def as_dtype(x: Any, dtype: str) -> np.ndarray:
    """`x` as the NumPy array a kernel computing in `dtype` holds (bf16: rounded float32)."""
    if dtype == "bf16":
        return bf16_round(np.asarray(x, dtype=np.float32))
    return np.asarray(x).astype(NUMPY[dtype])


def sample(dtype: str, n: int, seed: int = 0, low: float | None = None, high: float | None = None,
           nonzero: bool = False) -> np.ndarray:
    """`n` values of `dtype` spread over its range (for ints) or over [low, high) (for floats)."""
    rng = np.random.default_rng(seed)
    if is_float(dtype):
        x = rng.uniform(-4.0 if low is None else low, 4.0 if high is None else high, n)
        if nonzero:
            x = np.where(np.abs(x) < 0.25, 0.5, x)
        return as_dtype(x, dtype)
    info = np.iinfo(NUMPY[dtype])
    lo = info.min if low is None else int(low)
    hi = info.max if high is None else int(high)
    x = rng.integers(lo, hi, n, dtype=NUMPY[dtype], endpoint=True)
    if nonzero:
        x[x == 0] = 1
    return x


def tolerance(dtype: str) -> dict[str, float]:
    """rtol/atol for comparing a kernel's float result of `dtype` with a float64 reference."""
    return {"fp16": {"rtol": 2e-3, "atol": 2e-3}, "bf16": {"rtol": 1.6e-2, "atol": 1e-2},
            "fp32": {"rtol": 1e-5, "atol": 1e-6}, "fp64": {"rtol": 1e-12, "atol": 1e-12}}.get(dtype, {"rtol": 0, "atol": 0})


def c_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncating toward zero, in the operands' dtype (wrapping like C)."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    q = [(abs(x) // abs(y)) * (-1 if (x < 0) != (y < 0) else 1) for x, y in zip(_ints(a), _ints(b))]
    return wrap(np.array(q, dtype=object).reshape(a.shape), a.dtype)


def c_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The remainder of `c_div`: it takes the sign of the dividend."""
    return wrap(a.astype(object) - c_div(a, b).astype(object) * b.astype(object), a.dtype)


def wrap(x: Any, dtype: Any) -> np.ndarray:
    """Python integers wrapped into the integer `dtype` (two's complement)."""
    dtype = np.dtype(dtype)
    bits = dtype.itemsize * 8
    lo = -(1 << (bits - 1)) if dtype.kind == "i" else 0
    # Element by element on Python ints: NumPy ops on 0-d object arrays return bare Python ints,
    # which np.where and friends then squeeze into int64 (and overflow).
    x = np.asarray(x, dtype=object)
    return np.array([(v - lo) % (1 << bits) + lo for v in _ints(x)], dtype=dtype).reshape(x.shape)


def _ints(x: np.ndarray) -> list[int]:
    """The elements of `x` as Python ints, in row-major order."""
    return [int(v) for v in np.asarray(x, dtype=object).ravel()]


# (key A, key B, round A, round B) of Philox 4x32 and 4x64.
PHILOX_CONSTANTS = {
    32: (0x9E3779B9, 0xBB67AE85, 0xD2511F53, 0xCD9E8D57),
    64: (0x9E3779B97F4A7C15, 0xBB67AE8584CAA73B, 0xD2E7470EE14C6C93, 0xCA5A826395121157),
}


def philox(seed: int, c0: Any, c1: Any = 0, c2: Any = 0, c3: Any = 0, n_rounds: int = 10, bits: int = 32
           ) -> tuple[np.ndarray, ...]:
    """Philox 4x32 or 4x64 (Salmon et al. 2011) with the round structure and keying of Triton's
    `tl.philox`: a 32-bit generator takes the seed's low and high words as its key, a 64-bit one
    the whole seed and zero. Computed with Python integers."""
    mask = (1 << bits) - 1
    shape = np.shape(c0)
    c = [np.broadcast_to(np.asarray(v, dtype=object), shape).copy() for v in (c0, c1, c2, c3)]
    c = [np.vectorize(lambda x: int(x) & mask, otypes=[object])(v) for v in c]
    seed &= (1 << 64) - 1
    k0, k1 = (seed & mask, seed >> 32) if bits == 32 else (seed, 0)
    key_a, key_b, round_a, round_b = PHILOX_CONSTANTS[bits]
    for _ in range(n_rounds):
        prod_b, prod_a = c[2] * round_b, c[0] * round_a
        c = [(prod_b >> bits) ^ c[1] ^ k0, prod_b & mask, (prod_a >> bits) ^ c[3] ^ k1, prod_a & mask]
        k0, k1 = (k0 + key_a) & mask, (k1 + key_b) & mask
    return tuple(np.asarray(x, dtype=object).astype(np.uint64 if bits == 64 else np.uint32) for x in c)


def uint_to_uniform(x: np.ndarray) -> np.ndarray:
    """Triton's map from random uint32 (or uint64) bits to float32 in [0, 1)."""
    wide = x.dtype.itemsize == 8
    s = x.view(np.int64 if wide else np.int32).astype(np.int64)
    s = np.where(s < 0, -(s + 1), s)
    scale = np.float32(1.0842020432385337e-19 if wide else 4.6566127342e-10)
    return (s.astype(np.float32) * scale).astype(np.float32)
