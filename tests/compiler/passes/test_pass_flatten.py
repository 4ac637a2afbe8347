"""`flatten_loops` (`tl.range(..., flatten=True)`): the flattened nest computes what the nest computes, in
the interpreter, whatever the trip counts (an inner loop of no iteration runs the nest without it, an
outer loop of none runs neither, more programs than tiles), with a value the outer loop carries
updated once per outer iteration; nests that do not fit stay as written and say why."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
from descriptor_kernels import persistent_rowsum, persistent_scaled

import despina
import despina.language as tl
from despina.compiler.interpreter import run_kernel
from despina.compiler.ir.core import Module, Op
from despina.compiler.ir.types import TileType
from despina.compiler.passes.flatten import flatten_loops


def module_of(fn: Any, args: tuple[Any, ...], consts: dict[str, Any]) -> Module:
    options = fn.options({}, interpret=True)
    return fn.ir(fn.specialize(fn.bind(args, consts), options), options)


def loops(module: Module) -> list[dict[str, Any]]:
    return [op.attrs for op in module.kernel.walk() if op.name == "for"]


@despina.jit
def grouped_rowsums(x_ptr, out_ptr, R, C, W: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr, GROUP: tl.constexpr,
                    PROGRAMS: tl.constexpr):
    """out[r, n] = the sum of x[r, n * W : (n + 1) * W], a BR x W tile at a time over tiles taken in tutorial 09's
    grouped order (a tile's coordinates by divisions, before the inner loop), the inner loop over the tile's
    columns BC at a time."""
    num_pid_m = tl.cdiv(R, BR)
    num_pid_n = tl.cdiv(C, W)
    in_group = GROUP * num_pid_n
    for tile in tl.range(tl.program_id(0), num_pid_m * num_pid_n, PROGRAMS, flatten=True):
        first_m = tile // in_group * GROUP
        size_m = tl.minimum(num_pid_m - first_m, GROUP)
        pid_m = first_m + tile % in_group % size_m
        pid_n = tile % in_group // size_m
        acc = tl.zeros((BR,), tl.float32)
        for k in range(0, W, BC):
            rows = pid_m * BR + tl.arange(0, BR)
            cols = pid_n * W + k + tl.arange(0, BC)
            acc += tl.sum(tl.load(x_ptr + rows[:, None] * C + cols[None, :],
                                  mask=(rows[:, None] < R) & (cols[None, :] < C), other=0.0), axis=1)
        rows = pid_m * BR + tl.arange(0, BR)
        tl.store(out_ptr + rows * num_pid_n + pid_n, acc, mask=rows < R)


@pytest.mark.parametrize("rows,cols,programs", [(50, 37, 3), (64, 32, 2), (50, 0, 3), (8, 20, 5), (0, 20, 2)])
def test_the_flattened_nest_computes_what_the_nest_computes(rows: int, cols: int, programs: int) -> None:
    rng = np.random.default_rng(rows * 100 + cols)
    x = rng.integers(-4, 5, (max(rows, 1), max(cols, 1))).astype(np.float32)
    consts = {"BR": 8, "BC": 16, "PROGRAMS": programs}
    module = module_of(persistent_rowsum, (x, x, np.zeros(programs, np.int32), rows, cols), consts)
    flat = copy.deepcopy(module)
    flatten_loops(flat.kernel)
    # the fused loop, and the nest's copy for an inner loop of no iteration, without it (its results its initial values)
    assert [a.get("flattened", "")[:3] for a in loops(flat)] == ["yes", "no:"]
    results = []
    for m in (module, flat):
        out, count = np.full(max(rows, 1) + 8, -1.0, np.float32), np.full(programs, -1, np.int32)
        run_kernel(m, grid=(programs, 1, 1), args=[x, out, count, rows, cols])
        results.append((out, count))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
    tiles = -(-rows // 8)
    np.testing.assert_array_equal(results[1][1], [len(range(p, tiles, programs)) for p in range(programs)])
    want = x[:rows, :cols].sum(axis=1) if cols else np.zeros(rows, np.float32)
    got = results[1][0][:rows] - np.array([(r // 8) // programs for r in range(rows)], np.float32)
    np.testing.assert_array_equal(got, want)


def test_a_nest_that_does_not_fit_stays_and_says_why() -> None:
    x = np.ones((16, 16), np.float32)
    module = module_of(persistent_scaled, (x, x, x, 16, 16), {"BR": 8, "BC": 16, "PROGRAMS": 2})
    flatten_loops(module.kernel)
    outer = loops(module)[0]
    assert "flatten" not in outer
    assert outer["flattened"] == ("no: the ops before the inner loop run every iteration once flattened, and 'load' "
                                  "may not")


def test_the_fused_loop_takes_the_inner_loop_s_stages_and_an_unrolled_nest_stays() -> None:
    x = np.ones((16, 16), np.float32)
    args = (x, x, np.zeros(2, np.int32), 16, 16)
    staged = module_of(persistent_rowsum, args, {"BR": 8, "BC": 16, "PROGRAMS": 2, "STAGES": 2})
    flatten_loops(staged.kernel)
    assert loops(staged)[0]["num_stages"] == 2 and loops(staged)[0]["flattened"].startswith("yes")
    unrolled = module_of(persistent_rowsum, args, {"BR": 8, "BC": 16, "PROGRAMS": 2, "UNROLL": 2})
    flatten_loops(unrolled.kernel)
    assert loops(unrolled)[0]["flattened"] == "no: a loop of the nest is unrolled (loop_unroll_factor)"


@pytest.mark.parametrize("rows,cols,programs", [(50, 70, 3), (64, 64, 2), (8, 100, 7), (0, 20, 2), (40, 16, 40)])
def test_a_tile_s_coordinates_are_carried_and_computed_once_a_tile(rows: int, cols: int, programs: int) -> None:
    """The scalars of `pre` that the inner loop reads (a tile's coordinates, by divisions) are carried: an `if`
    on a tile's last step computes the next tile's, and no division is left at the fused loop's top level.
    Before, they ran every step, in the thread that issues TMA's copies (0.75-0.82x Triton at 128x128x64)."""
    rng = np.random.default_rng(rows * 100 + cols)
    x = rng.integers(-4, 5, (max(rows, 1), cols)).astype(np.float32)
    consts = {"W": 32, "BR": 8, "BC": 16, "GROUP": 3, "PROGRAMS": programs}
    n_tiles = -(-cols // 32)
    module = module_of(grouped_rowsums, (x, x, rows, cols), consts)
    flat = copy.deepcopy(module)
    flatten_loops(flat.kernel)
    fused = next(op for op in flat.kernel.walk() if op.name == "for" and op.attrs.get("flattened", "").startswith("yes"))
    top = [op.name for op in fused.regions[0].ops]
    assert "floordiv" not in top and "rem" not in top and top.count("if") == 2  # the epilogue, the next tile
    assert len(fused.regions[0].args) == 1 + 1 + 2 + 2  # j, the accumulator, (pid_m, pid_n), t and ki
    results = []
    for m in (module, flat):
        out = np.full(max(rows, 1) * n_tiles + 8, -1.0, np.float32)
        run_kernel(m, grid=(programs, 1, 1), args=[x, out, rows, cols])
        results.append(out)
    np.testing.assert_array_equal(results[0], results[1])
    want = np.stack([x[:rows, n * 32 : (n + 1) * 32].sum(axis=1) for n in range(n_tiles)], axis=1).reshape(-1)
    np.testing.assert_array_equal(results[1][: rows * n_tiles], want)


@despina.jit
def stepped_rowsums(x_ptr, out_ptr, R, C, BR: tl.constexpr, BC: tl.constexpr, PROGRAMS: tl.constexpr):
    """persistent_rowsum with the inner loop stepping its pointers (`ptrs += BC`) and reading only them."""
    for tile in tl.range(tl.program_id(0), tl.cdiv(R, BR), PROGRAMS, flatten=True):
        rows = tile * BR + tl.arange(0, BR)
        ptrs = x_ptr + rows[:, None] * C + tl.arange(0, BC)[None, :]
        acc = tl.zeros((BR,), tl.float32)
        for c in range(0, C, BC):
            acc += tl.sum(tl.load(ptrs, mask=(rows[:, None] < R) & (c + tl.arange(0, BC)[None, :] < C), other=0.0), 1)
            ptrs += BC
        tl.store(out_ptr + rows, acc, mask=rows < R)


@pytest.mark.parametrize("rows,cols,programs", [(50, 37, 3), (64, 32, 2), (8, 100, 5), (50, 0, 3)])
def test_what_the_epilogue_does_not_read_goes_straight_to_the_next_iteration(rows: int, cols: int,
                                                                              programs: int) -> None:
    """The accumulator, which the epilogue reads, passes through its `if` (the next tile's start on a tile's
    last step); the pointers the inner loop steps go to the next iteration beside it, so that the pipeline can
    evaluate their loads ahead (through the `if`, it could not: lower/pipeline). On a tile's last step, the
    `if` that gives the next tile's values gives their start; `pre` is not computed at every step. Before, it
    was, and a select of 64-bit pointers chose between the start and the stepped pointer on every element (a
    persistent matmul stepping its pointers ran 0.66-0.69x Triton)."""
    rng = np.random.default_rng(rows * 100 + cols)
    x = rng.integers(-4, 5, (max(rows, 1), max(cols, 1))).astype(np.float32)
    fused, results = _rowsums_both_ways(stepped_rowsums, x, rows, cols, programs)
    body = fused.regions[0]
    epilogue, advance = (op for op in body.ops if op.name == "if")
    assert [str(r.type) for r in epilogue.results] == ["tile<8xfp32>"]  # the accumulator alone
    assert not {"arange", "mul"} & {op.name for op in body.ops if any(isinstance(r.type, TileType) for r in op.results)}
    assert [op.name for op in body.ops if op.name == "select" and isinstance(op.result.type, TileType)] == ["select"]
    at = next(i for i, a in enumerate(body.args) if "ptr" in str(a.type))
    assert body.terminator is not None
    passed = body.terminator.operands[at - 1]
    assert passed.owner is advance  # the next tile's start, or the stepped pointer, from the second `if`
    stay = advance.regions[1].terminator
    assert stay is not None
    step = stay.operands[passed.index].owner
    assert isinstance(step, Op) and step.name == "addptr"
    np.testing.assert_array_equal(results[0], results[1])


def _rowsums_both_ways(kernel: Any, x: np.ndarray, rows: int, cols: int, programs: int) -> tuple[Op, list[np.ndarray]]:
    """A rowsums kernel's fused loop, and its outputs in the interpreter as written and flattened."""
    module = module_of(kernel, (x, x, rows, cols), {"BR": 8, "BC": 16, "PROGRAMS": programs})
    flat = copy.deepcopy(module)
    flatten_loops(flat.kernel)
    fused = next(op for op in flat.kernel.walk() if op.name == "for" and op.attrs.get("flattened", "").startswith("yes"))
    results = []
    for m in (module, flat):
        out = np.full(max(rows, 1) + 8, -1.0, np.float32)
        run_kernel(m, grid=(programs, 1, 1), args=[x, out, rows, cols])
        results.append(out)
    return fused, results


@despina.jit
def invariant_rowsums(x_ptr, out_ptr, R, C, BR: tl.constexpr, BC: tl.constexpr, PROGRAMS: tl.constexpr):
    """persistent_rowsum with the inner loop's column offsets made in the tile loop: the same for every tile."""
    for tile in tl.range(tl.program_id(0), tl.cdiv(R, BR), PROGRAMS, flatten=True):
        rows = tile * BR + tl.arange(0, BR)
        cols = tl.arange(0, BC)
        acc = tl.zeros((BR,), tl.float32)
        for c in range(0, C, BC):
            mask = (rows[:, None] < R) & (c + cols[None, :] < C)
            acc += tl.sum(tl.load(x_ptr + rows[:, None] * C + c + cols[None, :], mask=mask, other=0.0), 1)
        tl.store(out_ptr + rows, acc, mask=rows < R)


@pytest.mark.parametrize("rows,cols,programs", [(50, 37, 3), (64, 32, 2), (0, 20, 2)])
def test_what_is_the_same_for_every_tile_is_not_carried(rows: int, cols: int, programs: int) -> None:
    """The columns the inner loop reads, made in the tile loop from nothing it defines, come from the copy of the
    tile loop's first ops before the fused loop: it carries the tile's rows alone (a carried block of columns
    hid their form from `pointer_tiles`, which then left a persistent matmul on cp.async)."""
    rng = np.random.default_rng(rows + cols)
    x = rng.integers(-4, 5, (max(rows, 1), cols)).astype(np.float32)
    fused, results = _rowsums_both_ways(invariant_rowsums, x, rows, cols, programs)
    assert [str(a.type) for a in fused.regions[0].args[1:-2]] == ["tile<8xfp32>", "tile<8xint32>"]  # acc, rows
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[1][:rows], x[:rows].sum(axis=1))
