"""`cast` and `bitcast`: PTX conversion semantics for every pair of element types."""

from __future__ import annotations

import math

import numpy as np
import pytest

from .elementwise_kernel import apply
from .reference import FLOATS, INTS, NUMPY, bf16, sample, to_memory, wrap

# The references convert out-of-range values on purpose.
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")

SPECIAL = [
    math.nan,
    math.inf,
    -math.inf,
    1e30,
    -1e30,
    3e9,
    -3e9,
    70000.0,
    -70000.0,
    2.75,
    -2.75,
    0.5,
    -0.5,
    0.0,
    255.5,
    127.9,
]


def _saturated(x: float, dtype: str) -> int:
    info = np.iinfo(NUMPY[dtype])
    if math.isnan(x):
        return 0
    if math.isinf(x):
        return info.max if x > 0 else info.min
    return min(max(math.trunc(x), info.min), info.max)


@pytest.mark.parametrize("src", FLOATS)
@pytest.mark.parametrize("dst", INTS)
def test_float_to_int_truncates_and_saturates(src: str, dst: str) -> None:
    x = np.array(SPECIAL, dtype=np.float64)
    x = bf16(x) if src == "bf16" else x.astype(NUMPY[src])
    expected = np.array([_saturated(float(v), dst) for v in x], dtype=object).astype(NUMPY[dst])
    np.testing.assert_array_equal(apply("cast", [src], dst, [x], programs=2, to=dst), expected)


@pytest.mark.parametrize("src", INTS)
@pytest.mark.parametrize("dst", INTS)
def test_int_to_int_wraps_and_extends_by_source_sign(src: str, dst: str) -> None:
    x = sample(src, 32, 1)
    np.testing.assert_array_equal(apply("cast", [src], dst, [x], to=dst), wrap([int(v) for v in x], dst))


@pytest.mark.parametrize("src", INTS)
@pytest.mark.parametrize("dst", FLOATS)
def test_int_to_float_rounds_to_nearest(src: str, dst: str) -> None:
    x = sample(src, 32, 2)
    if dst == "fp16":
        x = x // (1 << max(np.iinfo(x.dtype).bits - 16, 0))
    exact = np.array([int(v) for v in x], dtype=object)
    # longdouble holds every 64-bit integer exactly: one rounding to the target.
    expected = (
        bf16(exact.astype(np.longdouble).astype(np.float64))
        if dst == "bf16"
        else exact.astype(np.longdouble).astype(NUMPY[dst])
    )
    np.testing.assert_array_equal(apply("cast", [src], dst, [x], to=dst), expected)


@pytest.mark.parametrize(
    "src, dst",
    [
        ("fp64", "fp32"),
        ("fp64", "fp16"),
        ("fp64", "bf16"),
        ("fp32", "fp16"),
        ("fp32", "bf16"),
        ("fp16", "bf16"),
        ("bf16", "fp16"),
        ("fp16", "fp32"),
        ("bf16", "fp64"),
    ],
)
def test_float_conversions_round_to_nearest_even(src: str, dst: str) -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(0, 100, 64)
    x[:6] = [math.nan, math.inf, -math.inf, 1e6, -0.0, 1 + 2.0**-11]
    x = bf16(x) if src == "bf16" else x.astype(NUMPY[src])
    expected = bf16(x.astype(np.float64)) if dst == "bf16" else x.astype(NUMPY[dst])
    got = apply("cast", [src], dst, [x], to=dst)
    np.testing.assert_array_equal(got, expected)


def test_bf16_from_fp64_is_rounded_once() -> None:
    # Halfway between two bf16 values once rounded to fp32, just above halfway in fp64.
    x = np.array([1 + 2.0**-8 + 2.0**-30] * 4)
    np.testing.assert_array_equal(apply("cast", ["fp64"], "bf16", [x], to="bf16"), [1 + 2.0**-7] * 4)


@pytest.mark.parametrize("dst", ["fp16", "bf16"])
def test_round_toward_zero(dst: str) -> None:
    x = np.array([1 + 2.0**-9 * 1.9, -(1 + 2.0**-9 * 1.9), 1e10, -1e10, 0.1, math.nan, 3.0, -0.0], dtype=np.float32)
    got = apply("cast", ["fp32"], dst, [x], programs=1, to=dst, rounding="rtz")
    nearest = bf16(x) if dst == "bf16" else x.astype(np.float16).astype(np.float32)
    largest = float(np.finfo(np.float16).max) if dst == "fp16" else float(bf16(np.array([3.3895e38]))[0])
    for g, v, r in zip(got.astype(np.float64), x.astype(np.float64), nearest.astype(np.float64)):
        if math.isnan(v):
            assert math.isnan(g)
        elif abs(v) > largest:
            assert g == math.copysign(largest, v)
        else:
            assert abs(g) <= abs(v) and (g == r or abs(r) > abs(v))


@pytest.mark.parametrize("dtype", ["int8", "uint32", "int64", "fp32", "bf16"])
def test_casts_to_and_from_int1(dtype: str) -> None:
    x = sample(dtype, 16, 4)
    x[:3] = 0
    np.testing.assert_array_equal(apply("cast", [dtype], "int1", [x], to="int1"), x != 0)
    flags = np.arange(16) % 3 == 0
    expected = flags.astype(NUMPY[dtype])
    np.testing.assert_array_equal(apply("cast", ["int1"], dtype, [flags], to=dtype), expected)


@pytest.mark.parametrize(
    "src, dst",
    [
        ("fp32", "int32"),
        ("int32", "fp32"),
        ("fp16", "uint16"),
        ("bf16", "int16"),
        ("int16", "bf16"),
        ("fp64", "uint64"),
        ("uint8", "int8"),
        ("bf16", "fp16"),
    ],
)
def test_bitcast_keeps_the_bits(src: str, dst: str) -> None:
    x = sample(src, 16, 5)
    if dst in FLOATS and src in INTS:
        x = x & np.array(0x3FFF if src != "int32" else 0x3FFFFFFF, dtype=x.dtype)  # no NaN patterns
    got = apply("bitcast", [src], dst, [x], to=dst)
    np.testing.assert_array_equal(to_memory(got, dst).view(np.uint8), to_memory(x, src).view(np.uint8))
