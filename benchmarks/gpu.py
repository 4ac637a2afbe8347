"""Despina side by side with Triton and PyTorch on one GPU; prints tables and writes CSV.

    python benchmarks/gpu.py [--out DIR] [--quick] [--only TABLE ...] [--target sm_90]

The kernels come from `kernels.py`, written for Triton; Despina runs the same file with only its
imports changed. Every figure is timed by the same timer (`triton.testing.do_bench`, median) in
the same process, the columns of a row in alternating rounds (median of the rounds), so compare
ratios, not absolute numbers.

Despina compiles for the GPU's own target (sm_90a on an H100: wgmma), or for `--target`; with
DISABLE_MMA_V3=1 (Triton's mma.sync path) the default is the GPU's target without its architecture-
specific features (sm_90 on an H100: mma.sync, as on sm_80), so that both columns are mma.sync code.
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
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gpu_dot import (  # noqa: E402
    FP8_CONFIGS,
    INT8_CONFIGS,
    MATMUL_CONFIGS,
    MATMUL_HEADER,
    TF32_CONFIGS,
    attention,
    attention_tma,
    matmul,
    persistent_matmul,
    pointer_persistent_matmul,
    ragged_matmul,
    tma_matmul,
)
from gpu_energy import ENERGY_HEADER, persistent_energy  # noqa: E402
from timing import ROUNDS, Cell, safe, side_by_side  # noqa: E402

__all__ = ["FP8_CONFIGS", "INT8_CONFIGS", "MATMUL_CONFIGS", "TF32_CONFIGS", "load_kernels"]  # what the CPU tests trace


def load_kernels(flavor: str, workdir: Path) -> ModuleType:
    source = (HERE / "kernels.py").read_text()
    if flavor == "despina":
        source = source.replace("import triton\n", "import despina as triton\n")
        source = source.replace("import triton.language as tl", "import despina.language as tl")
        source = source.replace("from triton.tools.", "from despina.tools.")
    path = workdir / f"kernels_{flavor}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"kernels_{flavor}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


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
import sys, time, torch
sys.path.insert(0, {workdir!r})
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
t0 = time.perf_counter()
kernels = __import__("kernels_{flavor}")
t1 = time.perf_counter()
{retarget}
a = torch.randn(512, 512, device="cuda", dtype=torch.float16); c = torch.empty_like(a)
{launch}
torch.cuda.synchronize()
print(t1 - t0, time.perf_counter() - t1)
"""
# What each compile-time row launches (BLOCK_M x BLOCK_N, BLOCK_K 64, 8 warps, 3 stages, fp16): the tutorial
# matmul, and tutorial 09's persistent descriptor kernel as written and warp-specialized.
COMPILE_CASES = {
    f"matmul {bm}x{bn}x64 w8 s3": f"""kernels.matmul_kernel[(512 // {bm}, 512 // {bn})](a, a, c, 512, 512, 512, 512, 1, 512, 1,
    512, 1, BLOCK_M={bm}, BLOCK_N={bn}, BLOCK_K=64, num_warps=8, num_stages=3)"""
    for bm, bn in ((128, 128), (128, 256))
} | {
    f"persistent 128x128x64 w8 s3{' ws' if ws else ''}": f"""d = [kernels.TensorDescriptor.from_tensor(a, b) for b in ([128, 64],
    [128, 64], [128, 128])]
kernels.matmul_tma_persistent_kernel[(16,)](*d, 512, 512, 512, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_SIZE_M=8,
    NUM_SMS=16, WARP_SPECIALIZE={ws}, num_warps=8, num_stages=3)"""
    for ws in (False, True)
}
TARGET: list[str] = []  # Despina's compile target when not the GPU's own (set by main)


def _fresh_process(code: str, env: dict[str, str]) -> list[float] | str:
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        return f"error: {proc.stderr.strip().splitlines()[-1][:100] if proc.stderr.strip() else proc.returncode}"
    return [float(v) for v in proc.stdout.split()]


