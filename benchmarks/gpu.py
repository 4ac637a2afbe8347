"""Despina side by side with Triton and PyTorch on one GPU; prints tables and writes CSV.

    python benchmarks/gpu.py [--out DIR] [--quick]

The kernels come from `kernels.py`, written for Triton; Despina runs the same file with only its
imports changed. Every figure is timed by the same timer (`triton.testing.do_bench`, median) in
the same process, the columns of a row in alternating rounds (median of the rounds), so compare
ratios, not absolute numbers.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
ROUNDS = 5  # alternating timed rounds per row (one with --quick)


def load_kernels(flavor: str, workdir: Path) -> ModuleType:
    source = (HERE / "kernels.py").read_text()
    if flavor == "despina":
        source = source.replace("import triton\n", "import despina as triton\n")
        source = source.replace("import triton.language as tl", "import despina.language as tl")
    path = workdir / f"kernels_{flavor}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"kernels_{flavor}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def bench(fn: Callable[[], Any]) -> float:
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))


def failure(exc: Exception) -> str:
    """A failing cell's text: it is reported in the table, and the run goes on."""
    return f"error: {type(exc).__name__}: {str(exc).splitlines()[0][:80] if str(exc) else ''}"


def safe(fn: Callable[[], float]) -> float | str:
    try:
        return fn()
    except Exception as exc:
        return failure(exc)


Cell = tuple[Callable[[], Any], Callable[[], Any] | None]  # (the timed call, its check after one run)


def side_by_side(cells: list[Cell], value: Callable[[float], float], rounds: int) -> list[float | str]:
    """One row: each cell run and checked once, then timed in `rounds` alternating rounds (despina,
    triton, torch, despina, ...) so that drift in the GPU's clocks hits every column alike; each
    column's median round, through `value` (ms -> GB/s)."""
    times: list[list[float] | str] = []
    for run, check in cells:
        try:
            run()
            if check is not None:
                check()
            times.append([])
        except Exception as exc:
            times.append(failure(exc))
    for _ in range(rounds):
        for (run, _), column in zip(cells, times):
            if isinstance(column, list):
                column.append(bench(run))
    return [value(statistics.median(t)) if isinstance(t, list) else t for t in times]


