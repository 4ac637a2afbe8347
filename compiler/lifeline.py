"""Worker processes that die with the process that started them.

A worker (the daemon's compile and GPU workers, the client's LLVM worker) must not outlive its
parent: a SIGKILLed daemon would otherwise leave its workers compiling, re-parented to pid 1. Two
checks, because each misses a case of the other:

- the parent-death signal (Linux `prctl(PR_SET_PDEATHSIG, SIGKILL)`): immediate, even while the
  worker is inside C code holding the GIL; but it follows the parent *thread* that started the
  worker, so it is asked for only where that thread lives as long as the process (`main_thread`);
- a lifeline pipe: the parent holds the write end and never writes; a thread in the worker blocks
  reading the other end and ends the process when it reads end-of-file, which happens when every
  copy of the write end is closed, that is when the parent has exited, however it exited.

    read_end, write_end = os.pipe()           # the parent keeps write_end open while the worker runs
    ... start the worker with read_end ...    # in the worker, first thing:
    hold(read_end, parent_pid, pdeathsig=True, memory_bytes=4 << 30)

This module imports only the standard library: the LLVM worker loads it as a script's neighbour.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

PR_SET_PDEATHSIG = 1


def main_thread() -> bool:
    """Whether the calling thread is the main one: the only thread a parent-death signal may follow."""
    return threading.current_thread() is threading.main_thread()


def _pdeathsig() -> None:
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # no prctl: the lifeline pipe stands alone
        pass


def _watch(fd: int) -> None:
    try:
        while os.read(fd, 1):
            pass
    except OSError:
        pass
    os._exit(70)  # the parent is gone: nobody is left to take this worker's answer


def limit_memory(nbytes: int) -> None:
    """Cap this process's address space (RLIMIT_AS) at `nbytes`; 0 leaves it as it is. Past it,
    allocations fail (MemoryError in Python) instead of the host swapping or the OOM killer choosing."""
    if nbytes <= 0:
        return
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = nbytes if hard == resource.RLIM_INFINITY else min(nbytes, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def hold(fd: int, parent: int, pdeathsig: bool = False) -> None:
    """In a worker, first thing: end this process when `parent` dies. `fd` is the read end of the
    lifeline pipe; `pdeathsig` also asks the kernel to SIGKILL this process when the parent thread
    that started it exits (Linux)."""
    if pdeathsig:
        _pdeathsig()
    if os.getppid() != parent:  # the parent died before the signal was asked for
        os._exit(70)
    threading.Thread(target=_watch, args=(fd,), name="despina-lifeline", daemon=True).start()