def compile_times(kernels: dict[str, ModuleType], quick: bool) -> list[list[Any]]:
    """Seconds to import the kernels' file (the compiler's package with it) and to compile, load and
    run each of `COMPILE_CASES` in a fresh process, with an empty cache (cold) and again from the disk
    cache the cold run filled (warm); the median of 3 fresh processes (1 with --quick)."""
    workdir = Path(str(kernels["despina"].__file__)).parent  # where load_kernels wrote both flavors' files
    samples: dict[tuple[str, str], list[float | str]] = {}
    for flavor in ("despina", "triton"):
        for case, (config, launch) in enumerate(COMPILE_CASES.items()):
            for n in range(1 if quick else 3):
                cache = workdir / f"{flavor}-cache-{case}-{n}"  # empty for the cold run, which fills it
                cache.mkdir()
                env = dict(os.environ, DESPINA_CACHE_DIR=str(cache), TRITON_CACHE_DIR=str(cache))
                code = COMPILE_SNIPPET.format(workdir=str(workdir), flavor=flavor, launch=launch, retarget=(
                    f"import despina.runtime.driver as d; d.target_for = lambda capability: {TARGET[0]!r}"
                    if flavor == "despina" and TARGET else ""))
                for when in ("cold", "warm"):
                    got = _fresh_process(code, env)
                    if when == "cold":
                        samples.setdefault((flavor, "import"), []).append(got if isinstance(got, str) else got[0])
                    samples.setdefault((flavor, f"{config} {when}"), []).append(
                        got if isinstance(got, str) else got[1])
    rows = []
    for what in dict.fromkeys(w for _, w in samples):
        row: list[Any] = [what]
        for flavor in ("despina", "triton"):
            values = samples[(flavor, what)]
            numbers = [v for v in values if isinstance(v, float)]
            row.append(statistics.median(numbers) if len(numbers) == len(values) else next(
                v for v in values if isinstance(v, str)))
        rows.append(row)
    return rows


TABLES: list[tuple[str, list[str], Callable[..., list[list[Any]]]]] = [
    ("vector_add_fp32_GBps", ["n", "despina", "triton", "torch"], vector_add),
    ("softmax_fp32_GBps", ["shape", "despina", "triton", "torch"], softmax),
    ("layer_norm_fp16_GBps", ["shape", "despina", "triton", "torch"], layer_norm),
    ("launch_overhead_us", ["kernel", "despina", "triton", "torch add_"], launch_overhead),
    ("matmul_TFLOPs", MATMUL_HEADER, matmul),
    ("tma_matmul_TFLOPs", MATMUL_HEADER, tma_matmul),
    ("persistent_matmul_TFLOPs", MATMUL_HEADER, persistent_matmul),
    ("pointer_persistent_matmul_TFLOPs", MATMUL_HEADER, pointer_persistent_matmul),
    ("ragged_matmul_TFLOPs", MATMUL_HEADER, ragged_matmul),
    ("persistent_matmul_TFLOP_per_J", ENERGY_HEADER, persistent_energy),
    ("attention_tma_TFLOPs", ["case", *MATMUL_HEADER[1:]], attention_tma),
    ("attention_TFLOPs", ["case", *MATMUL_HEADER[1:]], attention),
    ("compile_time_s", ["what", "despina", "triton"], compile_times),
]


def retarget(target: str) -> None:
    """Despina compiles every launch of this process (and of compile_time_s's) for `target`: the
    launcher asks `driver.target_for` for the device's."""
    from despina.runtime import driver

    driver.target_for = lambda capability: target
    TARGET[:] = [target]


def show(name: str, header: list[str], rows: list[list[Any]], out: Path | None) -> None:
    print(f"\n{name}")
    first = max([len(header[0])] + [len(str(row[0])) for row in rows])
    print(f"{header[0]:>{first}}  " + "  ".join(f"{h:>16}" for h in header[1:] + ["despina/triton"]))
    for row in rows:
        ratio = row[1] / row[2] if all(isinstance(v, float) for v in row[1:3]) and row[2] else ""
        cells = row[1:] + [ratio]
        print(f"{row[0]!s:>{first}}  " + "  ".join(f"{v:>16.3f}" if isinstance(v, float) else f"{str(v)[:60]:>16}"
                                                  for v in cells))
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
    parser.add_argument("--target", help="Despina's compile target instead of the GPU's own (default: sm_90 on "
                        "an H100 when DISABLE_MMA_V3=1 makes Triton use mma.sync)")
    args = parser.parse_args()
    import torch

    major, minor = torch.cuda.get_device_capability()
    target = args.target or (f"sm_{major}{minor}" if os.environ.get("DISABLE_MMA_V3", "") not in ("", "0") else None)
    if target:
        retarget(target)
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  "
          f"DISABLE_MMA_V3={os.environ.get('DISABLE_MMA_V3', '')}  despina target: {target or 'as the device'}")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="despina-bench-") as workdir:
        kernels = {flavor: load_kernels(flavor, Path(workdir)) for flavor in ("despina", "triton")}
        for name, header, fn in TABLES:
            if args.only and name not in args.only:
                continue
            show(name, header, fn(kernels, args.quick), args.out)


if __name__ == "__main__":
    main()
