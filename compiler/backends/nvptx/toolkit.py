"""Where the NVIDIA files that the backend can use but does not need live: nvdisasm (SASS), libdevice
(fp64 math, `pow`, precise `erf`) and ptxas (whole-program assembly, for setmaxnreg: `ptxas.py`).

Each is looked for, in order: the environment variable that names it (`DESPINA_NVDISASM`,
`DESPINA_LIBDEVICE`, `DESPINA_PTXAS`; set to an empty string to do without), the NVIDIA wheels in this
Python (`nvidia-cuda-nvdisasm`, `nvidia-nvvm`, `nvidia-cuda-nvcc`), the `PATH` for the executables,
`CUDA_HOME` / `CUDA_PATH`, and `/usr/local/cuda`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path

CUDA_ROOT = Path("/usr/local/cuda")
LIBDEVICE_PREFIX = "__nv_"
NVDISASM_HINT = "install the nvidia-cuda-nvdisasm wheel (`pip install nvidia-cuda-nvdisasm`)"
LIBDEVICE_HINT = "install the nvidia-nvvm wheel (`pip install nvidia-nvvm`)"
PTXAS_HINT = "install the nvidia-cuda-nvcc wheel (`pip install nvidia-cuda-nvcc`) or set DESPINA_PTXAS"


def _pathfinder(name: str) -> Callable[[str], str | None] | None:
    try:
        import cuda.pathfinder as pathfinder
    except ImportError:
        return None
    return getattr(pathfinder, name, None)


def _first(env: str, candidates: list[str | None]) -> str | None:
    override = os.environ.get(env)
    if override is not None:
        return override if override and Path(override).is_file() else None
    return next((c for c in candidates if c and Path(c).is_file()), None)


def _cuda_homes() -> list[Path]:
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    return [Path(h) for h in homes if h] + [CUDA_ROOT]


def _pathfinder_result(function: str, arg: str) -> str | None:
    find = _pathfinder(function)
    if find is None:
        return None
    try:
        return find(arg)
    except Exception:  # a pathfinder that cannot search this system finds nothing
        return None


@lru_cache(maxsize=1)
def find_nvdisasm() -> str | None:
    """The nvdisasm executable, or None."""
    candidates = [_pathfinder_result("find_nvidia_binary_utility", "nvdisasm"), shutil.which("nvdisasm")]
    candidates += [str(home / "bin" / "nvdisasm") for home in _cuda_homes()]
    return _first("DESPINA_NVDISASM", candidates)


def _nvidia_wheel_binary(name: str) -> str | None:
    """`name` in an NVIDIA wheel's `nvidia/cu*/bin`, found without importing cuda-pathfinder (a cache key
    names the ptxas a compile would run, and computing one imports nothing heavy)."""
    spec = find_spec("nvidia")
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    found = [str(p) for root in roots for p in sorted(Path(root).glob(f"cu*/bin/{name}"), reverse=True)]
    return found[0] if found else None


@lru_cache(maxsize=1)
def find_ptxas() -> str | None:
    """The ptxas executable, or None."""
    candidates = [_nvidia_wheel_binary("ptxas"), shutil.which("ptxas")]
    candidates += [str(home / "bin" / "ptxas") for home in _cuda_homes()]
    return _first("DESPINA_PTXAS", candidates)


@lru_cache(maxsize=1)
def find_libdevice() -> str | None:
    """libdevice.10.bc, or None."""
    candidates = [_pathfinder_result("find_bitcode_lib", "device")]
    candidates += [str(home / "nvvm" / "libdevice" / "libdevice.10.bc") for home in _cuda_homes()]
    return _first("DESPINA_LIBDEVICE", candidates)
