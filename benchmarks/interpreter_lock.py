"""The interpreter on programs that wait on each other: spin locks at 4096 programs.

    python benchmarks/interpreter_lock.py [--programs 4096] [--repeat 3]

Prints the wall time of two launches, best of `--repeat`: a kernel whose programs all take one
lock to add their block's sum into one total (the lock of Triton's tutorial 05), and the
layer-norm backward pass of examples/layer_norm.py on that many rows of 200 columns (256
locks). Each batch of programs starts as one vector, finds its programs waiting on each other
and runs them one at a time. The goal is at most 10 s on two cores.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import despina
import despina.language as tl

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@despina.jit(interpret=True)
def locked_sum(x, total, lock, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    v = tl.sum(tl.load(x + pid * BLOCK + tl.arange(0, BLOCK)), axis=0)
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    tl.store(total, tl.load(total) + v)
    tl.atomic_xchg(lock, 0)


def best_of(repeat: int, run: Callable[[], None]) -> float:
    run()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n = args.programs
    x = np.random.default_rng(0).integers(-100, 100, n * 16).astype(np.int32)
    total, lock = np.zeros(1, np.int32), np.zeros(1, np.int32)

    def lock_pattern() -> None:
        total[0] = 0
        locked_sum[(n,)](x, total, lock, BLOCK=16)
        if total[0] != x.sum():
            raise SystemExit("locked_sum: wrong total")

    os.environ["DESPINA_INTERPRET"] = "1"
    sys.path.insert(0, str(EXAMPLES))
    example = runpy.run_path(str(EXAMPLES / "layer_norm.py"))
    print(f"one lock, {n} programs: {best_of(args.repeat, lock_pattern):.2f} s")
    layer_norm = best_of(args.repeat, lambda: example["check_backward"](n, 200))
    print(f"layer-norm backward, {n} rows of 200 (256 locks), with the forward pass and the check: {layer_norm:.2f} s")


if __name__ == "__main__":
    main()
