"""`expand_descriptors`: a descriptor load and its expansion to a masked load read the same tile, and a
descriptor store and its expansion to a masked store write the same elements (and none outside the
tensor), in the interpreter (which runs descriptor ops as they are), at edges, out of bounds on every
side, with zero and NaN padding, in 2-D and 3-D; what `keep` selects stays; attributes a backend gave
the op carry over to the load or store; the store op prints, parses, encodes and decodes back to itself."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
from descriptor_kernels import load_2d, load_3d, store_2d, store_3d

from despina.compiler.interpreter import run_kernel
from despina.compiler.ir.codec import decode, encode
from despina.compiler.ir.core import Module
from despina.compiler.ir.parser import parse_module
from despina.compiler.ir.printer import print_module
from despina.compiler.ir.verifier import verify
from despina.compiler.passes.descriptors import expand_descriptors


def module_of(fn: Any, args: tuple[Any, ...], consts: dict[str, Any]) -> Module:
    options = fn.options({}, interpret=True)
    return fn.ir(fn.specialize(fn.bind(args, consts), options), options)


def ops(module: Module, name: str) -> int:
    return sum(op.name == name for op in module.kernel.walk())


def both(module: Module, grid: tuple[int, int, int], args: list[Any], out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`out` after the module as it is, and after its expansion."""
    expanded = expand_descriptors(copy.deepcopy(module))
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
    kept = expand_descriptors(copy.deepcopy(module), keep=lambda op: True)
    assert ops(kept, "descriptor_load") == 1
    marked = copy.deepcopy(module)
    (op,) = [o for o in marked.kernel.walk() if o.name == "descriptor_load"]
    op.attrs["tma"] = "none: a reason"
    expanded = expand_descriptors(marked)
    (load,) = [o for o in expanded.kernel.walk() if o.name == "load"]
    assert load.attrs["tma"] == "none: a reason"
    assert load.attrs["cache"] == "" and load.attrs["volatile"] is False


def stored(module: Module, grid: tuple[int, int, int], args: list[Any], like: np.ndarray) -> tuple[np.ndarray, ...]:
    """A tensor of -7 (`like` with a guard region of 4 elements either side) after the module as it is,
    and after its expansion: each the tensor and its guards."""
    expanded = expand_descriptors(copy.deepcopy(module))
    verify(expanded)
    assert ops(module, "descriptor_store") and not ops(expanded, "descriptor_store") and ops(expanded, "store")
    results = []
    for m in (module, expanded):
        padded = np.full(like.size + 8, -7, like.dtype)
        run_kernel(m, grid=grid, args=[padded[4:-4], *args[1:]])
        results.append(padded)
    return results[0], results[1]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8])
@pytest.mark.parametrize("at", [(0, 0), (-3, 5), (9, -6), (20, 30), (-40, 0)])
def test_a_2d_store_writes_as_its_expansion(dtype: Any, at: tuple[int, int]) -> None:
    """Programs 0 and 1 write blocks of 8 x 16 (their indices) at rows at[0] and at[0] + 8 of a 21 x 13 tensor
    with rows of 16 elements: only the elements inside 21 x 13, none of the 3 columns past a row's end, none
    of the guard before and after the tensor."""
    rows, cols, stride = 21, 13, 16
    like = np.zeros(rows * stride, dtype)
    args = [like, rows, cols, stride, *at]
    direct, expanded = stored(module_of(store_2d, tuple(args), {"BR": 8, "BC": 16}), (2, 1, 1), args, like)
    np.testing.assert_array_equal(direct, expanded)
    want = np.full(rows * stride + 8, -7, np.int64)
    for p in range(2):
        for r in range(8):
            for c in range(16):
                i, j = at[0] + p * 8 + r, at[1] + c
                if 0 <= i < rows and 0 <= j < cols:
                    want[4 + i * stride + j] = 1 + p * 128 + r * 16 + c
    np.testing.assert_array_equal(direct, want.astype(dtype))


def test_a_3d_store_writes_as_its_expansion() -> None:
    shape, block = (3, 5, 24), (2, 4, 16)
    like = np.zeros(np.prod(shape), np.float32)
    args = [like, *shape, 2, -1, 12]
    module = module_of(store_3d, tuple(args), dict(zip(("B0", "B1", "B2"), block)))
    direct, expanded = stored(module, (1, 1, 1), args, like)
    np.testing.assert_array_equal(direct, expanded)
    want = np.full(shape, -7, np.float32)
    for i in range(2):
        for j in range(4):
            for k in range(16):
                a, b, c = 2 + i, -1 + j, 12 + k
                if a < shape[0] and 0 <= b < shape[1] and c < shape[2]:
                    want[a, b, c] = 1 + i * 64 + j * 16 + k
    np.testing.assert_array_equal(direct[4:-4].reshape(shape), want)
    assert (direct[:4] == -7).all() and (direct[-4:] == -7).all()


def test_a_store_keeps_what_keep_selects_and_its_attributes() -> None:
    x = np.zeros(64, np.float32)
    module = module_of(store_2d, (x, 4, 16, 16, 0, 0), {"BR": 8, "BC": 16})
    assert ops(expand_descriptors(copy.deepcopy(module), keep=lambda op: True), "descriptor_store") == 1
    (op,) = [o for o in module.kernel.walk() if o.name == "descriptor_store"]
    op.attrs["tma"] = "none: a reason"
    (store,) = [o for o in expand_descriptors(module).kernel.walk() if o.name == "store"]
    assert store.attrs == {"tma": "none: a reason", "cache": "", "evict": ""}


def test_the_store_op_round_trips_through_text_and_the_wire() -> None:
    module = module_of(store_2d, (np.zeros(64, np.float16), 4, 16, 16, 0, 0), {"BR": 8, "BC": 16})
    text = print_module(module)
    assert "descriptor_store(" in text
    for back in (parse_module(text), decode(encode(module))):
        verify(back)
        assert print_module(back) == text
