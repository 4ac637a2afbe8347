"""The folder against NumPy, value by value: it must compute exactly what the GPU computes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from passes_util import kernel

from despina.compiler.ir.core import Op
from despina.compiler.ir.types import ScalarType, Type
from despina.compiler.passes.fold import fold

RNG = np.random.default_rng(1234)
N = 1500


def folded(name: str, args: list[Any], ty: Type, **attrs: Any) -> Any:
    """The value `fold` gives `name(args)` on constants of type `ty`, or None if it leaves the op."""
    m, b, _ = kernel()
    b.value(name, [b.constant(a, ty) for a in args], **attrs)
    b.create("return")
    fold(m)
    op: Op = m.kernel.body.ops[-2]
    return op.attrs["value"] if op.name == "constant" else None


def ints(dtype: Any, n: int = N) -> np.ndarray:
    info = np.iinfo(dtype)
    edges = np.array([info.min, info.min + 1, -1 if info.min < 0 else 1, 0, 1, 2, info.max - 1, info.max], dtype=dtype)
    return np.concatenate([edges, RNG.integers(info.min, info.max, n, dtype=dtype, endpoint=True)])


def floats(dtype: Any, n: int = N) -> np.ndarray:
    """Random bit patterns: normals, subnormals, zeros of both signs, infinities and NaNs."""
    bits = np.dtype(dtype).itemsize * 8
    return RNG.integers(0, 2**bits, n, dtype=f"uint{bits}").view(dtype)


def pairs(xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return xs, RNG.permutation(xs)


def bits_of(x: float, dtype: Any) -> int:
    return int(np.array(x, dtype=dtype).view(f"uint{np.dtype(dtype).itemsize * 8}"))


@pytest.mark.parametrize("name, np_op", [("add", np.add), ("sub", np.subtract), ("mul", np.multiply)])
def test_int8_arithmetic_wraps(name: str, np_op: Any) -> None:
    a, b = pairs(ints(np.int8))
    expected = np_op(a, b)
    for x, y, e in zip(a.tolist(), b.tolist(), expected.tolist()):
        assert folded(name, [x, y], ScalarType("int8")) == e, (name, x, y)


def test_uint32_floordiv_and_rem() -> None:
    a, b = pairs(ints(np.uint32))
    b = np.where(RNG.random(b.size) < 0.3, RNG.integers(1, 100, b.size), b).astype(np.uint32)
    u32 = ScalarType("uint32")
    for x, y in zip(a.tolist(), b.tolist()):
        if y == 0:
            assert folded("floordiv", [x, y], u32) is None
            continue
        assert folded("floordiv", [x, y], u32) == x // y
        assert folded("rem", [x, y], u32) == x % y


def test_int32_division_truncates_like_c() -> None:
    a, b = pairs(ints(np.int32))
    b = np.where(RNG.random(b.size) < 0.5, RNG.integers(-50, 50, b.size), b).astype(np.int32)
    i32 = ScalarType("int32")
    for x, y in zip(a.tolist(), b.tolist()):
        if y == 0 or (x == -(2**31) and y == -1):
            assert folded("floordiv", [x, y], i32) is None and folded("rem", [x, y], i32) is None
            continue
        rem = int(np.fmod(np.int64(x), np.int64(y)))
        assert folded("rem", [x, y], i32) == rem, (x, y)
        assert folded("floordiv", [x, y], i32) == (x - rem) // y, (x, y)
    assert folded("rem", [-7, 2], i32) == -1 and folded("floordiv", [-7, 2], i32) == -3


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int8, np.uint64])
def test_shifts_and_bitwise(dtype: Any) -> None:
    ty = ScalarType(np.dtype(dtype).name)
    width = np.dtype(dtype).itemsize * 8
    a, c = pairs(ints(dtype, 300))
    for x, y in zip(a.tolist(), c.tolist()):
        s = y % width
        assert folded("shr", [x, s], ty) == int(dtype(x) >> dtype(s)), (x, s)
        assert folded("shl", [x, s], ty) == int(dtype(x) << dtype(s)), (x, s)
        assert folded("and", [x, y], ty) == int(dtype(x) & dtype(y))
        assert folded("or", [x, y], ty) == int(dtype(x) | dtype(y))
        assert folded("xor", [x, y], ty) == int(dtype(x) ^ dtype(y))
        assert folded("not", [x], ty) == int(~dtype(x))
    assert folded("shl", [1, width], ty) is None
    if ty.is_int_signed():
        assert folded("shr", [1, -1], ty) is None


@pytest.mark.parametrize("signed, unsigned", [(np.int16, np.uint16), (np.int64, np.uint64)])
def test_compare_and_minmax_respect_signedness(signed: Any, unsigned: Any) -> None:
    for dtype in (signed, unsigned):
        ty = ScalarType(np.dtype(dtype).name)
        a, b = pairs(ints(dtype, 300))
        for x, y in zip(a.tolist(), b.tolist()):
            assert folded("cmp", [x, y], ty, pred="lt") is (x < y)
            assert folded("cmp", [x, y], ty, pred="ge") is (x >= y)
            assert folded("maximum", [x, y], ty) == max(x, y)
            assert folded("minimum", [x, y], ty) == min(x, y)
    assert folded("cmp", [-1, 1], ScalarType(np.dtype(signed).name), pred="lt") is True
    assert (
        folded("cmp", [2 ** (np.dtype(unsigned).itemsize * 8) - 1, 1], ScalarType(np.dtype(unsigned).name), pred="lt")
        is False
    )


def test_neg_abs_wrap_at_int_min() -> None:
    i8 = ScalarType("int8")
    for x in range(-128, 128):
        assert folded("neg", [x], i8) == int(np.array(x, np.int8) * np.int8(-1))
        assert folded("abs", [x], i8) == int(np.abs(np.array(x, np.int8)))
    assert folded("neg", [1], ScalarType("uint8")) == 255


def test_umulhi() -> None:
    u32 = ScalarType("uint32")
    a, b = pairs(ints(np.uint32, 500))
    for x, y in zip(a.tolist(), b.tolist()):
        assert folded("umulhi", [x, y], u32) == int((np.uint64(x) * np.uint64(y)) >> np.uint64(32))
    assert folded("umulhi", [-1, 3], ScalarType("int32")) is None


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize(
    "name, np_op", [("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div_rn", np.divide)]
)
def test_float_arithmetic_rounds_like_ieee(dtype: Any, name: str, np_op: Any) -> None:
    ty = ScalarType({np.float16: "fp16", np.float32: "fp32", np.float64: "fp64"}[dtype])
    a, b = pairs(floats(dtype, 800))
    with np.errstate(all="ignore"):
        expected = np_op(a, b)
    for x, y, e in zip(a.tolist(), b.tolist(), expected):
        got = folded(name, [x, y], ty)
        if np.isnan(e):
            assert got is None, (x, y)
        else:
            assert bits_of(got, dtype) == bits_of(e, dtype), (name, x, y, got, e)


def test_fp16_add_rounds_to_nearest_even() -> None:
    h = ScalarType("fp16")
    assert folded("add", [2048.0, 1.0], h) == 2048.0  # tie: 2049 -> even 2048
    assert folded("add", [2050.0, 1.0], h) == 2052.0  # tie: 2051 -> even 2052
    assert folded("add", [65504.0, 32.0], h) == float("inf")
    assert folded("add", [65504.0, 15.0], h) == 65504.0


def _bf16_round(x: np.ndarray) -> np.ndarray:
    """fp32 -> bf16 to nearest even, by the usual bit trick (NaN stays NaN)."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + np.uint64(0x7FFF) + ((bits >> np.uint64(16)) & np.uint64(1))) & np.uint64(0xFFFF0000)
    return np.where(np.isnan(x), np.float32("nan"), rounded.astype(np.uint32).view(np.float32))


