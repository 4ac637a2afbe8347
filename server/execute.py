"""Remote execution: run a kernel on the daemon's GPU with the caller's buffers.

A GPU worker process (spawned like the compile workers; one, started on the first Execute) owns
the CUDA context. For each request the daemon checks the arguments against the kernel's
signature (decoded from the request's IR), compiles the kernel through its usual tiers for the
worker's GPU, and sends the worker the image (cubin, or PTX for a driver older than the
toolchain), what its launch needs (kernel name, warps, shared memory, parameter types) and the
grid and arguments; the worker allocates device memory, copies the buffers in, launches through
`despina.runtime`'s Launcher, synchronizes, copies every buffer back, frees, and replies.

A kernel fault (an illegal address, any sticky CUDA error) or a time-out costs only that worker
process: on a fault the worker reports it and exits, on a time-out the daemon kills it; the
request gets ABORTED or DEADLINE_EXCEEDED naming the kernel (and the CUDA error), and the next
request starts a fresh worker with a fresh context. A host without a usable GPU (no driver, no
device, no cuda-bindings) answers UNIMPLEMENTED with the reason.

    runner = GpuRunner("despina.server.gpu:open_executor", timeout_s=30, metrics=metrics)
    info = await runner.device()   # {"target": "sm_90a", "driver_version": 12080, "device": ...}
    result = await runner.run(job)  # {"buffers": [bytes, ...], "seconds": 0.0012}

The worker's protocol, pickled tuples over a multiprocessing pipe:

    on start:  ("ready", info) | ("unavailable", reason) | ("failed", reason)
    per job:   ("ok", {"buffers", "seconds"}) | ("error", (status code, message))
               | ("fault", message), after which the worker exits

The executor (`ServiceConfig.executor`, "module:function") is what the worker calls once to open
the device: server/gpu.py's on a real host, a fake in the tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import math
import os
import signal
import sys
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from despina.runtime.driver import block_warps

from .errors import (
    Aborted,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    ResourceExhausted,
    ServiceError,
    Unavailable,
    Unimplemented,
)
from .metrics import Metrics
from .workers import _Worker, load_compiler

log = logging.getLogger("despina.server.execute")
START_TIMEOUT_S = 120.0
# CUDA's grid limits: x up to 2^31 - 1, y and z up to 65535 programs.
GRID_LIMITS = ((1 << 31) - 1, 65535, 65535)
MAX_DIMS = 32
_FLOAT_MAX = {"fp16": 65504.0, "bf16": 3.4028234663852886e38, "fp32": 3.4028234663852886e38}


def host_unavailable_reason() -> str | None:
    """Why this host cannot run kernels at all, found without touching CUDA; None when it may (the GPU
    worker then finds out for sure when it opens the device)."""
    if not os.path.exists("/dev/nvidiactl"):
        return "this daemon's host has no NVIDIA GPU (no /dev/nvidiactl); use Compile and launch the cubin locally"
    try:
        found = importlib.util.find_spec("cuda.bindings") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return ("this daemon has no CUDA runtime bindings (cuda-bindings: pip install 'despina[compiler]'), which its "
                "GPU worker needs; use Compile and launch locally")
    return None


# ---- the request: arguments checked against the kernel's signature ------------------------------


@dataclass(frozen=True)
class Buffer:
    """A buffer argument, or one sent back: its bytes, its element type as the IR names it (fp32,
    bf16, int32, ...) and its shape (the bytes hold exactly prod(shape) elements)."""

    data: bytes
    dtype: str
    shape: tuple[int, ...] = ()


# An argument as the transports parse it: a buffer, an integer, a float, or None when none was set.
Argument = Buffer | int | float | None


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # as the IR prints it: ptr<fp32>, int32
    elem: str  # a pointer's element type; a scalar's own type
    pointer: bool


@dataclass(frozen=True)
class Signature:
    kernel: str
    params: tuple[Param, ...]

    def describe(self) -> str:
        return ", ".join(f"{p.name}: {p.type}" for p in self.params)


class Signatures:
    """Kernels' signatures by cache key, each found once by `find` (the daemon's: `signature` in a compile
    worker, intake.py) and the `size` most recently used kept."""

    def __init__(self, size: int, find: Callable[[bytes], Awaitable[Signature]]) -> None:
        self.size, self._find = size, find
        self._found: OrderedDict[str, Signature] = OrderedDict()

    async def get(self, key: str, ir: bytes) -> Signature:
        found = self._found.get(key)
        if found is not None:
            self._found.move_to_end(key)
            return found
        found = self._found[key] = await self._find(ir)
        if len(self._found) > self.size:
            self._found.popitem(last=False)
        return found


def signature(ir: bytes) -> Signature:
    """The kernel's name and parameters, decoded from the request's IR (untrusted input)."""
    from despina.compiler.ir.codec import IRDecodeError, decode
    from despina.compiler.ir.core import IRError
    from despina.compiler.ir.types import PointerType, ScalarType

    try:
        fn = decode(ir).kernel
    except IRDecodeError as e:
        raise InvalidArgument(f"invalid IR: {e}") from None
    except IRError as e:
        raise InvalidArgument(f"the IR has no kernel to run: {e}") from None
    params = []
    for name, value in zip(fn.arg_names, fn.args):
        ty = value.type
        if isinstance(ty, PointerType) and isinstance(ty.element_ty, ScalarType):
            params.append(Param(name, str(ty), ty.element_ty.name, True))
        elif isinstance(ty, ScalarType):
            params.append(Param(name, str(ty), ty.name, False))
        else:
            raise InvalidArgument(f"kernel '{fn.name}': parameter '{name}' is a {ty}; Execute passes buffers and numbers")
    return Signature(fn.name, tuple(params))


def check_grid(grid: Sequence[int]) -> tuple[int, int, int]:
    """The grid as (x, y, z); InvalidArgument unless it is 1 to 3 positive numbers within CUDA's limits."""
    if not 1 <= len(grid) <= 3 or any(g < 1 for g in grid):
        raise InvalidArgument(f"grid must be 1 to 3 positive numbers, got {list(grid)[:8]}")
    for axis, (g, limit) in enumerate(zip(grid, GRID_LIMITS)):
        if g > limit:
            raise InvalidArgument(f"grid axis {axis} is {g} programs; CUDA allows at most {limit}")
    dims = tuple(grid) + (1,) * (3 - len(grid))
    return dims  # type: ignore[return-value]


