"""benchmarks/gpu.py's energy table: tutorial 09's persistent descriptor matmul (`matmul_tma_persistent_kernel`)
of each compiler and torch.matmul, each run back to back for seconds at a time (`power.sustained`), in
alternating rounds: TFLOP per joule, TFLOP/s, the mean SM clock, and the share of the run the power cap held
the clock down. Where every column runs at the GPU's power limit, the TFLOP per joule is what orders them.
The configs are the two whose rows in `persistent_matmul_TFLOPs` run closest to Triton's, and 256x128x64: it moves
as many bytes from L2 into shared memory per FLOP as 128x256x64, on wgmma's m64n128 (whose shared-memory reads per
FLOP are 128x128x64's), so that the three rows apart say what each kind of traffic costs. On an H200 (8192^3, both
compilers alike) 256x128 cost 1.5-3.7% more joules per FLOP than 128x256, and 128x128 2-6% more than 256x128."""

from __future__ import annotations

import itertools
import math
import statistics
from types import ModuleType
from typing import Any

from gpu_dot import MATMUL_CONFIGS, SHORT, descriptor_cells
from power import Nvml, sustained
from timing import first_run, safe

COLUMNS = ("despina", "triton", "torch")
ENERGY_HEADER = ["config", *(f"{c} TFLOP/J" for c in COLUMNS), *(f"{c} TFLOP/s" for c in COLUMNS),
                 *(f"{c} MHz" for c in COLUMNS), *(f"{c} capped" for c in COLUMNS), "torch kernel"]
CONFIGS = [MATMUL_CONFIGS[1], MATMUL_CONFIGS[2], (256, 128, 64, 8, 3)]  # 128x256x64 s3, 128x128x64 s4, 256x128x64 s3


def _kernel_name(fn: Any) -> str:
    """The first kernel a call of `fn` runs (cuBLAS's, for torch.matmul), as the profiler names it."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
             and not e.name.startswith("Memset")]
    return names[0] if names else "none"


def persistent_energy(kernels: dict[str, ModuleType], quick: bool) -> list[list[Any]]:
    import torch

    nvml = Nvml(torch.cuda.current_device())
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    seconds, rounds = (1.0, 1) if quick else (2.5, 2)
    rows = []
    for dtype, size in itertools.product(("float16",) if quick else ("float16", "bfloat16"),
                                         (4096,) if quick else (4096, 8192)):
        a, b = (torch.randn((size, size), device="cuda", dtype=getattr(torch, dtype)) for _ in range(2))
        for config in CONFIGS[:1] if quick else CONFIGS:
            bm, bn, bk, warps, stages = config
            consts = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_SIZE_M": 8, "NUM_SMS": sms,
                      "WARP_SPECIALIZE": False}
            grid = (min(sms, math.ceil(size / bm) * math.ceil(size / bn)),)
            cells, _ = descriptor_cells(kernels, "matmul_tma_persistent_kernel", a, b, config, grid, consts)
            runs: list[Any] = [first_run(cell) for cell in cells]
            for _ in range(rounds):
                for (fn, _), got in zip(cells, runs):
                    if isinstance(got, list):
                        got.append(sustained(nvml, fn, 2.0 * size**3, seconds))
            means = [[statistics.mean(getattr(r, field) for r in got) if isinstance(got, list) else got
                      for got in runs] for field in ("tflop_per_j", "tflops", "sm_mhz", "capped")]
            rows.append([f"{SHORT[dtype]} {size}^3 {bm}x{bn}x{bk} w{warps} s{stages}", *itertools.chain(*means),
                         safe(lambda: _kernel_name(cells[-1][0]))])
    return rows
