"""`reduce` and `scan` with combine regions (fast ufunc forms and general ones), and `dot`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from despina.compiler.ir.types import ScalarType, TileType

from .kernel import K, ptr
from .reference import FLOATS, INTS, NUMPY, bf16, from_memory, sample, to_memory, wrap


def _tile_kernel(
    name: str,
    shape: tuple[int, ...],
    dtypes: list[str],
    out_dtypes: list[str],
    body: Callable[..., list[Any]],
    k: K | None = None,
) -> K:
    """A kernel in which program p loads tile p of each input (C order), applies `body` and
    stores each result as tile p of each output."""
    params = {f"in{i}": ptr(d) for i, d in enumerate(dtypes)} | {f"out{i}": ptr(d) for i, d in enumerate(out_dtypes)}
    k = K(name, **params)
    size = int(np.prod(shape))
    lin = k.op("reshape", k.offsets(size), shape=list(shape))
    results = body(k, *[k.op("load", k.at(k.arg[f"in{i}"], lin)) for i in range(len(dtypes))])
    for i, r in enumerate(results):
        rshape = r.type.shape if isinstance(r.type, TileType) else ()
        n = int(np.prod(rshape))
        offs = k.offsets(n) if rshape else k.pid()
        if rshape:
            offs = k.op("reshape", offs, shape=list(rshape))
        k.void("store", k.at(k.arg[f"out{i}"], offs), r)
    return k


def _run(
    k: K,
    programs: int,
    inputs: list[np.ndarray],
    dtypes: list[str],
    out_shapes: list[tuple[int, ...]],
    out_dtypes: list[str],
) -> list[np.ndarray]:
    outs = [np.zeros((programs,) + s, dtype=to_memory(np.zeros(1), d).dtype) for s, d in zip(out_shapes, out_dtypes)]
    k.run(programs, *[to_memory(x, d) for x, d in zip(inputs, dtypes)], *outs)
    return [from_memory(o, d) for o, d in zip(outs, out_dtypes)]


def _binary(name: str, **attrs: Any) -> Callable[..., list[Any]]:
    return lambda k: lambda a, b: [k.op(name, a, b, **attrs)]


@pytest.mark.parametrize("dtype", INTS + FLOATS)
@pytest.mark.parametrize("axis", [0, 1])
def test_sum_reduce_along_each_axis(dtype: str, axis: int) -> None:
    shape = (4, 6)
    x = sample(dtype, 3 * 24, 1).reshape(3, 4, 6)
    if dtype in FLOATS:
        x = x.round() if dtype != "bf16" else bf16(x.round())
    k = _tile_kernel(
        "sum", shape, [dtype], [dtype], lambda k, a: k.combine("reduce", [a], _binary("add")(k), axis=axis)
    )
    (got,) = _run(k, 3, [x], [dtype], [shape[:axis] + shape[axis + 1 :]], [dtype])
    if dtype in INTS:
        expected = wrap(x.astype(object).sum(axis=axis + 1), dtype)
    else:
        expected = x.astype(np.float64).sum(axis=axis + 1)  # small integers: exact in every float type
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", ["int8", "uint32", "fp16", "bf16", "fp64"])
@pytest.mark.parametrize("op, fn", [("maximum", np.max), ("minimum", np.min)])
def test_max_min_reduce_to_scalars(dtype: str, op: str, fn: Callable[..., Any]) -> None:
    x = sample(dtype, 5 * 33, 2).reshape(5, 33)
    k = _tile_kernel("extreme", (33,), [dtype], [dtype], lambda k, a: k.combine("reduce", [a], _binary(op)(k), axis=0))
    (got,) = _run(k, 5, [x], [dtype], [()], [dtype])
    np.testing.assert_array_equal(got, fn(x, axis=1))


def _argmax_combine(k: K) -> Callable[..., list[Any]]:
    def combine(v1, i1, v2, i2):
        better = k.op(
            "or",
            k.op("cmp", v1, v2, pred="gt"),
            k.op("and", k.op("cmp", v1, v2, pred="eq"), k.op("cmp", i1, i2, pred="lt")),
        )
        return [k.op("select", better, v1, v2), k.op("select", better, i1, i2)]

    return combine


@pytest.mark.parametrize("n", [16, 13, 1])
def test_two_operand_reduce_argmax(n: int) -> None:
    x = np.random.default_rng(3).integers(0, 5, (4, n)).astype(np.float32)

    def body(k: K, a):
        return k.combine("reduce", [a, k.arange(n)], _argmax_combine(k), axis=0)

    k = _tile_kernel("argmax", (n,), ["fp32"], ["fp32", "int32"], body)
    best, where = _run(k, 4, [x], ["fp32"], [(), ()], ["fp32", "int32"])
    np.testing.assert_array_equal(best, x.max(axis=1))
    np.testing.assert_array_equal(where, x.argmax(axis=1))


def test_non_commutative_reduce_keeps_order() -> None:
    # Composition of affine maps (a, b) . (c, d) = (a * c, b * c + d): associative, not commutative.
    n = 11
    rng = np.random.default_rng(4)
    a, b = rng.integers(-3, 4, (2, n)).astype(np.int64), rng.integers(-3, 4, (2, n)).astype(np.int64)

    def body(k: K, x, y):
        return k.combine(
            "reduce", [x, y], lambda a1, b1, a2, b2: [k.op("mul", a1, a2), k.op("add", k.op("mul", b1, a2), b2)], axis=0
        )

    k = _tile_kernel("compose", (n,), ["int64", "int64"], ["int64", "int64"], body)
    ga, gb = _run(k, 2, [a, b], ["int64", "int64"], [(), ()], ["int64", "int64"])
    for p in range(2):
        ea, eb = 1, 0
        for i in range(n):
            ea, eb = ea * a[p, i], eb * a[p, i] + b[p, i]
        assert (ga[p], gb[p]) == (ea, eb)


def test_bf16_reduce_rounds_every_step() -> None:
    x = np.full((1, 4), 1.0, np.float32)
    x[0, 1:] = 2.0**-8  # ((1 + 2**-8) + 2**-8) + 2**-8 in bf16: every partial sum rounds
    k = _tile_kernel("bsum", (4,), ["bf16"], ["bf16"], lambda k, a: k.combine("reduce", [a], _binary("add")(k), axis=0))
    (got,) = _run(k, 1, [x], ["bf16"], [()], ["bf16"])
    # Pairs (1 + 2**-8) -> 1 and (2**-8 + 2**-8) = 2**-7, then 1 + 2**-7.
    assert got[0] == 1 + 2.0**-7


@pytest.mark.parametrize("dtype", ["int32", "uint8", "fp32", "fp64"])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
def test_cumsum(dtype: str, reverse: bool, axis: int) -> None:
    x = (sample(dtype, 2 * 24, 5) % 16).reshape(2, 4, 6).astype(NUMPY[dtype])
    k = _tile_kernel(
        "cumsum",
        (4, 6),
        [dtype],
        [dtype],
        lambda k, a: k.combine("scan", [a], _binary("add")(k), axis=axis, reverse=reverse),
    )
    (got,) = _run(k, 2, [x], [dtype], [(4, 6)], [dtype])
    flip = (lambda v: np.flip(v, axis + 1)) if reverse else (lambda v: v)
    np.testing.assert_array_equal(got, flip(np.cumsum(flip(x), axis=axis + 1, dtype=NUMPY[dtype])))


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("n", [8, 7])
def test_general_scan_matches_a_serial_one(reverse: bool, n: int) -> None:
    rng = np.random.default_rng(6)
    a, b = rng.integers(-2, 3, (3, n)).astype(np.int32), rng.integers(-5, 6, (3, n)).astype(np.int32)

    def body(k: K, x, y):
        return k.combine(
            "scan",
            [x, y],
            lambda a1, b1, a2, b2: [k.op("mul", a1, a2), k.op("add", k.op("mul", b1, a2), b2)],
            axis=0,
            reverse=reverse,
        )

    k = _tile_kernel("affine_scan", (n,), ["int32", "int32"], ["int32", "int32"], body)
    ga, gb = _run(k, 3, [a, b], ["int32", "int32"], [(n,), (n,)], ["int32", "int32"])
    for p in range(3):
        order = range(n - 1, -1, -1) if reverse else range(n)
        acc = None
        for i in order:
            acc = (a[p, i], b[p, i]) if acc is None else (acc[0] * a[p, i], acc[1] * a[p, i] + b[p, i])
            assert (ga[p, i], gb[p, i]) == acc


@pytest.mark.parametrize(
    "dtype, acc",
    [("fp16", "fp32"), ("bf16", "fp32"), ("fp32", "fp32"), ("fp64", "fp64"), ("int8", "int32"), ("fp16", "fp16")],
)
def test_dot(dtype: str, acc: str) -> None:
    m, kk, n = 16, 32, 8
    rng = np.random.default_rng(7)
    a = (
        sample(dtype, 2 * m * kk, 8).reshape(2, m, kk)
        if dtype != "int8"
        else rng.integers(-128, 128, (2, m, kk)).astype(np.int8)
    )
    b = (
        sample(dtype, 2 * kk * n, 9).reshape(2, kk, n)
        if dtype != "int8"
        else rng.integers(-128, 128, (2, kk, n)).astype(np.int8)
    )
    c = sample(acc, 2 * m * n, 10).reshape(2, m, n)
    if dtype == "int8":
        c = c // 1024
    attrs = {"input_precision": "ieee"} if dtype == "fp32" else {}
    k = K("mm", a=ptr(dtype), b=ptr(dtype), c=ptr(acc), out=ptr(acc))
    ta = k.op("reshape", k.offsets(m * kk), shape=[m, kk])
    tb = k.op("reshape", k.offsets(kk * n), shape=[kk, n])
    tc = k.op("reshape", k.offsets(m * n), shape=[m, n])
    r = k.op(
        "dot",
        k.op("load", k.at(k.arg["a"], ta)),
        k.op("load", k.at(k.arg["b"], tb)),
        k.op("load", k.at(k.arg["c"], tc)),
        **attrs,
    )
    k.void("store", k.at(k.arg["out"], tc), r)
    out = np.zeros((2, m, n), dtype=to_memory(c, acc).dtype)
    k.run(2, to_memory(a, dtype), to_memory(b, dtype), to_memory(c, acc), out)
    got = from_memory(out, acc)
    if dtype == "int8":
        expected = (a.astype(np.int64) @ b.astype(np.int64) + c).astype(np.int32)
    else:
        exact = a.astype(np.float64) @ b.astype(np.float64) + c.astype(np.float64)
        expected = bf16(exact) if acc == "bf16" else exact.astype(NUMPY[acc])
    np.testing.assert_array_equal(got, expected)


def test_tf32_dot_rounds_inputs() -> None:
    k = K("mm", a=ptr("fp32"), b=ptr("fp32"), out=ptr("fp32"))
    t = k.op("reshape", k.arange(16 * 16), shape=[16, 16])
    a, b = (k.op("load", k.at(k.arg[n], t)) for n in "ab")
    zero = k.op("broadcast", k.op("splat", k.const(0.0, ScalarType("fp32")), shape=[1, 1]), shape=[16, 16])
    k.void("store", k.at(k.arg["out"], t), k.op("dot", a, b, zero, input_precision="tf32"))
    a_ = np.full((16, 16), 1 + 2.0**-12, np.float32)  # below tf32 precision: rounds to 1
    b_ = np.eye(16, dtype=np.float32)
    out = np.zeros((16, 16), np.float32)
    k.run(1, a_, b_, out)
    np.testing.assert_array_equal(out, 1.0)


def test_batched_dot_and_a_uniform_operand() -> None:
    k = K("bmm", a=ptr("fp32"), out=ptr("fp32"))
    t = k.op("reshape", k.arange(2 * 4 * 4), shape=[2, 4, 4])
    a = k.op("load", k.at(k.arg["a"], t))
    zero = k.op("broadcast", k.op("splat", k.const(0.0, ScalarType("fp32")), shape=[1, 1, 1]), shape=[2, 4, 4])
    out_offs = k.op("add", t, k.splat(k.op("mul", k.pid(), k.const(32)), [2, 4, 4]))
    k.void("store", k.at(k.arg["out"], out_offs), k.op("dot", a, a, zero, input_precision="ieee"))
    a_ = np.arange(32, dtype=np.float32).reshape(2, 4, 4)
    out = np.zeros((3, 2, 4, 4), np.float32)
    k.run(3, a_, out)
    np.testing.assert_array_equal(out, np.broadcast_to(a_ @ a_, (3, 2, 4, 4)))
