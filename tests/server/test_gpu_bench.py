"""server/gpu_bench.py with the driver's memory calls on host memory and a launcher that accumulates in
NumPy: synthetic buffers are zeros, copies arrive whole, restored arguments are put back before every
launch, every allocation is freed, and a fault on the first launch is fatal before any timing."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pytest

N = 16


def test_measure_restores_before_every_launch_and_frees(monkeypatch: pytest.MonkeyPatch) -> None:
    from despina.runtime import driver, launcher
    from despina.runtime.errors import KernelFaultError
    from despina.server import execute, gpu

    memory: dict[int, Any] = {}
    freed: list[int] = []
    seen: list[np.ndarray] = []
    fail: dict[str, Exception] = {}

    def alloc(dev: Any, nbytes: int) -> int:
        block = ctypes.create_string_buffer(b"\xff" * max(nbytes, 1))  # not zeros: `clear` must zero it
        memory[ctypes.addressof(block)] = block
        return ctypes.addressof(block)

    monkeypatch.setattr(driver, "alloc", alloc)
    monkeypatch.setattr(driver, "free", lambda dev, pointer: freed.append(pointer))
    monkeypatch.setattr(driver, "clear", lambda pointer, n: ctypes.memset(pointer, 0, n))
    monkeypatch.setattr(driver, "copy_to_device", lambda dev, dst, src, n: ctypes.memmove(dst, src, n))
    monkeypatch.setattr(driver, "copy_on_device", lambda dev, dst, src, n: ctypes.memmove(dst, src, n))
    monkeypatch.setattr(driver, "synchronize", lambda: None)
    monkeypatch.setattr(driver, "version", lambda: 12080)

    def array(pointer: int) -> np.ndarray:
        return np.ctypeslib.as_array((ctypes.c_float * N).from_address(pointer))

    class Launcher:
        def __init__(self, function: Any, names: list[str], types: list[Any], metadata: Any = None) -> None:
            pass

        def launch(self, grid: tuple[int, int, int], values: dict[str, Any], stream: int) -> None:
            if "launch" in fail:
                raise fail["launch"]
            acc, x = array(values["acc"]), array(values["x"])
            seen.append(acc.copy())
            acc += x  # accumulates: without the restore, each run would see the last one's sum

    monkeypatch.setattr(launcher, "Launcher", Launcher)

    class Device:
        target, context, modules, name = "sm_90a", 1, {}, "host memory"

        def load(self, image: bytes, name: str, shared: int, num_warps: int) -> Any:
            return name

    executor = gpu.GpuExecutor(Device())
    acc = np.full(N, 3.0, np.float32)
    work = {"name": "acc_kernel", "image": b"cubin", "num_warps": 4, "shared": 0, "launch": {}, "grid": (1, 1, 1),
            "params": [("acc", "ptr<fp32>"), ("x", "ptr<fp32>"), ("n", "int32")],
            "args": [acc.tobytes(), {"zeros": 4 * N}, N], "bench": {"warmup_ms": 1, "rep_ms": 5, "restore": [0]}}
    result = executor.run(work)
    assert result["ms"] >= 0 and result["runs"] >= 1
    assert len(seen) >= 2 and all((s == 3.0).all() for s in seen)  # the copy, put back before each launch
    assert sorted(freed) == sorted(memory) and len(freed) == 3  # acc, its pristine copy, x

    seen.clear()
    work["args"] = [acc.tobytes(), acc.tobytes(), N]
    work["bench"] = {"warmup_ms": 0, "rep_ms": 1, "restore": []}
    executor.run(work)
    # Nothing restored: it accumulates, launch after launch (as many as 1 ms of timing runs: on a loaded box, 2)
    assert len(seen) >= 2 and [float(s[0]) for s in seen] == [3.0 * (i + 1) for i in range(len(seen))]

    fail["launch"] = KernelFaultError("CUDA fault", 700)
    with pytest.raises(execute.ExecuteFailure, match="kernel 'acc_kernel' faulted") as fault:
        executor.run(work)
    assert fault.value.fatal
