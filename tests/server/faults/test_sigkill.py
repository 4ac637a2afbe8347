"""SIGKILL of a real `despina serve` in the middle of its work: compiles running, entries being written,
a kernel on the GPU worker. Nothing it started outlives it by 2 s, and a daemon restarted on its disk
cache serves every kernel it had answered, intact."""

from __future__ import annotations

import base64
import os
import signal
import threading
import time
from pathlib import Path

import httpx
import numpy as np

from ..conftest import Daemon, unique
from ..kernels import vector_add_ir

FAKE_GPU = "server.fake_gpu:open_executor"
QUICK = 24


def children(pid: int) -> set[int]:
    """Every process descended from `pid`, from /proc."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(line.startswith("State:") and "Z" in line for line in f)
    except FileNotFoundError:
        return False


def spin_body() -> dict[str, object]:
    """An Execute whose kernel never returns on the fake GPU: its worker is busy when the daemon dies."""
    buf = {"data": base64.b64encode(np.zeros(64, np.float32).tobytes()).decode(), "dtype": "fp32", "shape": [64]}
    ir = base64.b64encode(vector_add_ir(name="spin_kernel", salt=unique())).decode()
    return {"kernel": {"ir": ir}, "grid": [1], "args": [{"buffer": buf}] * 3 + [{"int_value": 64}]}


def test_sigkill_mid_write_leaves_no_worker_and_no_torn_entry(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    d = Daemon(tmp_path, workers=2, cache_dir=cache, extra=("--executor", FAKE_GPU, "--execute-timeout-s", "120"))
    answered: dict[bytes, str] = {}
    irs = [vector_add_ir(salt=unique(), fake_sleep=0.02) for _ in range(QUICK)]
    stop = threading.Event()

    def compile_all() -> None:
        with httpx.Client(base_url=d.http, timeout=30) as http:
            for ir in irs:
                if stop.is_set():
                    return
                try:
                    r = http.post("/v1/compile", json={"ir": base64.b64encode(ir).decode()})
                except httpx.HTTPError:
                    return
                if r.status_code == 200:
                    answered[ir] = r.json()["digest"]

    def spin() -> None:
        try:
            httpx.post(d.http + "/v1/execute", json=spin_body(), timeout=30)
        except httpx.HTTPError:
            pass

    threads = [threading.Thread(target=spin), threading.Thread(target=compile_all)]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 20
        while (len(answered) < QUICK // 2 or len(children(d.proc.pid)) < 3) and time.monotonic() < deadline:
            time.sleep(0.01)
        started = children(d.proc.pid)
        os.kill(d.proc.pid, signal.SIGKILL)  # mid-load: compiles answering, entries being written
        d.proc.wait()
        stop.set()
        assert len(started) >= 3  # two compile workers and the GPU worker, at least
        time.sleep(2)
        assert [p for p in started if alive(p)] == []
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        d.stop()
    again = Daemon(tmp_path, workers=1, cache_dir=cache)
    try:
        with httpx.Client(base_url=again.http, timeout=30) as http:
            for ir, digest in answered.items():
                r = http.post("/v1/compile", json={"ir": base64.b64encode(ir).decode()})
                assert r.status_code == 200 and r.json()["digest"] == digest and r.json()["tier"] == "disk"
    finally:
        again.stop()
