"""The daemon's memory goes back to the system after a burst of large requests.

    settle()                                   # once, when the daemon has started
    task = asyncio.ensure_future(reclaim())    # for as long as it serves

A refused request's exception keeps its frames alive through its traceback, and they the request's
bytes, in reference cycles that only a full garbage collection frees; CPython starts one when enough
objects have been made, not bytes, so a stream of 8 MB decode bombs piled up (1.9 GB for six attackers).
`settle` moves everything start-up made (modules, schemas, the app) out of the collector's sight
(`gc.freeze`), so that a full collection costs well under a millisecond instead of ~20 ms, and
`reclaim` runs one every second. On glibc it also fixes the threshold above which malloc maps memory
of its own (1 MiB; by default it rises with the largest block freed, so 8 MB buffers came from heaps
that kept them), and hands back the heaps' free pages (`malloc_trim`) after each collection.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
from typing import Any

_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1 << 20


def _libc() -> Any:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def settle() -> None:
    gc.collect()
    gc.freeze()
    libc = _libc()
    if libc is not None:
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)


async def reclaim(interval_s: float = 1.0) -> None:
    libc = _libc()
    while True:
        await asyncio.sleep(interval_s)
        if gc.collect() and libc is not None:
            await asyncio.to_thread(libc.malloc_trim, 0)
