"""Benchmark helpers: `do_bench` and `perf_report`, with Triton's signatures."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any


def _cuda_sync() -> Callable[[], None] | None:
    try:
        import torch
    except ImportError:
        return None
    return torch.cuda.synchronize if torch.cuda.is_available() else None


def do_bench(fn: Callable[[], Any], warmup: int = 25, rep: int = 100, grad_to_none: Any = None,
             quantiles: Sequence[float] | None = None, return_mode: str = "mean") -> Any:
    """Milliseconds per call of `fn`: `warmup` and `rep` are time budgets in ms, as in Triton.
    Returns the mean (or `return_mode` "min"/"max"/"median"), or the requested quantiles."""
    sync = _cuda_sync() or (lambda: None)
    fn()
    sync()
    start = time.perf_counter()
    fn()
    sync()
    estimate_ms = max((time.perf_counter() - start) * 1000.0, 1e-3)
    for _ in range(max(0, min(100, int(warmup / estimate_ms)))):
        fn()
    sync()
    times = []
    for _ in range(max(1, min(1000, int(rep / estimate_ms)))):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1000.0)
    if quantiles is not None:
        ordered = sorted(times)
        result = [ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in quantiles]
        return result[0] if len(result) == 1 else result
    modes: dict[str, Callable[[list[float]], float]] = {
        "mean": statistics.fmean, "min": min, "max": max, "median": statistics.median,
    }
    if return_mode not in modes:
        raise ValueError(f"return_mode must be one of {', '.join(modes)}, got {return_mode!r}")
    return modes[return_mode](times)


class Benchmark:
    """One table of a `perf_report`: x values by lines, as in Triton."""

    def __init__(self, x_names: Sequence[str], x_vals: Sequence[Any], line_arg: str, line_vals: Sequence[Any],
                 line_names: Sequence[str], plot_name: str, args: dict[str, Any] | None = None, ylabel: str = "",
                 xlabel: str = "", styles: Any = None, x_log: bool = False, y_log: bool = False) -> None:
        self.x_names = list(x_names)
        self.x_vals = list(x_vals)
        self.line_arg = line_arg
        self.line_vals = list(line_vals)
        self.line_names = list(line_names)
        self.plot_name = plot_name
        self.args = dict(args or {})
        self.ylabel = ylabel


class _Report:
    def __init__(self, fn: Callable[..., Any], benchmarks: Sequence[Benchmark]) -> None:
        self.fn = fn
        self.benchmarks = benchmarks

    def run(self, print_data: bool = True, save_path: str | None = None, **kwargs: Any) -> list[list[list[Any]]]:
        tables = []
        for bench in self.benchmarks:
            rows = []
            for x in bench.x_vals:
                xs = x if isinstance(x, (list, tuple)) else [x] * len(bench.x_names)
                point = dict(zip(bench.x_names, xs))
                row = list(xs[: len(bench.x_names)])
                for line in bench.line_vals:
                    value = self.fn(**point, **{bench.line_arg: line}, **bench.args, **kwargs)
                    row.append(value[0] if isinstance(value, tuple) else value)
                rows.append(row)
            header = bench.x_names + bench.line_names
            if print_data:
                print(bench.plot_name + ":")
                print("  ".join(f"{h:>14}" for h in header))
                for row in rows:
                    print("  ".join(f"{v:>14.4g}" if isinstance(v, float) else f"{v!s:>14}" for v in row))
            if save_path is not None:
                import csv
                import os

                with open(os.path.join(save_path, f"{bench.plot_name}.csv"), "w", newline="") as f:
                    writer = csv.writer(f)
                    writer.writerow(header)
                    writer.writerows(rows)
            tables.append(rows)
        return tables


def perf_report(benchmarks: Benchmark | Sequence[Benchmark]) -> Callable[[Callable[..., Any]], _Report]:
    """Decorate a benchmark function of (x names..., line_arg) returning a number; `.run()` prints a table."""
    benches = [benchmarks] if isinstance(benchmarks, Benchmark) else list(benchmarks)
    return lambda fn: _Report(fn, benches)
