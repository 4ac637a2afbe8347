"""How benchmarks/gpu.py times a row: every column run and checked once, then timed by one timer
(`triton.testing.do_bench`, median) in alternating rounds; a failing cell is reported, not raised."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

ROUNDS = 5  # alternating timed rounds per row (one with --quick)

Cell = tuple[Callable[[], Any], Callable[[], Any] | None]  # (the timed call, its check after one run)


def bench(fn: Callable[[], Any]) -> float:
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))


def failure(exc: Exception) -> str:
    """A failing cell's text: it is reported in the table, and the run goes on. The error's first line,
    and its cause's when it has one (Triton's CompilationError says only where, its cause what)."""
    def first(e: BaseException) -> str:
        return next((line.strip() for line in str(e).splitlines() if line.strip()), "")[:100]
    text = f"error: {type(exc).__name__}: {first(exc)}"
    if exc.__cause__ is not None:
        text += f" ({type(exc.__cause__).__name__}: {first(exc.__cause__)})"
    return text


def safe(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as exc:
        return failure(exc)


def first_run(cell: Cell) -> list[float] | str:
    """A column's cell run and checked once: an empty list for its timings, or why it failed."""
    run, check = cell
    try:
        run()
        if check is not None:
            check()
    except Exception as exc:
        return failure(exc)
    return []


def side_by_side(cells: list[Cell], value: Callable[[float], float], rounds: int) -> list[float | str]:
    """One row: each cell run and checked once, then timed in `rounds` alternating rounds (despina,
    triton, torch, despina, ...) so that drift in the GPU's clocks hits every column alike; each
    column's median round, through `value` (ms -> GB/s)."""
    times = [first_run(cell) for cell in cells]
    for _ in range(rounds):
        for (run, _), column in zip(cells, times):
            if isinstance(column, list):
                column.append(bench(run))
    return [value(statistics.median(t)) if isinstance(t, list) else t for t in times]
