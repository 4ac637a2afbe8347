"""What the service benchmarks share: redis-server and `despina serve` processes on loopback, and a kernel
to send them (service.py, cluster.py).

    redis = RedisServer.start(workdir)                   # None without redis-server on PATH
    daemons = start_daemons(4, redis.url, workers=1)     # started together, each healthy on return
    daemons[0].stats()["compiles"]                       # GET /v1/stats
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from despina.compiler.ir.builder import Builder
from despina.compiler.ir.core import Block, Function, Module
from despina.compiler.ir.types import PointerType, float32, int32

ROOT = Path(__file__).resolve().parents[1]
# The tests' stand-in for the NVPTX backend (tests/server/fake_backend.py): module attributes steer it
# (`fake_sleep` seconds per compile); the daemon imports it with tests/ on its PYTHONPATH.
FAKE_COMPILER = "server.fake_backend:compile_module"


def vector_add(salt: str, block: int = 1024, **attrs: Any) -> Module:
    """out[i] = x[i] + y[i]; each `salt` (and each set of `attrs`) is a kernel no cache has seen."""
    p = PointerType(float32)
    names = ["x", "y", "out", "n"]
    fn = Function("add_kernel", Block([p, p, p, int32], names), names, kernel=True)
    x, y, out, n = fn.args
    b = Builder(fn.body)
    start = b.value("mul", [b.value("program_id", axis=0), b.constant(block, int32)])
    offs = b.value("add", [b.value("splat", [start], shape=[block]), b.value("arange", start=0, end=block)])
    mask = b.value("cmp", [offs, b.value("splat", [n], shape=[block])], pred="lt")
    loaded = [b.value("load", [b.value("addptr", [b.value("splat", [q], shape=[block]), offs]), mask]) for q in (x, y)]
    dest = b.value("addptr", [b.value("splat", [out], shape=[block]), offs])
    b.create("store", [dest, b.value("add", loaded), mask])
    b.create("return")
    return Module([fn], {"salt": salt, **attrs})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _wait(ready: Any, proc: subprocess.Popen[bytes], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if ready():
                return
        except Exception:  # not listening yet
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{what} did not start")
        time.sleep(0.05)


@dataclass
class RedisServer:
    proc: subprocess.Popen[bytes]
    port: int

    @classmethod
    def start(cls, workdir: str | Path) -> RedisServer | None:
        exe = shutil.which(os.environ.get("DESPINA_REDIS_SERVER", "redis-server"))
        if exe is None:
            return None
        port = free_port()
        proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                 "--dir", str(workdir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        server = cls(proc, port)
        _wait(lambda: server.client().ping(), proc, "redis-server")
        return server

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> Any:
        import redis

        return redis.Redis(port=self.port, socket_timeout=5)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@dataclass
class DaemonProcess:
    proc: subprocess.Popen[bytes]
    grpc_port: int
    http_port: int

    @property
    def grpc(self) -> str:
        return f"grpc://127.0.0.1:{self.grpc_port}"

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def stats(self) -> dict[str, Any]:
        """GET /v1/stats: the daemon's counters."""
        reply = httpx.get(self.http + "/v1/stats", timeout=10)
        reply.raise_for_status()
        result: dict[str, Any] = reply.json()
        return result

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_daemons(n: int, redis_url: str | None, workers: int = 1, compiler: str | None = None,
                  cache_root: str | Path | None = None, extra: tuple[str, ...] = (),
                  log: str | Path | None = None) -> list[DaemonProcess]:
    """`n` daemons (`despina serve` on free loopback ports), started at once; each is healthy on return.
    `compiler` is an entry point (FAKE_COMPILER: the tests' fake backend), None the NVPTX backend;
    `cache_root` holds a disk-cache folder per daemon (None: no disk tier); `extra` more flags; `log` a file
    their output goes to (None: none)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "tests"), os.environ.get("PYTHONPATH")])))
    daemons = []
    for _ in range(n):
        grpc_port, http_port = free_port(), free_port()
        cmd = [sys.executable, "-c", "from despina.cli import main; main()", "serve", "--host", "127.0.0.1",
               "--grpc-port", str(grpc_port), "--http-port", str(http_port), "--workers", str(workers),
               "--log-level", "WARNING", *extra]
        cmd += ["--redis-url", redis_url] if redis_url else []
        cmd += ["--compiler", compiler] if compiler else []
        cmd += ["--cache-dir", str(Path(cache_root) / f"daemon-{http_port}")] if cache_root else ["--no-disk-cache"]
        # In tests/, `server` is the tests' package (for FAKE_COMPILER), not the repository's server/ folder.
        with open(log, "ab") if log else contextlib.nullcontext(subprocess.DEVNULL) as out:
            proc = subprocess.Popen(cmd, env=env, cwd=ROOT / "tests", stdout=out, stderr=subprocess.STDOUT)
        daemons.append(DaemonProcess(proc, grpc_port, http_port))
    try:
        for d in daemons:
            _wait(lambda: httpx.get(d.http + "/healthz", timeout=1).status_code == 200, d.proc, "despina serve", 120)
    except BaseException:
        for d in daemons:
            d.stop()
        raise
    return daemons
