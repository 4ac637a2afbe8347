"""PTX -> cubin by ptxas as a whole program, for kernels whose warpgroups trade registers (`setmaxnreg`).

nvJitLink assembles PTX as one compilation unit of a program it may link with others (ptxas' `--compile-only`),
and there ptxas ignores setmaxnreg ("C7504 ... 'setmaxnreg' ignored to maintain compatibility across compilation
units"): a warp-specialized kernel's producer could not give its registers to the consumers. ptxas run on its own
assembles the kernel as a whole program and honours it. `toolkit.find_ptxas` finds it (the `compiler` extra
installs the `nvidia-cuda-nvcc` wheel, which has one); without one a kernel keeps the code that needs no
setmaxnreg (`lower/specialize.rebalance`), and its metadata says why.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import tempfile
from pathlib import Path

from .link import LinkError
from .toolkit import find_ptxas

_VERSION = re.compile(r"\bV(\d+\.\d+\.\d+)")


@functools.cache
def version(path: str) -> str:
    """ptxas' version ("13.0.88"), from `ptxas --version`."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise LinkError(f"cannot run {path} --version: {exc}") from exc
    match = _VERSION.search(out)
    if match is None:
        raise LinkError(f"{path} --version does not say which version it is: {out.strip()[:200]!r}")
    return match.group(1)


def identity() -> str:
    """What a cache key names of the ptxas a compile would run: its version, "none", or "unusable" for one that
    does not say its version (a compile that needs it then fails with ptxas' own error)."""
    path = find_ptxas()
    if path is None:
        return "none"
    try:
        return version(path)
    except LinkError:
        return f"unusable: {path}"


def assemble(ptx: str, arch: str, name: str = "kernel.ptx", *, path: str) -> tuple[bytes, str]:
    """(cubin, info log) of `ptx` (file name `name`) for `arch` (e.g. `sm_90a`), assembled by the ptxas at `path`
    as a whole program, at -O3 with its verbose report (the info log `link.parse_info_log` reads)."""
    with tempfile.TemporaryDirectory(prefix="despina-ptxas-") as work:
        source, cubin = os.path.join(work, os.path.basename(name)), os.path.join(work, "kernel.cubin")
        Path(source).write_text(ptx)
        try:
            done = subprocess.run([path, f"-arch={arch}", "-O3", "-v", source, "-o", cubin], capture_output=True,
                                  text=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as exc:
            raise LinkError(f"ptxas ({path}) failed for {arch}: {exc}") from exc
        log = done.stdout + done.stderr
        if done.returncode != 0:
            raise LinkError(f"ptxas ({path}) failed for {arch}:\n{log}")
        return Path(cubin).read_bytes(), log
