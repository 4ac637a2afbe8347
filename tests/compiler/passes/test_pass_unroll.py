"""Loop unrolling (passes/unroll.py, `tl.range(..., loop_unroll_factor=U)`): the unrolled kernel gives
what the loop as written gives for every trip count (none, fewer than U, a multiple of U and more),
steps other than 1 and loop-carried values; the backend runs it, so the GPU IR shows the two loops and
the PTX the body U times."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import despina
import despina.language as tl
from despina.compiler.interpreter import run_kernel
from despina.compiler.ir.core import Module
from despina.compiler.ir.verifier import verify
from despina.compiler.passes.unroll import unroll_loops


@despina.jit
def running_sums(x_ptr, out_ptr, lo, hi, STEP: tl.constexpr, U: tl.constexpr):
    offs = tl.arange(0, 16)
    acc = tl.zeros((16,), tl.float32)
    count = 0
    for i in tl.range(lo, hi, STEP, loop_unroll_factor=U):
        acc = acc * 0.5 + tl.load(x_ptr + i * 16 + offs)
        count += i
    tl.store(out_ptr + offs, acc + count)


def _run(module: Module, x: np.ndarray, lo: int, hi: int) -> np.ndarray:
    out = np.zeros(16, np.float32)
    run_kernel(module, (1, 1, 1), [x, out, lo, hi])
    return out


@pytest.mark.parametrize("factor", [2, 3, 4])
@pytest.mark.parametrize("step", [1, 3])
def test_unrolled_loops_give_what_the_loop_gives(trace: Any, factor: int, step: int) -> None:
    x = np.random.default_rng(0).standard_normal(64 * 16).astype(np.float32)
    for lo, hi in [(0, 0), (5, 2), (0, 1), (0, factor - 1), (0, factor * step), (1, 3 * factor * step + 2), (2, 60)]:
        written = trace(running_sums, x, np.zeros(16, np.float32), lo, hi, STEP=step, U=factor)
        unrolled = trace(running_sums, x, np.zeros(16, np.float32), lo, hi, STEP=step, U=factor)
        unroll_loops(unrolled.kernel)
        verify(unrolled)
        loops = [op for op in unrolled.kernel.walk() if op.name == "for"]
        assert len(loops) == 2 and all("loop_unroll_factor" not in op.attrs for op in loops)
        np.testing.assert_array_equal(_run(unrolled, x, lo, hi), _run(written, x, lo, hi))


def test_a_factor_below_two_leaves_the_loop(trace: Any) -> None:
    module = trace(running_sums, np.zeros(16, np.float32), np.zeros(16, np.float32), 0, 8, STEP=1, U=1)
    unroll_loops(module.kernel)
    assert [op.attrs.get("loop_unroll_factor") for op in module.kernel.walk() if op.name == "for"] == [1]


def test_the_backend_unrolls(trace: Any) -> None:
    pytest.importorskip("llvmlite")
    k = despina.compile(running_sums, "*fp32:16,*fp32:16,i32,i32", {"STEP": 1, "U": 4}, num_warps=1, target="sm_80")
    gpuir = k.asm["gpuir"]
    assert gpuir.count("= for(") == 2 and gpuir.count("= load(") == 5  # 4 copies in the first loop, 1 in the second
    assert "loop_unroll_factor" in k.asm["ir"]  # the tile IR keeps the loop as written
