"""Remote execution: run a kernel on the daemon's GPU with the caller's buffers.

Design: a GPU worker process (spawned like the compile workers, one per device) owns the CUDA
context; the daemon sends it (cubin, grid, arguments) and gets the buffers back. A fault (an
illegal address, any sticky CUDA error) or a time-out kills only that process, which the daemon
replaces, so the next request gets a fresh context. That worker needs despina's GPU runtime
(`despina.runtime`) and a CUDA device; on a host without them Execute answers UNIMPLEMENTED.
"""

from __future__ import annotations

import importlib.util
import os


def unavailable_reason() -> str:
    """Why this daemon cannot execute kernels."""
    if not os.path.exists("/dev/nvidiactl"):
        return "this daemon's host has no NVIDIA GPU (no /dev/nvidiactl); use Compile and launch the cubin locally"
    if importlib.util.find_spec("despina.runtime") is None:
        return "this daemon has no GPU runtime (despina.runtime is not installed); use Compile and launch locally"
    return "remote execution is not available in this version of the daemon; use Compile and launch locally"