def buffers_nbytes(args: Sequence[Argument]) -> int:
    return sum(len(a.data) for a in args if isinstance(a, Buffer))


def launch_values(sig: Signature, args: Sequence[Argument]) -> list[bytes | int | float]:
    """What the GPU worker launches with, in parameter order: each buffer's bytes, each number as its
    parameter's type takes it; InvalidArgument naming the argument for any mismatch."""
    if len(args) != len(sig.params):
        raise InvalidArgument(f"kernel '{sig.kernel}' takes {len(sig.params)} arguments ({sig.describe()}); the "
                              f"request has {len(args)}")
    values: list[bytes | int | float] = []
    for i, (p, a) in enumerate(zip(sig.params, args)):
        where = f"argument {i} ({p.name}: {p.type}) of kernel '{sig.kernel}'"
        if a is None:
            raise InvalidArgument(f"{where} has no value: set its buffer, int_value or float_value")
        if p.pointer:
            if not isinstance(a, Buffer):
                raise InvalidArgument(f"{where} is a pointer: pass a buffer of {p.elem}, not {_kind(a)}")
            values.append(_buffer(where, p, a))
        elif isinstance(a, Buffer):
            raise InvalidArgument(f"{where} is a scalar: pass {'a float_value' if _is_float(p) else 'an int_value'}, "
                                  "not a buffer")
        else:
            values.append(_scalar(where, p, a))
    return values


def _kind(a: Any) -> str:
    return "a float" if isinstance(a, float) else "an integer"


def _is_float(p: Param) -> bool:
    return p.elem in ("fp16", "bf16", "fp32", "fp64")


def _buffer(where: str, p: Param, a: Buffer) -> bytes:
    from despina.compiler.ir.types import SCALAR_NAMES, ScalarType

    if a.dtype not in SCALAR_NAMES:
        raise InvalidArgument(f"{where}: buffer dtype {a.dtype[:40]!r} is not one of {', '.join(SCALAR_NAMES)}")
    if a.dtype != p.elem:
        raise InvalidArgument(f"{where}: the buffer holds {a.dtype} elements, the kernel reads {p.elem}")
    if len(a.shape) > MAX_DIMS or any(d < 0 for d in a.shape):
        raise InvalidArgument(f"{where}: shape {list(a.shape)[:40]} is not up to {MAX_DIMS} non-negative sizes")
    need = math.prod(a.shape) * ScalarType(a.dtype).itemsize
    if len(a.data) != need:
        raise InvalidArgument(f"{where}: the buffer has {len(a.data)} bytes; {list(a.shape)} {a.dtype} elements are "
                              f"{need} bytes")
    return a.data


