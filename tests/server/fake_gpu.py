"""Stand-ins for Execute's GPU executor (server/gpu.py), run by the daemon's real GPU worker process
(`ServiceConfig.executor` / `despina serve --executor`), so that the worker protocol, its time-outs
and its crashes are tested on CPU-only machines.

`open_executor` steers each run by the kernel's name:

    add_kernel    out[:n] = x[:n] + y[:n] in NumPy (fp32 pointers x, y, out and an int n), as the GPU would
    spin_kernel   never returns (the daemon's time-out kills the worker)
    crash_kernel  the worker process exits with status 3 mid-run (os._exit)
    fault_kernel  a sticky CUDA fault: reported as the real executor reports it, then the worker exits
    refuse_kernel a launch the GPU refuses (FAILED_PRECONDITION); the worker stays
    anything else every buffer comes back unchanged

A tuning's benchmark job (one with "bench") measures 1/num_warps ms, so that the config with the most
warps wins (`tune_budget_kernel` adds rep_ms / 100,000, which shows each run's budget); for `tune_fault_kernel`, 2 warps fault (sticky, the worker exits) and 1 warp crashes the
worker. With FAKE_GPU_BENCH_LOG set (the daemon's environment), each measurement appends its warps to that file: the
order in which the daemon measured its configs.

`no_device` is a host without a GPU; `broken` is an executor that fails to open for another reason.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from despina.server.execute import ExecuteFailure, NoDevice

NAME = "Fake GPU 80GB"


class FakeExecutor:
    info = {"target": "sm_90a", "driver_version": 0, "device": "device 0 (a fake GPU)", "name": NAME}

    def run(self, job: dict[str, Any]) -> dict[str, Any]:
        name = job["name"]
        assert job["image"] and job["num_warps"] >= 1 and len(job["grid"]) == 3
        if "bench" in job:
            return self.bench(job)
        buffers = [bytes(a) for a in job["args"] if isinstance(a, bytes)]
        if name == "spin_kernel":
            while True:
                time.sleep(1)
        if name == "crash_kernel":
            os._exit(3)
        if name == "fault_kernel":
            raise ExecuteFailure("ABORTED", f"kernel '{name}' faulted on the daemon's GPU (a fake GPU): "
                                 "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access", fatal=True)
        if name == "refuse_kernel":
            raise ExecuteFailure("FAILED_PRECONDITION", f"kernel '{name}' cannot launch on the daemon's GPU: "
                                 "too many threads")
        if name == "add_kernel":
            types = [t for _, t in job["params"]]
            assert types[:3] == ["ptr<fp32>"] * 3 and types[3].startswith("int"), types
            x, y, out = (np.frombuffer(b, np.float32).copy() for b in buffers)
            n = int(job["args"][3])
            out[:n] = x[:n] + y[:n]
            buffers[2] = out.tobytes()
        return {"buffers": buffers, "seconds": 1e-4, "pid": os.getpid()}


    def bench(self, job: dict[str, Any]) -> dict[str, Any]:
        name, warps = job["name"], job["num_warps"]
        for (_, ty), a in zip(job["params"], job["args"]):
            assert isinstance(a, (bytes, dict, int, float)), a
            assert not isinstance(a, dict) or (ty.startswith("ptr<") and a["zeros"] >= 0), (ty, a)
        if name == "tune_fault_kernel" and warps == 2:
            raise ExecuteFailure("ABORTED", f"kernel '{name}' faulted on the daemon's GPU (a fake GPU): "
                                 "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access", fatal=True)
        if name == "tune_fault_kernel" and warps == 1:
            os._exit(3)
        if log := os.environ.get("FAKE_GPU_BENCH_LOG"):
            with open(log, "a") as f:
                f.write(f"{warps}\n")
        extra = float(job["bench"]["rep_ms"]) / 1e5 if name == "tune_budget_kernel" else 0.0
        return {"ms": 1.0 / warps + extra, "runs": 1, "seconds": 1e-4, "pid": os.getpid()}


def open_executor() -> FakeExecutor:
    return FakeExecutor()


def no_device() -> FakeExecutor:
    raise NoDevice("no CUDA device: cuInit failed (CUDA_ERROR_NO_DEVICE) [fake]")


def broken() -> FakeExecutor:
    raise RuntimeError("the device is busy [fake]")
