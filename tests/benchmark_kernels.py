"""benchmarks/kernels.py as benchmarks/gpu.py loads it for despina (its Triton imports swapped): the very
kernels whose speed the GPU benchmark reports, for tests to compile, trace or run."""

from __future__ import annotations

import atexit
import importlib.util
import shutil
import tempfile
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load(workdir: Path | None = None) -> ModuleType:
    """The kernels module, written into `workdir` (a fresh temporary folder when None, removed at exit): each
    load makes kernel objects of its own, whose launchers no other test's launches have cached."""
    if workdir is None:
        workdir = Path(tempfile.mkdtemp(prefix="despina-bench-kernels-"))
        atexit.register(shutil.rmtree, workdir, True)
    spec = importlib.util.spec_from_file_location("despina_benchmark_gpu", BENCHMARKS / "gpu.py")
    assert spec is not None and spec.loader is not None
    gpu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu)
    return gpu.load_kernels("despina", workdir)