def _scalar(where: str, p: Param, a: int | float) -> int | float:
    from despina.compiler.ir.types import ScalarType

    ty = ScalarType(p.elem)
    if ty.is_floating():
        value = float(a)
        limit = _FLOAT_MAX.get(ty.name)
        if limit is not None and math.isfinite(value) and abs(value) > limit:
            raise InvalidArgument(f"{where}: {value!r} is out of {ty.name}'s range")
        return value
    if isinstance(a, float):
        raise InvalidArgument(f"{where} is an integer: pass an int_value, not a float")
    bits = ty.primitive_bitwidth
    if ty.is_bool():
        low, high = 0, 1
    elif ty.is_int_signed():
        low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    else:
        low, high = 0, (1 << bits) - 1
        if bits == 64 and -(1 << 63) <= a < 0:
            a += 1 << 64  # int_value is a sint64: a uint64 of 2^63 or more arrives as its two's complement
    if not low <= a <= high:
        raise InvalidArgument(f"{where}: {a} is out of {ty.name}'s range [{low}, {high}]")
    return int(a)


# The keys of a kernel's metadata that its Launcher reads.
LAUNCH_METADATA = ("tensor_maps", "prints", "asserts")


def job(sig: Signature, key: str, image: bytes, metadata: dict[str, Any], num_warps: int, grid: tuple[int, int, int],
        values: list[bytes | int | float]) -> dict[str, Any]:
    """The GPU worker's job: the image and what launching it needs."""
    return {
        "key": key,
        "name": str(metadata.get("name") or sig.kernel),
        "image": image,
        "num_warps": block_warps(metadata, num_warps),
        "shared": int(metadata.get("shared") or 0),
        # What a launch needs besides the parameters (runtime/launcher.py): the TMA tensor maps to make from
        # their values; and after the kernel: print, check device_asserts.
        "launch": {k: metadata[k] for k in LAUNCH_METADATA if metadata.get(k)},
        "params": [(p.name, p.type) for p in sig.params],
        "grid": grid,
        "args": values,
    }


# ---- the GPU worker process ----------------------------------------------------------------------


class NoDevice(Exception):
    """Raised by an executor's factory where there is no GPU to run on: Execute answers UNIMPLEMENTED."""


