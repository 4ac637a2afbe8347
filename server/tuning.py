"""Autotuning on the daemon: every config compiled at once across the compile workers, measured on
the daemon's GPU, and the result kept in every tier so that the cluster tunes each kernel once.

    tuner = Tuner(service)
    response = await tuner.tune(TuneRequest(client_key, "matmul", candidates, args, device="NVIDIA H100 ..."))
    response.tuning.labels[response.tuning.winner], response.kernel.cubin

A request names the tuning by the client's part of the key (kernel, configs, key values, argument
dtypes and alignment: `Autotuner.tuning_key`) and the client's GPU and driver; the full key adds
Despina's version (`despina.runtime.tunings.tuning_key`). A request without candidates is a lookup:
the record and the winner's kernel, or NOT_FOUND. With candidates (one per config: its IR, launch
options and grid) and the arguments (the client's buffers as zeros of the right dtype and size, or
copies where their values matter, put back before every run), a miss is tuned once:
single-flight in this daemon (a task that outlives the request that started it, so that a client
that goes away costs nothing half-done: the tuning finishes and is kept) and across daemons (a Redis
lease, as compiles have). Configs that fail to compile or fault on the GPU are dropped with the
reason; when none survives, the error lists every config's.

A daemon whose GPU is not the client's (or that has none) compiles every config and answers all
the kernels (`TuneResponse.kernels`); the client measures them and sends the record back
(`report`), which is kept as the daemon's own are.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from despina.compiler.options import DEFAULTS, CompileOptions
from despina.runtime.tunings import Tuning, from_json, is_key, tuning_key

from . import execute
from .cache.tunings import TuningStore
from .errors import FailedPrecondition, InvalidArgument, NotFound, ResourceExhausted, ServiceError, Unimplemented
from .execute import Buffer, Signature

if TYPE_CHECKING:
    from .core import CompileRequest, CompileResponse, CompileService

log = logging.getLogger("despina.server.tuning")
MAX_CONFIGS = 256
MAX_LABEL = 1000
# Synthetic buffers live on the daemon's GPU only: bounded by what a GPU holds, not by request size.
MAX_SYNTHETIC_BYTES = 64 << 30
# Measuring in two rounds: every config first for a fifth of the client's warm-up and repetition
# budgets (as its compile lands), then only those within 20% of the fastest for the whole budget. A
# config 20% slower in the first round is not the winner; the others' full runs pick among the rest.
SCREEN_FRACTION = 0.2
CONTENDER_MARGIN = 1.2


@dataclass(frozen=True)
class Candidate:
    """One config as the client specialized it: the kernel's IR, its launch options and its grid."""

    ir: bytes
    options: CompileOptions = DEFAULTS
    grid: tuple[int, ...] = (1,)
    label: str = ""


@dataclass(frozen=True)
class Synthetic:
    """A buffer argument the daemon makes on its GPU: zeros, `shape` elements of `dtype`."""

    dtype: str
    shape: tuple[int, ...] = ()


TuneArgument = Buffer | Synthetic | int | float | None


@dataclass(frozen=True)
class TuneRequest:
    """`restore`: the indices of the arguments whose contents are put back before every run (the
    autotuner's restore_value and reset_to_zero). `device` and `driver_version` are the client's GPU
    (its name, as cuDeviceGetName says it) and CUDA driver; "" and 0: the daemon's own."""

    client_key: str
    kernel: str
    candidates: tuple[Candidate, ...] = ()
    args: tuple[TuneArgument, ...] = ()
    restore: tuple[int, ...] = ()
    target: str = "sm_90"
    device: str = ""
    driver_version: int = 0
    warmup_ms: float = 25.0
    rep_ms: float = 100.0


@dataclass(frozen=True)
class TuneResponse:
    """`tuning` and the winner's kernel (`kernel`, None when the lookup found the record but no longer
    the kernel); or, from a daemon that cannot measure for the client's GPU, `tuning` None and every
    config's kernel in `kernels` (None where it failed, `errors` says why). `tier`: where the record
    came from (memory, disk, redis), "tuned" when it was measured for this request, "compiled" when
    the client must measure."""

    key: str
    tier: str
    tuning: Tuning | None = None
    kernel: CompileResponse | None = None
    kernels: list[CompileResponse | None] = field(default_factory=list)
    errors: list[str | None] = field(default_factory=list)