def test_bf16_add_is_fp32_add_rounded_to_nearest_even() -> None:
    bf = ScalarType("bf16")
    a, b = pairs(_bf16_round(floats(np.float32, 800)))
    with np.errstate(all="ignore"):
        expected = _bf16_round(a + b)
    for x, y, e in zip(a.tolist(), b.tolist(), expected):
        got = folded("add", [x, y], bf)
        assert got is None if np.isnan(e) else bits_of(got, np.float32) == bits_of(e, np.float32), (x, y, got, e)


def test_casts_between_ints() -> None:
    for src, dst in [
        (np.int32, np.int8),
        (np.int8, np.uint32),
        (np.uint8, np.int32),
        (np.uint64, np.int16),
        (np.int64, np.uint64),
    ]:
        s, d = ScalarType(np.dtype(src).name), ScalarType(np.dtype(dst).name)
        xs = ints(src, 300)
        for x, e in zip(xs.tolist(), xs.astype(dst).tolist()):
            assert folded("cast", [x], s, to=d) == e, (src, dst, x)
    assert folded("cast", [True], ScalarType("int1"), to=ScalarType("int32")) == 1


@pytest.mark.parametrize("src", [np.int32, np.int64, np.uint64])
def test_int_to_float_rounds_once(src: Any) -> None:
    s = ScalarType(np.dtype(src).name)
    xs = ints(src, 800)
    for dst, name in [(np.float32, "fp32"), (np.float16, "fp16"), (np.float64, "fp64")]:
        with np.errstate(all="ignore"):
            expected = xs.astype(dst)
        for x, e in zip(xs.tolist(), expected):
            assert bits_of(folded("cast", [x], s, to=ScalarType(name)), dst) == bits_of(e, dst), (x, name)
    # 2**60 + 2**36 + 1 is just above a tie at fp32: one rounding goes up, rounding through fp64 goes to even.
    assert folded("cast", [2**60 + 2**36 + 1], ScalarType("int64"), to=ScalarType("fp32")) == float(2**60 + 2**37)