class ExecuteFailure(Exception):
    """A kernel run that failed in the GPU worker: `code` is the status the client gets; `fatal` when the
    worker's CUDA context is unusable (a sticky error), so that the worker must exit."""

    def __init__(self, code: str, message: str, fatal: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.fatal = fatal


def _gpu_main(conn: Connection, entry_point: str) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        executor = load_compiler(entry_point)()
    except NoDevice as e:
        conn.send(("unavailable", str(e)))
        return
    except Exception as e:
        conn.send(("failed", f"{entry_point}: {type(e).__name__}: {e}"))
        return
    conn.send(("ready", dict(executor.info, pid=os.getpid())))
    while True:
        try:
            work = conn.recv()
        except (EOFError, OSError):
            return
        try:
            conn.send(("ok", executor.run(work)))
        except ExecuteFailure as e:
            if e.fatal:  # the context is gone: report, and make way for a fresh process
                conn.send(("fault", e.message))
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(3)
            conn.send(("error", (e.code, e.message)))
        except Exception as e:
            conn.send(("error", ("INTERNAL", f"the GPU worker failed: {type(e).__name__}: {e}")))


_ERRORS: dict[str, type[ServiceError]] = {
    cls.code: cls for cls in (Aborted, FailedPrecondition, InvalidArgument, ResourceExhausted, Internal)}


class GpuRunner:
    """The daemon's end of the GPU worker: started on first use, one job at a time, killed on a time-out,
    dropped after a fault or a crash and started again by the next request."""

    def __init__(self, entry_point: str, timeout_s: float, metrics: Metrics,
                 precheck: Callable[[], str | None] | None = None) -> None:
        self.entry_point = entry_point
        self.timeout_s = timeout_s
        self.metrics = metrics
        self.precheck = precheck
        self.worker: _Worker | None = None
        self.info: dict[str, Any] | None = None
        # Why this daemon cannot execute at all (no GPU): answered to every request from then on.
        self.unavailable: str | None = None
        # The kernel the worker runs now, if any.
        self.running: str | None = None
        self._lock = asyncio.Lock()
        self._closing = False

    @property
    def pid(self) -> int | None:
        return self.worker.pid if self.worker is not None else None

    async def device(self) -> dict[str, Any]:
        """The GPU worker's {"target", "driver_version", "device", "pid"}, starting it if none runs;
        Unimplemented on a host without a usable GPU."""
        async with self._lock:
            return await self._ensure()

    async def run(self, work: dict[str, Any]) -> dict[str, Any]:
        """Run one job; its {"buffers", "seconds"}, or the ServiceError the client gets."""
        async with self._lock:
            await self._ensure()
            worker = self.worker
            assert worker is not None
            name = work["name"]
            self.running = name
            try:
                status, payload = await asyncio.wait_for(worker.exchange(work), self.timeout_s)
            except asyncio.TimeoutError:
                self.metrics.executes.labels("timeout").inc()
                await self._discard()
                log.error("kernel '%s' ran past %gs; GPU worker %d killed", name, self.timeout_s, worker.pid)
                raise DeadlineExceeded(
                    f"kernel '{name}' did not finish within {self.timeout_s:g}s on the daemon's GPU (despina serve "
                    "--execute-timeout-s); its GPU worker was stopped, and a new one takes the next request") from None
            except (EOFError, OSError):
                reason = await asyncio.to_thread(worker.exit_reason)
                self.metrics.executes.labels("crash").inc()
                await self._discard()
                log.error("GPU worker %d died running kernel '%s' (%s)", worker.pid, name, reason)
                raise Aborted(f"the GPU worker died running kernel '{name}' ({reason}); the daemon starts a new one "
                              "for the next request") from None
            except asyncio.CancelledError:
                # The worker may be mid-kernel: its reply would answer the next request. It goes.
                self._kill_now()
                raise
            finally:
                self.running = None
            if status == "ok":
                self.metrics.executes.labels("ok").inc()
                self.metrics.execute_seconds.observe(float(payload.get("seconds", 0.0)))
                result: dict[str, Any] = payload
                return result
            if status == "fault":
                self.metrics.executes.labels("fault").inc()
                await self._discard()
                log.error("GPU worker %d: %s", worker.pid, payload)
                raise Aborted(str(payload))
            self.metrics.executes.labels("error").inc()
            code, message = payload if status == "error" else ("INTERNAL", f"the GPU worker answered {status!r}")
            raise _ERRORS.get(code, Internal)(str(message))

    async def _ensure(self) -> dict[str, Any]:
        if self.worker is not None:
            if self.worker.process.is_alive() and self.info is not None:
                return self.info
            await self._discard()  # it died between requests
        if self.unavailable is None and self.precheck is not None:
            self.unavailable = self.precheck()
        if self.unavailable is not None:
            raise Unimplemented(self.unavailable)
        if self._closing:
            raise Unavailable("the daemon is shutting down")
        worker = _Worker(self.entry_point, _gpu_main, "despina-gpu")
        try:
            status, payload = await asyncio.wait_for(worker.receive(), START_TIMEOUT_S)
        except asyncio.CancelledError:  # the caller went away while the worker started: it goes too
            asyncio.get_running_loop().run_in_executor(None, worker.kill)
            raise
        except (EOFError, OSError, asyncio.TimeoutError):
            reason = await asyncio.to_thread(worker.exit_reason)
            await asyncio.to_thread(worker.kill)
            raise Internal(f"the GPU worker failed to start ({reason}); the next request tries again") from None
        if status != "ready":
            await asyncio.to_thread(worker.kill)
            if status == "unavailable":
                self.unavailable = f"this daemon cannot run kernels: {payload}; use Compile and launch locally"
                log.warning("Execute is off: %s", payload)
                raise Unimplemented(self.unavailable)
            raise Internal(f"the GPU worker could not open the GPU ({payload}); the next request tries again")
        self.metrics.gpu_workers.inc()
        self.worker, self.info = worker, payload
        log.info("GPU worker %d on %s (target %s, CUDA driver %s)", worker.pid, payload.get("device"),
                 payload.get("target"), payload.get("driver_version"))
        return payload

    async def _discard(self) -> None:
        worker, self.worker, self.info = self.worker, None, None
        if worker is not None:
            await asyncio.to_thread(worker.kill)

    def _kill_now(self) -> None:
        worker, self.worker, self.info = self.worker, None, None
        if worker is None:
            return
        if worker.process.is_alive():
            with contextlib.suppress(OSError):
                os.kill(worker.pid, signal.SIGKILL)
        asyncio.get_running_loop().run_in_executor(None, worker.kill)

    async def close(self) -> None:
        self._closing = True
        await self._discard()