def vector_add(kernels: dict[str, ModuleType], quick: bool) -> list[list[Any]]:
    import torch

    rows = []
    for exp in range(12, 29, 4 if quick else 2):
        n = 1 << exp
        x, y = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
        cells: list[Cell] = []
        for name in ("despina", "triton"):
            out = torch.empty_like(x)
            k = kernels[name].add_kernel
            grid = ((n + 1023) // 1024,)
            cells.append((lambda k=k, out=out: k[grid](x, y, out, n, BLOCK_SIZE=1024),
                          lambda out=out: torch.testing.assert_close(out, x + y)))
        cells.append((lambda: torch.add(x, y), None))
        rows.append([n, *side_by_side(cells, lambda ms: 3 * n * 4 / ms * 1e-6, 1 if quick else ROUNDS)])
    return rows


def _warps(block: int) -> int:
    return 4 if block <= 2048 else 8 if block <= 8192 else 16


def softmax(kernels: dict[str, ModuleType], quick: bool) -> list[list[Any]]:
    import torch

    rows = []
    for n_cols in (256, 1024, 4096, 16384):
        M = 4096
        x = torch.randn(M, n_cols, device="cuda")
        block = 1 << (n_cols - 1).bit_length()
        cells: list[Cell] = []
        for name in ("despina", "triton"):
            out = torch.empty_like(x)
            k = kernels[name].softmax_kernel
            cells.append((lambda k=k, out=out: k[(M,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=block,
                                                      num_warps=_warps(block)),
                          lambda out=out: torch.testing.assert_close(out, torch.softmax(x, dim=1))))
        cells.append((lambda: torch.softmax(x, dim=1), None))
        gbps = lambda ms: 2 * x.numel() * 4 / ms * 1e-6  # noqa: E731
        rows.append([f"{M}x{n_cols}", *side_by_side(cells, gbps, 1 if quick else ROUNDS)])
    return rows


def layer_norm(kernels: dict[str, ModuleType], quick: bool) -> list[list[Any]]:
    import torch

    rows = []
    for n in (1024, 4096, 16384):
        M = 4096
        x = torch.randn(M, n, device="cuda", dtype=torch.float16)
        w = torch.rand(n, device="cuda", dtype=torch.float16)
        b = torch.rand(n, device="cuda", dtype=torch.float16)
        block = 1 << (n - 1).bit_length()
        ref = torch.nn.functional.layer_norm(x, (n,), w, b, 1e-5)
        cells: list[Cell] = []
        for name in ("despina", "triton"):
            y = torch.empty_like(x)
            k = kernels[name].layer_norm_kernel
            cells.append((lambda k=k, y=y: k[(M,)](x, y, w, b, x.stride(0), n, 1e-5, BLOCK_SIZE=block,
                                                  num_warps=_warps(block)),
                          lambda y=y: torch.testing.assert_close(y, ref, atol=2e-2, rtol=2e-2)))
        cells.append((lambda: torch.nn.functional.layer_norm(x, (n,), w, b, 1e-5), None))
        gbps = lambda ms: (2 * x.numel() + 2 * n) * 2 / ms * 1e-6  # noqa: E731
        rows.append([f"{M}x{n}", *side_by_side(cells, gbps, 1 if quick else ROUNDS)])
    return rows


def launch_overhead(kernels: dict[str, ModuleType], quick: bool) -> list[list[Any]]:
    import torch

    x = torch.zeros(16, device="cuda")
    count = 2000 if quick else 20000

    def per_launch(fn: Callable[[], Any]) -> float:
        for _ in range(100):
            fn()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(count):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - start) / count * 1e6

    row: list[Any] = ["1-pointer kernel"]
    for name in ("despina", "triton"):
        k = kernels[name].tiny_kernel
        row.append(safe(lambda k=k: per_launch(lambda: k[(1,)](x))))
    row.append(safe(lambda: per_launch(lambda: x.add_(1))))
    return [row]


COMPILE_SNIPPET = """
import sys, time, importlib.util, torch
sys.path.insert(0, {workdir!r})
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
kernels = __import__("kernels_{flavor}")
x = torch.rand(4096, device="cuda"); out = torch.empty_like(x)
a = torch.randn(64, 64, device="cuda", dtype=torch.float16)
c = torch.empty(64, 64, device="cuda", dtype=torch.float16)
t0 = time.perf_counter()
kernels.add_kernel[(4,)](x, x, out, 4096, BLOCK_SIZE=1024); torch.cuda.synchronize()
t1 = time.perf_counter()
kernels.matmul_kernel[(2, 2)](a, a, c, 64, 64, 64, 64, 1, 64, 1, 64, 1, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
torch.cuda.synchronize()
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


def compile_times(workdir: Path, quick: bool) -> list[list[Any]]:
    rows = []
    for flavor in ("despina", "triton"):
        cache = tempfile.mkdtemp(prefix=f"{flavor}-cache-")
        env = dict(os.environ, DESPINA_CACHE_DIR=cache, TRITON_CACHE_DIR=cache)
        code = COMPILE_SNIPPET.format(workdir=str(workdir), flavor=flavor)
        results = []
        for _ in range(2):  # cold, then warm from the disk cache, each in a fresh process
            proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
            if proc.returncode != 0:
                results.append(f"error: {proc.stderr.strip().splitlines()[-1][:100] if proc.stderr.strip() else proc.returncode}")
                continue
            results.append([float(v) for v in proc.stdout.split()])
        cold, warm = results
        row: list[Any] = [flavor]
        row += cold if isinstance(cold, list) else [cold, cold]
        row.append(warm[0] if isinstance(warm, list) else warm)
        rows.append(row)
    return rows


MATMUL_CONFIGS = [(128, 128, 64, 8, 3), (128, 256, 64, 8, 3), (128, 128, 64, 8, 4), (128, 256, 64, 8, 4)]


def matmul(kernels: dict[str, ModuleType], quick: bool) -> list[list[Any]]:
    """The tutorial matmul, TFLOP/s; Triton's tensor-core path is mma.sync when DISABLE_MMA_V3=1 is
    set (the sm_80 comparison), wgmma otherwise. The last columns: despina's registers per thread
    and spills, read from its cubin, and Triton's."""
    import torch

    import despina

    rows = []
    for dtype in ("float16", "bfloat16"):
        for size in (4096,) if quick else (4096, 8192):
            for bm, bn, bk, warps, stages in MATMUL_CONFIGS[:2] if quick else MATMUL_CONFIGS:
                a = torch.randn((size, size), device="cuda", dtype=getattr(torch, dtype))
                b = torch.randn((size, size), device="cuda", dtype=getattr(torch, dtype))
                ref = torch.matmul(a, b).to(torch.float16)
                grid = (size // bm, size // bn)
                cells: list[Cell] = []
                for name in ("despina", "triton"):
                    c = torch.empty((size, size), device="cuda", dtype=torch.float16)
                    k = kernels[name].matmul_kernel
                    cells.append((lambda k=k, c=c: k[grid](a, b, c, size, size, size, size, 1, size, 1, size, 1,
                                                          BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=warps,
                                                          num_stages=stages),
                                  lambda c=c: torch.testing.assert_close(c, ref, rtol=2e-2, atol=0.25)))
                cells.append((lambda: torch.matmul(a, b), None))
                sig = f"*{'fp16' if dtype == 'float16' else 'bf16'}:16," * 2 + "*fp16:16," + ",".join(
                    ["i32:16"] * 4 + ["i32:1", "i32:16", "i32:1", "i32:16", "i32:1"])
                compiled = despina.compile(kernels["despina"].matmul_kernel, sig,
                                           {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}, num_warps=warps,
                                           num_stages=stages)
                flops = 2 * size**3
                times = side_by_side(cells, lambda ms: flops / ms * 1e-9, 1 if quick else ROUNDS)
                triton_kernel = cells[1][0]()  # Triton's launch returns its compiled kernel
                rows.append([f"{dtype[:4]} {size}^3 {bm}x{bn}x{bk} w{warps} s{stages}", *times,
                             compiled.metadata["registers"], compiled.metadata["spill_stores"],
                             getattr(triton_kernel, "n_regs", "?"), getattr(triton_kernel, "n_spills", "?")])
    return rows


TABLES: list[tuple[str, list[str], Callable[..., list[list[Any]]]]] = [
    ("vector_add_fp32_GBps", ["n", "despina", "triton", "torch"], vector_add),
    ("softmax_fp32_GBps", ["shape", "despina", "triton", "torch"], softmax),
    ("layer_norm_fp16_GBps", ["shape", "despina", "triton", "torch"], layer_norm),
    ("launch_overhead_us", ["kernel", "despina", "triton", "torch add_"], launch_overhead),
    ("matmul_TFLOPs", ["config", "despina", "triton", "torch", "regs", "spills", "triton regs", "triton spills"],
     matmul),
]


def show(name: str, header: list[str], rows: list[list[Any]], out: Path | None) -> None:
    print(f"\n{name}")
    print("  ".join(f"{h:>16}" for h in header + ["despina/triton"]))
    for row in rows:
        ratio = row[1] / row[2] if all(isinstance(v, float) for v in row[1:3]) and row[2] else ""
        cells = row + [ratio]
        print("  ".join(f"{v:>16.3f}" if isinstance(v, float) else f"{str(v)[:60]:>16}" for v in cells))
    if out is not None:
        with open(out / f"{name}.csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(header + ["despina/triton"])
            writer.writerows(row + [row[1] / row[2] if all(isinstance(v, float) for v in row[1:3]) and row[2] else ""]
                             for row in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if "OUT" in os.environ else None)
    parser.add_argument("--quick", action="store_true", help="fewer sizes and launches")
    parser.add_argument("--only", nargs="*", help="table names to run")
    args = parser.parse_args()
    import torch

    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  "
          f"DISABLE_MMA_V3={os.environ.get('DISABLE_MMA_V3', '')}")
    workdir = Path(tempfile.mkdtemp(prefix="despina-bench-"))
    kernels = {flavor: load_kernels(flavor, workdir) for flavor in ("despina", "triton")}
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    for name, header, fn in TABLES:
        if args.only and name not in args.only:
            continue
        show(name, header, fn(kernels, args.quick), args.out)
    if not args.only or "compile_time_s" in args.only:
        rows = compile_times(workdir, args.quick)
        print("\ncompile_time_s")
        print(textwrap.indent("\n".join(f"{r[0]:>8}: first kernel {r[1]}, second kernel {r[2]}, warm disk hit {r[3]}"
                                        for r in rows), "  "))
        if args.out is not None:
            with open(args.out / "compile_time_s.csv", "w", newline="") as f:
                csv.writer(f).writerows([["flavor", "first_kernel", "second_kernel", "warm_disk_hit"]] + rows)


if __name__ == "__main__":
    main()
