"""Creation and shape ops: constants, arange, splat/broadcast, expand_dims, reshape, trans,
cat, join, split; each checked against NumPy on tiles that differ per program."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from despina.compiler.ir.core import Value
from despina.compiler.ir.types import ScalarType, TileType

from .kernel import K, ptr
from .reference import to_memory


def _shape_kernel(
    in_shape: tuple[int, ...], body: Callable[[K, Value], Value], programs: int = 3
) -> tuple[np.ndarray, np.ndarray]:
    """Program p loads tile p of x (shape `in_shape`), applies `body`, stores the result as tile p."""
    size = int(np.prod(in_shape))
    k = K(x=ptr("int32"), out=ptr("int32"))
    x = k.op("load", k.at(k.arg["x"], k.op("reshape", k.offsets(size), shape=list(in_shape))))
    r = body(k, x)
    assert isinstance(r.type, TileType)
    out_shape = r.type.shape
    n = int(np.prod(out_shape))
    k.void("store", k.at(k.arg["out"], k.op("reshape", k.offsets(n), shape=list(out_shape))), r)
    xs = np.arange(programs * size, dtype=np.int32).reshape((programs,) + in_shape) * 3 - 7
    out = np.zeros((programs,) + out_shape, np.int32)
    k.run(programs, xs, out)
    return xs, out


@pytest.mark.parametrize("perm", [(1, 0, 2), (2, 0, 1), (0, 2, 1)])
def test_trans(perm: tuple[int, ...]) -> None:
    xs, out = _shape_kernel((2, 3, 4), lambda k, x: k.op("trans", x, perm=list(perm)))
    np.testing.assert_array_equal(out, np.transpose(xs, (0,) + tuple(p + 1 for p in perm)))


def test_reshape_expand_dims_broadcast() -> None:
    xs, out = _shape_kernel(
        (6,),
        lambda k, x: k.op("broadcast", k.op("expand_dims", k.op("reshape", x, shape=[2, 3]), axis=1), shape=[2, 4, 3]),
    )
    np.testing.assert_array_equal(out, np.broadcast_to(xs.reshape(3, 2, 1, 3), (3, 2, 4, 3)))


def test_reshape_of_a_transposed_tile_reads_in_logical_order() -> None:
    xs, out = _shape_kernel((2, 3), lambda k, x: k.op("reshape", k.op("trans", x, perm=[1, 0]), shape=[6]))
    np.testing.assert_array_equal(out, np.transpose(xs, (0, 2, 1)).reshape(3, 6))


def test_cat_join_split() -> None:
    xs, out = _shape_kernel((2, 3), lambda k, x: k.op("cat", x, k.op("neg", x)))
    np.testing.assert_array_equal(out, np.concatenate([xs, -xs], axis=1))
    xs, out = _shape_kernel((4,), lambda k, x: k.op("join", x, k.op("mul", x, x)))
    np.testing.assert_array_equal(out, np.stack([xs, xs * xs], axis=-1))

    def swap(k: K, x: Value) -> Value:
        a, b = k.ops("split", k.op("reshape", x, shape=[3, 2]))
        return k.op("join", b, a)

    xs, out = _shape_kernel((6,), swap)
    np.testing.assert_array_equal(out, xs.reshape(3, 3, 2)[..., ::-1])


def test_split_of_a_broadcast_tile() -> None:
    def body(k: K, x: Value) -> Value:
        wide = k.op("broadcast", k.op("expand_dims", x, axis=1), shape=[4, 2])
        a, b = k.ops("split", wide)
        return k.op("sub", a, b)

    _, out = _shape_kernel((4,), body)
    np.testing.assert_array_equal(out, 0)


@pytest.mark.parametrize(
    "value, dtype",
    [
        (-1, "int8"),
        (255, "uint8"),
        (2**40 + 3, "int32"),
        (-1, "uint64"),
        (1.5, "fp16"),
        (1 / 3, "bf16"),
        (True, "int1"),
        (2.9, "int32"),
    ],
)
def test_constants_have_their_type(value: Any, dtype: str) -> None:
    k = K(out=ptr(dtype))
    c = k.const(value, TileType((4,), ScalarType(dtype)))
    k.void("store", k.at(k.arg["out"], k.arange(4)), c)
    out = np.zeros(4, dtype=to_memory(np.zeros(1), dtype).dtype)
    k.run(2, out)
    expected = {
        "int8": -1,
        "uint8": 255,
        "int32": 3 if value == 2**40 + 3 else 2,
        "uint64": 2**64 - 1,
        "fp16": 1.5,
        "bf16": 0x3EAB,
        "int1": True,
    }[dtype]
    np.testing.assert_array_equal(out, expected)


def test_arange_with_a_start() -> None:
    k = K(out=ptr("int32"))
    k.void("store", k.at(k.arg["out"], k.arange(4)), k.arange(4, start=10))
    out = np.zeros(4, np.int32)
    k.run(1, out)
    np.testing.assert_array_equal(out, [10, 11, 12, 13])
