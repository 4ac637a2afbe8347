"""Throughput of the NumPy interpreter on vector add (2**24 fp32 elements, BLOCK=1024).

    python benchmarks/interpreter.py [--n 16777216] [--block 1024] [--repeat 5]

Prints GB/s counting 12 bytes per element (two loads, one store), best of `--repeat` runs.
Triton's interpreter does 0.03-0.07 GB/s on this; the goal here is at least 0.5 GB/s on two
cores. The kernel is built with the IR builder; it is what the frontend makes of

    @despina.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from despina.compiler.interpreter import run_kernel
from despina.compiler.ir.builder import Builder
from despina.compiler.ir.core import Block, Function, Module, Value
from despina.compiler.ir.types import PointerType, TileType, float32, int32


def add_kernel(block: int) -> Module:
    fp32_ptr = PointerType(float32)
    body = Block([fp32_ptr, fp32_ptr, fp32_ptr, int32])
    x_ptr, y_ptr, out_ptr, n = body.args
    b = Builder(body)
    start = b.value("mul", [b.value("program_id", axis=0), b.constant(block, int32)])
    offs = b.value("add", [b.value("splat", [start], shape=[block]), b.value("arange", start=0, end=block)])
    mask = b.value("cmp", [offs, b.value("splat", [n], shape=[block])], pred="lt")

    def at(p: Value) -> Value:
        return b.value("addptr", [b.value("splat", [p], shape=[block]), offs])

    x = b.value("load", [at(x_ptr), mask])
    y = b.value("load", [at(y_ptr), mask])
    b.create("store", [at(out_ptr), b.value("add", [x, y]), mask])
    b.create("return")
    assert offs.type == TileType((block,), int32)
    return Module([Function("add_kernel", body, ["x_ptr", "y_ptr", "out_ptr", "n"], kernel=True)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1 << 24)
    parser.add_argument("--block", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x, y = rng.random(args.n, dtype=np.float32), rng.random(args.n, dtype=np.float32)
    out = np.empty_like(x)
    module = add_kernel(args.block)
    grid = ((args.n + args.block - 1) // args.block, 1, 1)
    best = float("inf")
    for _ in range(args.repeat):
        start = time.perf_counter()
        run_kernel(module, grid, [x, y, out, args.n])
        best = min(best, time.perf_counter() - start)
    if not np.array_equal(out, x + y):
        raise SystemExit("wrong result")
    print(
        f"vector add, n={args.n}, BLOCK={args.block}, {grid[0]} programs: {best * 1e3:.1f} ms, "
        f"{12 * args.n / best / 1e9:.2f} GB/s"
    )


if __name__ == "__main__":
    main()