def test_float_to_float_casts() -> None:
    xs = floats(np.float32)
    with np.errstate(all="ignore"):
        halves, doubles = xs.astype(np.float16), xs.astype(np.float64)
    for x, h, d in zip(xs.tolist(), halves, doubles):
        got = folded("cast", [x], ScalarType("fp32"), to=ScalarType("fp16"))
        assert got is None if np.isnan(h) else bits_of(got, np.float16) == bits_of(h, np.float16)
        got = folded("cast", [x], ScalarType("fp32"), to=ScalarType("fp64"))
        assert got is None if np.isnan(d) else got == d and bits_of(got, np.float64) == bits_of(d, np.float64)
    for x, e in zip(xs.tolist(), _bf16_round(xs)):
        got = folded("cast", [x], ScalarType("fp32"), to=ScalarType("bf16"))
        assert got is None if np.isnan(e) else bits_of(got, np.float32) == bits_of(e, np.float32)


def test_float_to_int_truncates_in_range_only() -> None:
    xs = floats(np.float32, 3000)
    xs = np.concatenate(
        [xs, RNG.uniform(-3e9, 3e9, 1000).astype(np.float32), np.array([-0.5, 0.5, -1.5, 2.5], np.float32)]
    )
    i32, u8 = ScalarType("int32"), ScalarType("uint8")
    for x in xs.tolist():
        t = int(x) if np.isfinite(x) else None
        got = folded("cast", [x], ScalarType("fp32"), to=i32)
        assert got == (t if t is not None and -(2**31) <= t < 2**31 else None), x
        got = folded("cast", [x], ScalarType("fp32"), to=u8)
        assert got == (t if t is not None and 0 <= t < 256 else None), x


def test_bitcasts() -> None:
    xs = ints(np.int32)
    views = xs.view(np.float32)
    for x, f in zip(xs.tolist(), views):
        got = folded("bitcast", [x], ScalarType("int32"), to=ScalarType("fp32"))
        assert got is None if np.isnan(f) else bits_of(got, np.float32) == bits_of(f, np.float32)
        if not np.isnan(f):
            assert folded("bitcast", [float(f)], ScalarType("fp32"), to=ScalarType("int32")) == x
    assert folded("bitcast", [1.0], ScalarType("fp16"), to=ScalarType("uint16")) == 0x3C00
    assert folded("bitcast", [1.0], ScalarType("bf16"), to=ScalarType("int16")) == 0x3F80


def test_float_compare_and_minmax() -> None:
    a, b = pairs(floats(np.float32))
    f32 = ScalarType("fp32")
    for x, y in zip(a.tolist(), b.tolist()):
        nan = np.isnan(x) or np.isnan(y)
        assert folded("cmp", [x, y], f32, pred="le") == (None if nan else x <= y)
        assert folded("cmp", [x, y], f32, pred="ne") == (None if nan else x != y)
        if not nan and x != y:
            assert folded("maximum", [x, y], f32) == max(x, y)
    assert folded("maximum", [0.0, -0.0], f32) is None
    assert folded("minimum", [float("nan"), 1.0], f32) is None


@pytest.mark.parametrize(
    "name, args, ty, attrs",
    [
        ("exp", [1.0], "fp32", {}),
        ("sqrt", [4.0], "fp32", {}),
        ("sin", [0.0], "fp32", {}),
        ("div", [1.0, 3.0], "fp32", {}),
        ("fdiv", [1.0, 3.0], "fp32", {"ieee_rounding": False}),
        ("rem", [5.5, 2.0], "fp32", {}),
        ("fma", [1.0, 2.0, 3.0], "fp32", {}),
        ("pow", [2.0, 2.0], "fp32", {}),
        ("cast", [0.1], "fp32", {"to": ScalarType("fp16"), "rounding": "rtz"}),
        ("cast", [3], "int32", {"to": ScalarType("int1")}),
        ("cast", [0.0], "fp32", {"to": ScalarType("int1")}),
        ("sub", [float("inf"), float("inf")], "fp32", {}),
        ("cmp", [True, False], "int1", {"pred": "lt"}),
        ("maximum", [True, False], "int1", {}),
    ],
)
def test_left_to_the_gpu(name: str, args: list[Any], ty: str, attrs: dict[str, Any]) -> None:
    assert folded(name, args, ScalarType(ty), **attrs) is None


def test_exact_ops_that_are_folded() -> None:
    f32 = ScalarType("fp32")
    assert folded("fdiv", [1.0, 3.0], f32, ieee_rounding=True) == float(np.float32(1.0) / np.float32(3.0))
    assert folded("floor", [-1.5], f32) == -2.0 and folded("ceil", [-1.5], f32) == -1.0
    assert str(folded("neg", [0.0], f32)) == "-0.0"
    assert folded("cast", [0.5], f32, to=ScalarType("fp16"), rounding="rtz") == 0.5
    assert folded("xor", [True, True], ScalarType("int1")) is False
    assert folded("cmp", [True, True], ScalarType("int1"), pred="eq") is True


def test_constant_values_are_read_in_their_type() -> None:
    # A value outside the type's range is the value the GPU holds after truncation.
    assert folded("add", [300, 0], ScalarType("int8")) == 44
    assert folded("add", [0.1, 0.0], ScalarType("fp32")) == float(np.float32(0.1))
