"""The NumPy references themselves (not collected again on the GPU: no kernels run here)."""

from __future__ import annotations

import numpy as np
import pytest

from .reference import c_div, c_mod, wrap


@pytest.mark.parametrize("shape", [(), (1,), (2, 3), (0,)])
def test_wrap_any_shape_of_python_ints_beyond_int64(shape):
    # np.sum(..., dtype=object) of a 0-d or reduced input is a 0-d object array, or a bare Python int,
    # whose values need not fit in an int64: NumPy ops then squeeze Python ints into int64 and overflow.
    values = [2**64 + 5, 2**63 + 5, -(2**63) - 1, -1, 2**200 + 7, 0][: int(np.prod(shape))]
    x = np.array(values, dtype=object).reshape(shape)
    expected = np.array([((v + 2**63) % 2**64) - 2**63 for v in values], np.int64).reshape(shape)
    np.testing.assert_array_equal(wrap(x, np.int64), expected)
    assert wrap(x, np.int64).shape == shape and wrap(x, np.int64).dtype == np.int64
    np.testing.assert_array_equal(wrap(x, "uint64"), np.array([v % 2**64 for v in values], np.uint64).reshape(shape))
    np.testing.assert_array_equal(wrap(x, np.int8), np.array([((v + 128) % 256) - 128 for v in values], np.int8).reshape(shape))


def test_wrap_scalars():
    assert wrap(2**63, np.int64) == -(2**63) and wrap(2**63, np.int64).shape == ()
    assert wrap(np.asarray(-1, dtype=object), np.uint32) == 2**32 - 1
    assert wrap(300, "uint8") == 44 and wrap(-129, "int8") == 127


def test_c_div_and_c_mod_of_0d_operands_at_the_int64_edge():
    a, b = np.asarray(-(2**63)), np.asarray(-1)
    assert c_div(a, b) == -(2**63) and c_mod(a, b) == 0  # wraps, as C (and the GPU) do
    a, b = np.array([-7, 7, -7, 7], np.int32), np.array([2, 2, -2, -2], np.int32)
    np.testing.assert_array_equal(c_div(a, b), [-3, 3, 3, -3])
    np.testing.assert_array_equal(c_mod(a, b), [-1, 1, -1, 1])