class Tuner:
    def __init__(self, service: CompileService) -> None:
        self.service = service
        self.store = TuningStore(service.redis, service.config.disk_dir, service.metrics)
        self._flights: dict[str, asyncio.Task[TuneResponse]] = {}

    # ---- the request ----------------------------------------------------------------------------

    def _check(self, req: TuneRequest) -> None:
        if not is_key(req.client_key):
            raise InvalidArgument(f"the tuning's client key {req.client_key[:80]!r} is not 64 lowercase hex digits")
        if len(req.candidates) > MAX_CONFIGS:
            raise ResourceExhausted(f"{len(req.candidates)} configs; a tuning takes at most {MAX_CONFIGS}")
        total = sum(len(c.ir) for c in req.candidates) + execute.buffers_nbytes(
            [a for a in req.args if not isinstance(a, Synthetic)])
        if total > self.service.config.max_request_bytes:
            raise ResourceExhausted(f"the tuning request holds {total} bytes of IR and buffers; this daemon accepts at "
                                    f"most {self.service.config.max_request_bytes} (despina serve --max-request-bytes)")
        if not math.isfinite(req.warmup_ms) or not math.isfinite(req.rep_ms) or not 0 <= req.warmup_ms <= 10_000 \
                or not 0 < req.rep_ms <= 10_000:
            raise InvalidArgument(f"warmup_ms {req.warmup_ms} and rep_ms {req.rep_ms} must be within (0, 10000]")
        for i, c in enumerate(req.candidates):
            if len(c.label) > MAX_LABEL:
                raise InvalidArgument(f"config {i}'s label is {len(c.label)} characters; at most {MAX_LABEL}")
            try:
                execute.check_grid(c.grid)
                self.service.key_of(self._compile_request(c, req.target or "sm_90"))
            except ServiceError as e:
                raise InvalidArgument(f"config {i} ({c.label or 'unnamed'}): {e.message}") from None

    @staticmethod
    def _compile_request(c: Candidate, target: str, driver_version: int = 0) -> CompileRequest:
        from .core import CompileRequest

        return CompileRequest(c.ir, target, c.options, driver_version=driver_version)

    async def _device(self) -> dict[str, Any] | None:
        """The GPU worker's device, None on a host without one."""
        try:
            return await self.service.gpu.device()
        except Unimplemented:
            return None

    # ---- tune -----------------------------------------------------------------------------------

    async def tune(self, req: TuneRequest) -> TuneResponse:
        self.service._count("tune")
        # A task of its own: a tuning goes on (and is kept) when the request that asked for it is cancelled
        # (its client went away); nothing is kept before it is whole.
        work = asyncio.ensure_future(self._tune(req))
        work.add_done_callback(_retrieved)
        try:
            return await asyncio.shield(work)
        except ServiceError as e:
            raise self.service._failed(e) from None

    async def _tune(self, req: TuneRequest) -> TuneResponse:
        self._check(req)
        info = await self._device() if req.candidates or not req.device else None
        device = req.device or (str(info.get("name") or info.get("device")) if info else "")
        if not device:
            raise FailedPrecondition("the request names no GPU to tune for and this daemon has none: send the client's "
                                     "GPU name (device) and driver_version")
        driver = req.driver_version or int((info or {}).get("driver_version") or 0)
        key = tuning_key(req.client_key, device, driver)
        found, tier = await self.store.get(key)
        if found is not None:
            return await self._answer(found, tier, req)
        if not req.candidates:
            raise NotFound(f"no tuning of kernel '{req.kernel}' with key {key} on {device}: send the configs to tune it")
        mine = info is not None and str(info.get("name") or info.get("device")) == device
        if not mine:
            return await self._compile_all(req, key)
        flight = self._flights.get(key)
        if flight is None:
            flight = self._flights[key] = asyncio.ensure_future(self._single(key, req, info or {}, device, driver))
            flight.add_done_callback(lambda _: self._flights.pop(key, None))
        return await asyncio.shield(flight)

    async def _single(self, key: str, req: TuneRequest, info: dict[str, Any], device: str, driver: int) -> TuneResponse:
        while True:
            lease = await self.store.acquire(key, self.service.owner)
            if lease is False:
                waited = await self.store.wait(key, self.service.config.poll_ms / 1000)
                if isinstance(waited, Tuning):
                    return await self._answer(waited, "redis", req)
                if isinstance(waited, str):
                    raise InvalidArgument(waited)
                found, tier = await self.store.get(key)
                if found is not None:
                    return await self._answer(found, tier, req)
                continue
            renewer = asyncio.ensure_future(self._renew(key)) if lease else None
            try:
                tuning = await self._measure(key, req, info, device, driver)
                await self.store.put(tuning)
            except InvalidArgument as e:
                if lease:
                    await self.store.put_error(key, e.message)
                raise
            finally:
                if renewer is not None:
                    renewer.cancel()
                if lease:
                    await self.store.release(key, self.service.owner)
            return await self._answer(tuning, "tuned", req)

    async def _renew(self, key: str) -> None:
        while True:
            await asyncio.sleep(self.service.config.lease_ms / 3000)
            await self.store.renew(key, self.service.owner)

    async def _compile(self, c: Candidate, target: str) -> tuple[str, Any, str]:
        """(cache key, Entry, the tier that answered) of one config's kernel, through the service's tiers
        (single-flight there too)."""
        creq = self._compile_request(c, target)
        ckey = self.service.key_of(creq)
        entry, tier = self.service.memory.get(ckey), "memory"
        if entry is None:
            entry, tier = await self.service._shared(ckey, creq)
        return ckey, entry, tier

    def _start_compiles(self, req: TuneRequest, target: str) -> list[asyncio.Future[tuple[str, Any, str]]]:
        """Every config's compile, started at once (the service's workers run them in parallel)."""
        tasks: list[asyncio.Future[tuple[str, Any, str]]] = [asyncio.ensure_future(self._compile(c, target))
                                                             for c in req.candidates]
        for t in tasks:
            t.add_done_callback(_retrieved)
        return tasks

    @staticmethod
    async def _landed(task: asyncio.Future[tuple[str, Any, str]]) -> tuple[str, Any, str] | str:
        """One config's (key, Entry, tier) once compiled, or why it failed."""
        try:
            return await task
        except ServiceError as e:
            return f"{e.code}: {e.message}"

    @staticmethod
    def _check_compiled(req: TuneRequest, compiled: list[tuple[str, Any, str] | str]) -> None:
        """InvalidArgument listing every failure when all the configs failed to compile."""
        if all(isinstance(r, str) for r in compiled):
            raise InvalidArgument(f"kernel '{req.kernel}': every one of its {len(compiled)} configs failed to compile:\n"
                                  + "\n".join(f"  config {i} ({c.label}): {r}" for i, (c, r) in
                                              enumerate(zip(req.candidates, compiled))))

    async def _measure(self, key: str, req: TuneRequest, info: dict[str, Any], device: str, driver: int) -> Tuning:
        """Every config compiled at once and screened as its compile lands, whichever lands first (the GPU
        measures the quick compiles while the workers still compile the slow ones); then the contenders
        measured for the client's whole budget. A screened-out config's timing is its first-round figure."""
        start = time.perf_counter()
        target = str(info["target"])
        tasks = self._start_compiles(req, target)
        try:
            sig = await self._signature(req)
            values = arguments(sig, req.args)
        except BaseException:
            for t in tasks:
                t.cancel()
            raise
        compiled: list[tuple[str, Any, str] | str] = ["" for _ in tasks]
        timings: list[float | None] = [None for _ in tasks]
        errors: list[str | None] = [None for _ in tasks]
        index = {task: i for i, task in enumerate(tasks)}
        waiting: set[asyncio.Future[tuple[str, Any, str]]] = set(tasks)
        while waiting:
            landed, waiting = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            for i in sorted(index[task] for task in landed):
                got = compiled[i] = await self._landed(tasks[i])
                if isinstance(got, str):
                    errors[i] = got
                    continue
                timings[i], errors[i] = await self._timed(key, sig, got, req.candidates[i], values, req, info,
                                                          SCREEN_FRACTION)
        self._check_compiled(req, compiled)
        screened = [t for t in timings if t is not None]
        contenders = [i for i, t in enumerate(timings) if t is not None and t <= min(screened) * CONTENDER_MARGIN]
        for i in contenders:
            got = compiled[i]
            assert not isinstance(got, str)
            timings[i], errors[i] = await self._timed(key, sig, got, req.candidates[i], values, req, info, 1.0)
        for ms, got in zip(timings, compiled):
            if not isinstance(got, str):
                self.service.metrics.benchmarks.labels("ok" if ms is not None else "dropped").inc()
        # The winner by the full-budget figures: the first round's are not comparable with them.
        measured = [i for i in contenders if timings[i] is not None] or [i for i, t in enumerate(timings) if t is not None]
        if not measured:
            raise InvalidArgument(f"kernel '{req.kernel}': none of its {len(timings)} configs could be measured:\n"
                                  + "\n".join(f"  config {i} ({c.label}): {e}" for i, (c, e) in
                                              enumerate(zip(req.candidates, errors))))
        winner = min(measured, key=lambda i: timings[i])  # type: ignore[arg-type, return-value]
        compile_keys = [got[0] if not isinstance(got, str) else "" for got in compiled]
        if target != req.target:  # the client's kernels are for its own target
            compile_keys = ["" for _ in compiled]
        return Tuning(key, req.kernel, [c.label for c in req.candidates], timings, errors, winner, device, driver,
                      "daemon", compile_keys, round(time.perf_counter() - start, 6))

    async def _signature(self, req: TuneRequest) -> Signature:
        sigs = [await self.service.signatures.get(self.service.key_of(self._compile_request(c, req.target or "sm_90")),
                                                  c.ir) for c in req.candidates]
        for i, s in enumerate(sigs[1:], 1):
            if s.params != sigs[0].params:
                raise InvalidArgument(f"kernel '{req.kernel}': config {i}'s kernel takes ({s.describe()}), config 0's "
                                      f"takes ({sigs[0].describe()}); every config must be the same kernel")
        return sigs[0]

    async def _timed(self, key: str, sig: Signature, compiled: tuple[str, Any, str], c: Candidate, values: list[Any],
                     req: TuneRequest, info: dict[str, Any], budget: float) -> tuple[float | None, str | None]:
        """`c`'s time in ms for `budget` of the client's warm-up and repetition times, or why it was dropped."""
        ckey, entry, _ = compiled
        try:
            ms = await self._bench(sig, ckey, entry, c, values, req, info, budget)
        except ServiceError as e:
            log.warning("tuning %s: config %s dropped: %s: %s", key, c.label, e.code, e.message)
            return None, f"{e.code}: {e.message}"
        return ms, None

    async def _bench(self, sig: Signature, ckey: str, entry: Any, c: Candidate, values: list[Any], req: TuneRequest,
                     info: dict[str, Any], budget: float) -> float:
        image = await self.service._respond(entry, "memory", int(info.get("driver_version") or 0))
        binary = image.ptx.encode() if image.image_format == "ptx" else image.cubin
        work = execute.job(sig, ckey, binary, image.metadata, c.options.num_warps, execute.check_grid(c.grid), values)
        work["bench"] = {"warmup_ms": req.warmup_ms * budget, "rep_ms": req.rep_ms * budget, "restore": list(req.restore)}
        result = await self.service.gpu.run(work)
        ms = float(result["ms"])
        if not math.isfinite(ms) or ms < 0:
            raise InvalidArgument(f"the GPU worker measured {ms} ms")
        return ms

    async def _answer(self, tuning: Tuning, tier: str, req: TuneRequest) -> TuneResponse:
        """The record and the winner's kernel for the client's target and driver: from the tiers, or compiled
        from the request's candidate when the tiers no longer hold it (None for a lookup then)."""
        ckey = tuning.compile_keys[tuning.winner] if tuning.compile_keys else ""
        entry, found = None, "memory"
        if ckey:
            try:
                entry = await self.service.entry(ckey)
            except NotFound:
                entry = None
        if entry is None and len(req.candidates) == len(tuning.labels):
            _, entry, found = await self._compile(req.candidates[tuning.winner], req.target)
        kernel = None if entry is None else await self.service._respond(entry, found, req.driver_version)
        self.service.metrics.tunings.labels(tier).inc()
        return TuneResponse(tuning.key, tier, tuning, kernel)

    async def _compile_all(self, req: TuneRequest, key: str) -> TuneResponse:
        """For a client that measures itself: every config's kernel for its target and driver."""
        compiled = [await self._landed(t) for t in self._start_compiles(req, req.target)]
        self._check_compiled(req, compiled)
        kernels: list[CompileResponse | None] = []
        errors: list[str | None] = []
        for got in compiled:
            if isinstance(got, str):
                kernels.append(None)
                errors.append(got)
            else:
                kernels.append(await self.service._respond(got[1], got[2], req.driver_version))
                errors.append(None)
        self.service.metrics.tunings.labels("compiled").inc()
        return TuneResponse(key, "compiled", None, None, kernels, errors)

    # ---- records a client measured, listings ------------------------------------------------------

    async def report(self, record: dict[str, Any], client_key: str) -> Tuning:
        """Keep a tuning the client measured (after a "compiled" answer); its key is checked against
        the client key, the GPU and the driver it names."""
        self.service._count("report_tuning")
        try:
            try:
                tuning = from_json(dict(record, measured_by="client"))
            except ValueError as e:
                raise InvalidArgument(f"the tuning record does not check out: {e}") from None
            if not is_key(client_key) or tuning_key(client_key, tuning.device, tuning.driver_version) != tuning.key:
                raise InvalidArgument("the tuning record's key is not the tuning key of its client key, GPU and driver")
            tuning = dataclasses.replace(tuning, compile_keys=[k if is_key(k) else "" for k in tuning.compile_keys])
            await self.store.put(tuning)
            return tuning
        except ServiceError as e:
            raise self.service._failed(e) from None

    async def get(self, key: str) -> Tuning:
        if not is_key(key):
            raise self.service._failed(InvalidArgument(f"{key[:80]!r} is not a tuning key (64 lowercase hex digits)"))
        found, _ = await self.store.get(key)
        if found is None:
            raise self.service._failed(NotFound(f"no tuning with key {key} in this daemon's tiers"))
        return found

    async def list(self, limit: int = 100) -> list[Tuning]:
        return await self.store.recent(limit)

    async def clear(self, key: str | None = None) -> int:
        if key is not None and not is_key(key):
            raise self.service._failed(InvalidArgument(f"{key[:80]!r} is not a tuning key (64 lowercase hex digits)"))
        return await self.store.clear(key)


