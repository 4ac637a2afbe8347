"""Compile workers: spawned processes that each run one compilation at a time.

A worker that crashes (SIGKILL, an LLVM abort) or runs past the per-compile time-out costs that
one request and that one process: the pool kills it, starts a replacement and goes on serving.

    pool = CompilePool(size=4, compiler="despina.compiler.backends.nvptx:compile_module", timeout_s=120)
    await pool.start()
    result = await pool.compile(ir_bytes, target="sm_90", num_warps=4, num_stages=3)
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import multiprocessing as mp
import os
import signal
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from .errors import DeadlineExceeded, Internal, InvalidArgument, ServiceError
from .metrics import Metrics

log = logging.getLogger("despina.server.workers")
_START_TIMEOUT_S = 120.0


def load_compiler(entry_point: str) -> Callable[..., Any]:
    module, _, name = entry_point.partition(":")
    fn: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return fn


def _stages(asm: dict[str, Any]) -> dict[str, bytes]:
    return {k: v if isinstance(v, bytes) else str(v).encode() for k, v in asm.items() if v is not None}


def _run_job(compiler: Callable[..., Any], job: dict[str, Any]) -> dict[str, Any]:
    from despina.compiler.ir.codec import decode

    start = time.perf_counter()
    kernel = compiler(decode(job["ir"]), target=job["target"], num_warps=job["num_warps"], num_stages=job["num_stages"])
    metadata = json.loads(json.dumps(dict(kernel.metadata), default=str))
    return {"stages": _stages(dict(kernel.asm)), "metadata": metadata, "seconds": time.perf_counter() - start}


def _worker_main(conn: Connection, entry_point: str) -> None:
    # Ctrl-C reaches the whole process group; the daemon decides when its workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # This process is already the isolation the NVPTX backend would otherwise add around LLVM.
    os.environ.setdefault("DESPINA_LLVM_ISOLATE", "0")
    from despina.compiler.backends.errors import CompilationError
    from despina.compiler.ir.core import IRError

    compiler: Callable[..., Any] | None = None
    load_error = ""
    try:
        compiler = load_compiler(entry_point)
    except Exception as e:  # the daemon still serves its caches without a backend
        load_error = f"the compiler backend {entry_point} cannot be loaded: {type(e).__name__}: {e}"
    conn.send(("ready", os.getpid()))
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if compiler is None:
            conn.send(("internal", load_error))
            continue
        try:
            conn.send(("ok", _run_job(compiler, job)))
        except (CompilationError, IRError, ValueError) as e:  # the kernel's or the request's fault
            conn.send(("invalid", f"{type(e).__name__}: {e}"))
        except Exception as e:
            conn.send(("internal", f"the compiler failed: {type(e).__name__}: {e}"))


async def readable(conn: Connection) -> None:
    """Wait, without blocking the event loop, until `conn` has something to read (or is closed)."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()
    fd = conn.fileno()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)


class _Worker:
    """A spawned process running `main(conn, entry_point)` (a compile worker by default; execute.py's
    GPU worker too), and the daemon's end of its pipe."""

    def __init__(self, entry_point: str, main: Callable[[Connection, str], None] = _worker_main,
                 name: str = "despina-compile") -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=main, args=(child, entry_point), daemon=True, name=name)
        self.process.start()
        child.close()  # so that the worker's death reads as EOF here

    @property
    def pid(self) -> int:
        return self.process.pid or 0

    async def receive(self) -> Any:
        await readable(self.conn)
        return self.conn.recv()

    def kill(self) -> None:
        if self.process.is_alive():
            os.kill(self.pid, signal.SIGKILL)
        self.process.join(5)
        self.conn.close()

    def exit_reason(self) -> str:
        self.process.join(1)
        code = self.process.exitcode
        if code is not None and code < 0:
            return f"killed by signal {signal.Signals(-code).name}"
        return f"exited with status {code}"


class CompilePool:
    def __init__(self, size: int, compiler: str, timeout_s: float, metrics: Metrics) -> None:
        self.size = size
        self.compiler = compiler
        self.timeout_s = timeout_s
        self.metrics = metrics
        self.workers: list[_Worker] = []
        self._idle: asyncio.Queue[_Worker] = asyncio.Queue()
        self._closing = False

    async def start(self) -> None:
        workers = [_Worker(self.compiler) for _ in range(self.size)]
        await asyncio.gather(*(self._spawn(w) for w in workers))

    async def _spawn(self, worker: _Worker | None = None) -> None:
        worker = worker or _Worker(self.compiler)
        self.workers.append(worker)
        try:
            await asyncio.wait_for(worker.receive(), _START_TIMEOUT_S)
        except (EOFError, OSError, asyncio.TimeoutError):
            log.error("a compile worker failed to start (%s)", worker.exit_reason())
            self._drop(worker)
            raise Internal("a compile worker failed to start") from None
        self._idle.put_nowait(worker)

    def _drop(self, worker: _Worker) -> None:
        worker.kill()
        if worker in self.workers:
            self.workers.remove(worker)

    def _replace(self, worker: _Worker) -> None:
        self._drop(worker)
        self.metrics.workers_replaced.inc()
        if not self._closing:
            asyncio.ensure_future(self._spawn())

    def pids(self) -> list[int]:
        return [w.pid for w in self.workers]

    async def compile(self, ir: bytes, target: str, num_warps: int, num_stages: int) -> dict[str, Any]:
        """The worker's {"stages", "metadata", "seconds"}; `InvalidArgument` when the kernel does not
        compile, `Internal` when the worker died, `DeadlineExceeded` past the time-out."""
        worker = await self._idle.get()
        job = {"ir": ir, "target": target, "num_warps": num_warps, "num_stages": num_stages}
        try:
            worker.conn.send(job)
            status, payload = await asyncio.wait_for(worker.receive(), self.timeout_s)
        except asyncio.TimeoutError:
            self._replace(worker)
            raise DeadlineExceeded(f"compilation took longer than {self.timeout_s:g}s; its worker was stopped") from None
        except (EOFError, OSError, asyncio.CancelledError) as e:
            reason = worker.exit_reason() if not isinstance(e, asyncio.CancelledError) else "cancelled"
            self._replace(worker)
            if isinstance(e, asyncio.CancelledError):
                raise
            log.error("compile worker %d died mid-compile (%s); replacing it", worker.pid, reason)
            raise Internal(f"the compile worker crashed ({reason}); the daemon replaced it, retry the request") from None
        self._idle.put_nowait(worker)
        if status == "ok":
            result: dict[str, Any] = payload
            return result
        error: ServiceError = InvalidArgument(payload) if status == "invalid" else Internal(payload)
        raise error

    async def close(self) -> None:
        self._closing = True
        for worker in list(self.workers):
            self._drop(worker)
