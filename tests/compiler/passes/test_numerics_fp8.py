"""fp8 in the folder's numerics: `fp8_bits` (what the backend converts constants with) gives the bits
`cvt.rn.satfinite` gives, against an independent reference; the folder leaves fp8 casts alone (the IR
has no fp8 constants to fold them into)."""

from __future__ import annotations

import numpy as np
import pytest
from language.fp8_reference import MAX_FINITE, encode, midpoints, values
from passes_util import kernel

from despina.compiler.ir.types import float8e4nv, float8e5, float32, int8
from despina.compiler.passes.fold import fold
from despina.compiler.passes.numerics import fp8_bits

FP8 = {"fp8e4nv": float8e4nv, "fp8e5": float8e5}


@pytest.mark.parametrize("name", FP8)
def test_fp8_bits_round_to_nearest_even_and_saturate(name):
    finite = values(name)[np.isfinite(values(name))]
    top = MAX_FINITE[name]
    rng = np.random.default_rng(3)
    xs = [*finite, *midpoints(name), top * 1.1, -top * 5, np.inf, -np.inf, 1e300, -0.0,
          *(rng.standard_normal(300) * np.exp2(rng.integers(-24, 20, 300)))]
    assert [fp8_bits(float(x), FP8[name]) for x in xs] == [encode(float(x), name) for x in xs]
    assert fp8_bits(float("nan"), FP8[name]) == 0x7F


@pytest.mark.parametrize(("op", "src"), [("cast", float32), ("bitcast", int8)])
def test_the_folder_leaves_fp8_conversions(op, src):
    m, b, _ = kernel()
    b.value(op, [b.constant(1 if src == int8 else 1.5, src)], to=float8e4nv)
    b.create("return")
    fold(m)
    assert [o.name for o in m.kernel.body.ops] == ["constant", op, "return"]
