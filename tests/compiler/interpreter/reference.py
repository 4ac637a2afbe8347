"""Independent NumPy references: bf16 rounding, wrapping integer arithmetic, storage forms."""

from __future__ import annotations

from typing import Any

import numpy as np

INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
FLOATS = ("fp16", "bf16", "fp32", "fp64")
NUMPY: dict[str, Any] = {
    "int1": np.bool_,
    "int8": np.int8,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "uint8": np.uint8,
    "uint16": np.uint16,
    "uint32": np.uint32,
    "uint64": np.uint64,
    "fp16": np.float16,
    "bf16": np.float32,
    "fp32": np.float32,
    "fp64": np.float64,
}


def bf16(x: Any) -> np.ndarray:
    """float values rounded to the nearest bf16 (ties to even), as float32."""
    f = np.ascontiguousarray(x, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint32) << 16
    return np.where(np.isnan(f), f, rounded.astype(np.uint32).view(np.float32))


def to_memory(x: np.ndarray, dtype: str) -> np.ndarray:
    """The array a kernel argument of element type `dtype` is passed as (bf16: its bits)."""
    if dtype == "bf16":
        return (bf16(x).view(np.uint32) >> 16).astype(np.uint16)
    return np.ascontiguousarray(x, dtype=NUMPY[dtype])


def from_memory(x: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bf16":
        return (x.astype(np.uint32) << 16).view(np.float32)
    return x


def wrap(x: Any, dtype: str) -> np.ndarray:
    """Python integers reduced to `dtype`'s width, two's complement."""
    info = np.iinfo(NUMPY[dtype])
    span = 1 << info.bits
    out = [((int(v) - info.min) % span) + info.min for v in np.asarray(x, dtype=object).ravel()]
    return np.array(out, dtype=object).astype(NUMPY[dtype]).reshape(np.shape(x))


def sample(dtype: str, n: int, seed: int = 0, nonzero: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype in FLOATS:
        x = rng.uniform(-8, 8, n)
        if nonzero:
            x = np.where(np.abs(x) < 0.25, 0.5, x)
        return bf16(x) if dtype == "bf16" else x.astype(NUMPY[dtype])
    info = np.iinfo(NUMPY[dtype])
    x = rng.integers(info.min, info.max, n, dtype=NUMPY[dtype], endpoint=True)
    # Make sure the extremes, where wrap-around and sign handling show, are among the values.
    x[:4] = [info.min, info.max, 0, info.max // 3 + 1]
    if nonzero:
        x[x == 0] = 1
    return x