def _retrieved(task: asyncio.Future[Any]) -> None:
    """Read a finished task's outcome, so that one whose requester went away logs no 'never retrieved'."""
    if not task.cancelled() and task.exception() is not None:
        log.info("a tuning whose client went away failed: %s", task.exception())


def arguments(sig: Signature, args: tuple[TuneArgument, ...]) -> list[Any]:
    """The GPU worker's arguments: each buffer's bytes, {"zeros": nbytes} for a synthetic one, each number
    as its parameter takes it; InvalidArgument naming the argument for any mismatch."""
    from despina.compiler.ir.types import SCALAR_NAMES, ScalarType

    stand_ins: list[Any] = []
    synthetic: dict[int, int] = {}
    for i, (p, a) in enumerate(zip(sig.params, args)):
        if isinstance(a, Synthetic):
            where = f"argument {i} ({p.name}: {p.type}) of kernel '{sig.kernel}'"
            if not p.pointer:
                raise InvalidArgument(f"{where} is a scalar: pass a number, not a synthetic buffer")
            if a.dtype != p.elem or a.dtype not in SCALAR_NAMES:
                raise InvalidArgument(f"{where}: the synthetic buffer holds {a.dtype[:40]} elements, the kernel reads "
                                      f"{p.elem}")
            if len(a.shape) > execute.MAX_DIMS or any(d < 0 for d in a.shape):
                raise InvalidArgument(f"{where}: shape {list(a.shape)[:40]} is not up to {execute.MAX_DIMS} sizes")
            synthetic[i] = math.prod(a.shape) * ScalarType(a.dtype).itemsize
            stand_ins.append(Buffer(b"", a.dtype, (0,)))
        else:
            stand_ins.append(a)
    if sum(synthetic.values()) > MAX_SYNTHETIC_BYTES:
        raise ResourceExhausted(f"the synthetic buffers hold {sum(synthetic.values())} bytes; at most "
                                f"{MAX_SYNTHETIC_BYTES}")
    values: list[Any] = execute.launch_values(sig, stand_ins)
    for i, nbytes in synthetic.items():
        values[i] = {"zeros": nbytes}
    return values
