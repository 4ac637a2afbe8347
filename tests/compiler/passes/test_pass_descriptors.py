"""`expand_descriptor_loads`: a descriptor load and its expansion to a masked load read the same tile,
in the interpreter (which reads descriptor loads as they are), at edges, out of bounds on every side,
with zero and NaN padding, in 2-D and 3-D; what `keep` selects stays; attributes a backend gave the op
carry over to the load."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
from descriptor_kernels import load_2d, load_3d

from despina.compiler.interpreter import run_kernel
from despina.compiler.ir.core import Module
from despina.compiler.ir.verifier import verify
from despina.compiler.passes.descriptors import expand_descriptor_loads


def module_of(fn: Any, args: tuple[Any, ...], consts: dict[str, Any]) -> Module:
    options = fn.options({}, interpret=True)
    return fn.ir(fn.specialize(fn.bind(args, consts), options), options)


def ops(module: Module, name: str) -> int:
    return sum(op.name == name for op in module.kernel.walk())


def both(module: Module, grid: tuple[int, int, int], args: list[Any], out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`out` after the module as it is, and after its expansion."""
    expanded = expand_descriptor_loads(copy.deepcopy(module))
    verify(expanded)
    assert ops(module, "descriptor_load") and not ops(expanded, "descriptor_load")
    results = []
    for m in (module, expanded):
        got = np.full_like(out, -7)
        run_kernel(m, grid=grid, args=[*args[:1], got, *args[2:]])
        results.append(got)
    return results[0], results[1]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8])
@pytest.mark.parametrize("at", [(0, 0), (-3, 5), (9, -6), (20, 30), (-40, 0)])
@pytest.mark.parametrize("pad", ["zero", "nan"])
def test_a_2d_block_reads_as_its_expansion(dtype: Any, at: tuple[int, int], pad: str) -> None:
    if pad == "nan" and dtype == np.int8:
        pytest.skip("NaN padding is for floating-point blocks")
    rows, cols, stride = 21, 13, 16
    x = (np.arange(rows * stride) % 97 + 1).astype(dtype)
    out = np.zeros(2 * 8 * 16, dtype)
    args = [x, out, rows, cols, stride, *at]
    consts = {"BR": 8, "BC": 16, "PAD": pad}
    direct, expanded = both(module_of(load_2d, tuple(args), consts), (2, 1, 1), args, out)
    np.testing.assert_array_equal(direct, expanded)
    want = np.full((2, 8, 16), np.nan if pad == "nan" else 0, np.float64)
    grid = x.reshape(rows, stride).astype(np.float64)
    for p in range(2):
        for r in range(8):
            for c in range(16):
                i, j = at[0] + p * 8 + r, at[1] + c
                if 0 <= i < rows and 0 <= j < cols:
                    want[p, r, c] = grid[i, j]
    np.testing.assert_array_equal(direct.reshape(2, 8, 16).astype(np.float64), want)


def test_a_3d_block_reads_as_its_expansion() -> None:
    shape, block = (3, 5, 24), (2, 4, 16)
    x = np.arange(np.prod(shape), dtype=np.float32)
    out = np.zeros(np.prod(block), np.float32)
    args = [x, out, *shape, 2, -1, 12]
    direct, expanded = both(module_of(load_3d, tuple(args), dict(zip(("B0", "B1", "B2"), block))), (1, 1, 1), args, out)
    np.testing.assert_array_equal(direct, expanded)
    want = np.zeros(block, np.float32)
    src = x.reshape(shape)
    for i in range(2):
        for j in range(4):
            for k in range(16):
                a, b, c = 2 + i, -1 + j, 12 + k
                if a < shape[0] and 0 <= b < shape[1] and c < shape[2]:
                    want[i, j, k] = src[a, b, c]
    np.testing.assert_array_equal(direct.reshape(block), want)


def test_keep_leaves_the_loads_it_selects_and_attributes_carry_over() -> None:
    x, out = np.zeros(64, np.float32), np.zeros(128, np.float32)
    module = module_of(load_2d, (x, out, 4, 16, 16, 0, 0), {"BR": 8, "BC": 16, "PAD": "zero"})
    kept = expand_descriptor_loads(copy.deepcopy(module), keep=lambda op: True)
    assert ops(kept, "descriptor_load") == 1
    marked = copy.deepcopy(module)
    (op,) = [o for o in marked.kernel.walk() if o.name == "descriptor_load"]
    op.attrs["tma"] = "none: a reason"
    expanded = expand_descriptor_loads(marked)
    (load,) = [o for o in expanded.kernel.walk() if o.name == "load"]
    assert load.attrs["tma"] == "none: a reason"
    assert load.attrs["cache"] == "" and load.attrs["volatile"] is False
