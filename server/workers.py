"""Compile workers: spawned processes that each run one compilation at a time.

A worker that crashes (SIGKILL, an LLVM abort) or runs past the per-compile time-out costs that
one request and that one process: the pool kills it, starts a replacement and goes on serving.

    pool = CompilePool(size=4, compiler="despina.compiler.backends.nvptx:compile_module", timeout_s=120)
    await pool.start()
    result = await pool.compile(ir_bytes, target="sm_90", options=CompileOptions(num_warps=8))
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

from despina.compiler import lifeline as lifeline_module
from despina.compiler.options import CompileOptions

from . import pipe
from .errors import DeadlineExceeded, Internal, InvalidArgument, ResourceExhausted, ServiceError
from .metrics import Metrics

log = logging.getLogger("despina.server.workers")
_START_TIMEOUT_S = 120.0
WORKER_NICENESS = 10


def load_compiler(entry_point: str) -> Callable[..., Any]:
    module, _, name = entry_point.partition(":")
    fn: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return fn


def _stages(asm: dict[str, Any]) -> dict[str, bytes]:
    return {k: v if isinstance(v, bytes) else str(v).encode() for k, v in asm.items() if v is not None}


def _run_job(compiler: Callable[..., Any], job: dict[str, Any]) -> dict[str, Any]:
    from despina.compiler.ir.codec import decode

    if "check" in job:  # decoding untrusted IR, for the daemon (intake.py)
        from .intake import check

        return check(job)
    start = time.perf_counter()
    module = decode(job["ir"])
    job["name"] = module.functions[0].name if module.functions else "?"
    kernel = compiler(module, target=job["target"], options=CompileOptions(**job["options"]))
    metadata = json.loads(json.dumps(dict(kernel.metadata), default=str))
    return {"stages": _stages(dict(kernel.asm)), "metadata": metadata, "seconds": time.perf_counter() - start}


def _worker_main(conn: Connection, entry_point: str) -> None:
    # Ctrl-C reaches the whole process group; the daemon decides when its workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # This process is already the isolation the NVPTX backend would otherwise add around LLVM.
    os.environ.setdefault("DESPINA_LLVM_ISOLATE", "0")
    # Compiles and IR checks are batch work: on a busy host the daemon's event loop, which answers every
    # cache hit, goes first (six decode bombs in the workers took hits' p99 from 4 ms to 100 ms on 2 cores).
    os.nice(WORKER_NICENESS)
    from despina.compiler.errors import CompilationError
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
        except MemoryError:  # past the worker's address-space cap (RLIMIT_AS)
            conn.send(("memory", job.get("name", "?")))
        except (CompilationError, IRError, ValueError) as e:  # the kernel's or the request's fault
            conn.send(("invalid", f"{type(e).__name__}: {e}"))
        except Exception as e:
            conn.send(("internal", f"the compiler failed: {type(e).__name__}: {e}"))


def _bootstrap(main: Callable[[Connection, str], None], conn: Connection, entry_point: str, lifeline: Connection,
               parent: int, pdeathsig: bool, memory_bytes: int) -> None:
    lifeline_module.hold(lifeline.fileno(), parent, pdeathsig)
    lifeline_module.limit_memory(memory_bytes)
    main(conn, entry_point)


class _Worker:
    """A spawned process running `main(conn, entry_point)` (a compile worker by default; execute.py's
    GPU worker too), and the daemon's end of its pipe. The worker dies with the daemon (lifeline.py),
    and its address space is capped at `memory_bytes` (0: no cap)."""

    def __init__(self, entry_point: str, main: Callable[[Connection, str], None] = _worker_main,
                 name: str = "despina-compile", memory_bytes: int = 0) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        # The daemon keeps the write end and never writes: the worker reads EOF when the daemon is gone.
        far, self._lifeline = ctx.Pipe(duplex=False)
        # The parent-death signal follows the thread that starts the worker: only the main thread
        # (the daemon's event loop) lives as long as the daemon.
        pdeathsig = lifeline_module.main_thread()
        self.process = ctx.Process(target=_bootstrap, name=name, daemon=True,
                                   args=(main, child, entry_point, far, os.getpid(), pdeathsig, memory_bytes))
        self.process.start()
        child.close()  # so that the worker's death reads as EOF here
        far.close()

    @property
    def pid(self) -> int:
        return self.process.pid or 0

    async def receive(self) -> Any:
        return await pipe.receive(self.conn)

    async def exchange(self, job: Any) -> Any:
        """Send `job` and wait for the worker's answer (both without blocking the event loop: pipe.py)."""
        await pipe.send(self.conn, job)
        return await pipe.receive(self.conn)

    def kill(self) -> None:
        if self.process.is_alive():
            os.kill(self.pid, signal.SIGKILL)
        self.process.join(5)
        self.conn.close()
        self._lifeline.close()

    def exit_reason(self) -> str:
        self.process.join(1)
        code = self.process.exitcode
        if code is not None and code < 0:
            return f"killed by signal {signal.Signals(-code).name}"
        return f"exited with status {code}"


