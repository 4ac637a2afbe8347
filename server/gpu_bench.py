"""One config of a tuning measured in the GPU worker (server/gpu.py calls `measure` for a job that
has "bench"): the arguments made on the GPU once (a copy of the client's buffer, or zeros), a first
launch (a fault shows here, before any timing), then as Triton's do_bench: warm-up launches for
`warmup_ms`, and launches for `rep_ms` each timed alone (launch to synchronize); the median in ms.

Arguments named in "restore" get their first contents back before every launch (a device-to-device
copy outside the timed span), so that a kernel that accumulates into them sees the same input on
every run, as the client's restore_value and reset_to_zero promise.
"""

from __future__ import annotations

import ctypes
import statistics
import time
from typing import Any

MAX_RUNS = 1000


def measure(device: Any, launcher: Any, job: dict[str, Any], allocated: list[tuple[int, int]]) -> dict[str, Any]:
    from despina.runtime import driver

    bench = job["bench"]
    restore = set(bench.get("restore") or ())
    values: dict[str, Any] = {}
    pristine: list[tuple[int, int, int]] = []  # (pointer, copy, nbytes) put back before every launch
    for i, ((param, _), value) in enumerate(zip(job["params"], job["args"])):
        if isinstance(value, (dict, bytes, bytearray)):
            nbytes = int(value["zeros"]) if isinstance(value, dict) else len(value)
            pointer = driver.alloc(device, nbytes)
            allocated.append((pointer, nbytes))
            if isinstance(value, dict):
                if nbytes:
                    driver.clear(pointer, nbytes)
            elif nbytes:
                source = ctypes.c_char_p(bytes(value))
                driver.copy_to_device(device, pointer, ctypes.cast(source, ctypes.c_void_p).value or 0, nbytes)
            if i in restore and nbytes:
                copy = driver.alloc(device, nbytes)
                allocated.append((copy, nbytes))
                driver.copy_on_device(device, copy, pointer, nbytes)
                pristine.append((pointer, copy, nbytes))
            values[param] = pointer
        else:
            values[param] = value
    grid = tuple(job["grid"])

    def run() -> float:
        for pointer, copy, nbytes in pristine:
            driver.copy_on_device(device, pointer, copy, nbytes)
        if pristine:
            driver.synchronize()
        start = time.perf_counter()
        launcher.launch(grid, values, 0)
        driver.synchronize()
        return (time.perf_counter() - start) * 1000.0

    first = time.perf_counter()
    estimate = max(run(), 1e-3)
    for _ in range(min(100, int(float(bench.get("warmup_ms", 25.0)) / estimate))):
        run()
    times = [run() for _ in range(max(1, min(MAX_RUNS, int(float(bench.get("rep_ms", 100.0)) / estimate))))]
    return {"ms": statistics.median(times), "runs": len(times), "seconds": time.perf_counter() - first}