class CompilePool:
    """`size` workers, and up to `extra` more while every worker has been busy for `slow_after_s` and
    requests wait: a few slow compiles then hold up only themselves, not every other request. The pool
    shrinks back to `size` as workers finish once nobody waits and no slow compile is left."""

    def __init__(self, size: int, compiler: str, timeout_s: float, metrics: Metrics, memory_bytes: int = 0,
                 extra: int = 1, slow_after_s: float = 2.0) -> None:
        self.size = size
        self.extra, self.slow_after_s = extra, slow_after_s
        self.memory_bytes = memory_bytes
        self.compiler = compiler
        self.timeout_s = timeout_s
        self.metrics = metrics
        self.workers: list[_Worker] = []
        self._idle: asyncio.Queue[_Worker] = asyncio.Queue()
        self._busy: dict[_Worker, float] = {}  # since when
        self._waiting = 0
        self._starting = False
        self._closing = False

    async def start(self) -> None:
        workers = [self._new() for _ in range(self.size)]
        await asyncio.gather(*(self._spawn(w) for w in workers))

    def _new(self) -> _Worker:
        return _Worker(self.compiler, memory_bytes=self.memory_bytes)

    async def _spawn(self, worker: _Worker | None = None) -> None:
        worker = worker or self._new()
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
        self._busy.pop(worker, None)
        self._drop(worker)
        self.metrics.workers_replaced.inc()
        if not self._closing:
            asyncio.ensure_future(self._spawn())

    def pids(self) -> list[int]:
        return [w.pid for w in self.workers]

    async def _take(self) -> _Worker:
        """An idle worker that is alive: one killed while idle (by an operator, the OOM killer) is replaced
        here instead of failing the compile sent to it."""
        self._waiting += 1
        start = time.monotonic()
        try:
            while True:
                worker = await self._next_idle()
                if worker.process.is_alive():
                    self._busy[worker] = time.monotonic()
                    return worker
                log.warning("compile worker %d died while idle (%s); replacing it", worker.pid, worker.exit_reason())
                self._replace(worker)
        finally:
            self._waiting -= 1
            self.metrics.worker_wait_seconds.observe(time.monotonic() - start)

    async def _next_idle(self) -> _Worker:
        getter = asyncio.ensure_future(self._idle.get())
        try:
            while not (await asyncio.wait({getter}, timeout=self.slow_after_s))[0]:
                self._burst()
        except asyncio.CancelledError:
            if getter.done() and not getter.cancelled():
                self._idle.put_nowait(getter.result())  # the caller left as a worker came free: keep it
            getter.cancel()
            raise
        return getter.result()

    def _burst(self) -> None:
        now = time.monotonic()
        if (self._closing or self._starting or len(self.workers) >= self.size + self.extra
                or any(now - since < self.slow_after_s for since in self._busy.values())):
            return
        log.info("every compile worker has been busy for over %gs and requests wait: starting an extra worker",
                 self.slow_after_s)
        self.metrics.workers_extra.inc()
        self._starting = True
        asyncio.ensure_future(self._spawn()).add_done_callback(self._started)

    def _started(self, task: asyncio.Future[None]) -> None:
        self._starting = False
        if not task.cancelled():
            task.exception()  # logged by _spawn; retrieved so that asyncio does not warn

    def _release(self, worker: _Worker) -> None:
        self._busy.pop(worker, None)
        now = time.monotonic()
        if (len(self.workers) > self.size and not self._waiting
                and all(now - since < self.slow_after_s for since in self._busy.values())):
            self._drop(worker)  # the slow compiles are over: back to `size` workers
        else:
            self._idle.put_nowait(worker)

    async def compile(self, ir: bytes | memoryview, target: str, options: CompileOptions) -> dict[str, Any]:
        """The worker's {"stages", "metadata", "seconds"}; `InvalidArgument` when the kernel does not
        compile, `Internal` when the worker died, `DeadlineExceeded` past the time-out."""
        return await self.run({"ir": ir, "target": target, "options": options.as_dict()})

    async def run(self, job: dict[str, Any]) -> dict[str, Any]:
        """What a worker answers for `job` (a compile, or one of intake.py's checks)."""
        worker = await self._take()
        try:
            status, payload = await asyncio.wait_for(worker.exchange(job), self.timeout_s)
        except asyncio.TimeoutError:
            self._replace(worker)
            raise DeadlineExceeded(f"compilation took longer than {self.timeout_s:g}s; its worker was stopped") from None
        except (EOFError, OSError, asyncio.CancelledError) as e:
            reason = worker.exit_reason() if not isinstance(e, asyncio.CancelledError) else "cancelled"
            self._replace(worker)
            if isinstance(e, asyncio.CancelledError):
                raise
            log.error("compile worker %d died mid-compile (%s); replacing it", worker.pid, reason)
            # A C++ allocation past RLIMIT_AS aborts (LLVM) or faults rather than raising MemoryError.
            ran_out = self.memory_bytes and ("SIGABRT" in reason or "SIGSEGV" in reason)
            cap = f"; it may have run past its {self._cap()} memory cap" if ran_out else ""
            raise Internal(f"the compile worker crashed ({reason}{cap}); the daemon replaced it, retry the request") from None
        if status == "memory":  # a process that ran out of memory is not trusted with the next kernel
            self._replace(worker)
            raise ResourceExhausted(f"compiling kernel '{payload}' needed more than the {self._cap()} of memory a compile "
                                    "worker may use (despina serve --worker-memory); make its blocks smaller")
        self._release(worker)
        if status == "ok":
            result: dict[str, Any] = payload
            return result
        error: ServiceError = InvalidArgument(payload) if status == "invalid" else Internal(payload)
        raise error

    def _cap(self) -> str:
        return f"{self.memory_bytes / 2**30:g} GiB"

    async def close(self) -> None:
        self._closing = True
        for worker in list(self.workers):
            self._drop(worker)
