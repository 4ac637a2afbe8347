"""The compilation service without a transport: what gRPC and HTTP both call.

    service = CompileService(ServiceConfig(redis_url="redis://localhost:6379/0"))
    await service.start()
    response = await service.compile(CompileRequest(ir=encode(module), target="sm_90"))
    response.tier   # "memory", "redis" or "compiled"

A compile request goes: size limits -> options -> cache key -> memory LRU -> Redis -> the IR
decoded and verified as untrusted input -> a lease in Redis (single-flight across daemons) -> a
compile worker. Failures are `errors.ServiceError`s, which the transports map to status codes.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from despina.compiler.ir.codec import IRDecodeError, decode
from despina.compiler.ir.verifier import VerificationError, verify

from . import execute
from .cache import STAGES, Entry, MemoryCache
from .cache.redis_tier import RedisTier
from .config import ServiceConfig
from .errors import DeadlineExceeded, InvalidArgument, NotFound, ResourceExhausted, ServiceError, Unimplemented
from .keys import compile_key, is_key, toolchain
from .metrics import Metrics
from .workers import CompilePool

log = logging.getLogger("despina.server")
TARGET = re.compile(r"sm_[0-9]{2,3}[a-z]?")
MAX_SPECIALIZATION = 256
WARPS = (1, 2, 4, 8, 16, 32)


@dataclass(frozen=True)
class CompileRequest:
    ir: bytes
    target: str = "sm_90"
    num_warps: int = 4
    num_stages: int = 3
    debug: bool = False
    specialization: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CompileResponse:
    key: str
    cubin: bytes
    ptx: str
    metadata: dict[str, Any]
    digest: str
    tier: str


@dataclass(frozen=True)
class ExecuteRequest:
    kernel: CompileRequest
    grid: tuple[int, ...]
    buffers_nbytes: int


class CompileService:
    def __init__(self, config: ServiceConfig, metrics: Metrics | None = None) -> None:
        self.config = config
        self.metrics = metrics or Metrics()
        self.memory = MemoryCache(config.memory_entries, config.memory_bytes)
        self.redis: RedisTier | None = None
        if config.redis_url:
            self.redis = RedisTier(config.redis_url, self.metrics, config.redis_ttl_s, config.redis_timeout_s,
                                   config.redis_retry_s, config.lease_ms)
        self.pool = CompilePool(config.workers, config.compiler, config.compile_timeout_s, self.metrics)
        self.toolchain = toolchain(config.compiler)
        self.owner = uuid.uuid4().hex
        self._flights: dict[str, asyncio.Future[tuple[Entry, str]]] = {}

    async def start(self) -> None:
        await self.pool.start()
        if self.redis is not None and not await self.redis.ping():
            log.warning("Redis at %s is not reachable; starting on the memory tier alone", self.config.redis_url)

    async def close(self) -> None:
        await self.pool.close()
        if self.redis is not None:
            await self.redis.close()

    def _count(self, method: str) -> None:
        self.metrics.requests.labels(method).inc()

    def _failed(self, e: ServiceError) -> ServiceError:
        self.metrics.errors.labels(e.code).inc()
        return e

    # ---- Compile ------------------------------------------------------------------------------

    def key_of(self, req: CompileRequest) -> str:
        """Check the request's sizes and options and return its cache key."""
        if len(req.ir) > self.config.max_ir_bytes:
            raise ResourceExhausted(f"the IR is {len(req.ir)} bytes; this daemon accepts at most {self.config.max_ir_bytes}"
                                    " (despina serve --max-ir-bytes)")
        if not req.ir:
            raise InvalidArgument("the request carries no IR")
        if not TARGET.fullmatch(req.target):
            raise InvalidArgument(f"target {req.target[:40]!r} is not an architecture like 'sm_90'")
        if req.num_warps not in WARPS:
            raise InvalidArgument(f"num_warps must be one of {WARPS}, got {req.num_warps}")
        if not 1 <= req.num_stages <= 16:
            raise InvalidArgument(f"num_stages must be in [1, 16], got {req.num_stages}")
        spec = req.specialization
        if len(spec) > MAX_SPECIALIZATION or any(len(k) + len(v) > 1024 for k, v in spec.items()):
            raise InvalidArgument(f"specialization is limited to {MAX_SPECIALIZATION} entries of 1 KiB")
        return compile_key(req.ir, req.target, req.num_warps, req.num_stages, req.debug, spec, self.toolchain)

    async def compile(self, req: CompileRequest) -> CompileResponse:
        """A cubin and PTX for the request, and the tier that answered."""
        self._count("compile")
        try:
            key = self.key_of(req)
            entry = self.memory.get(key)
            tier = "memory"
            if entry is None:
                entry, tier = await self._shared(key, req)
        except ServiceError as e:
            raise self._failed(e) from None
        self.metrics.answers.labels(tier).inc()
        return CompileResponse(key, entry.cubin, entry.ptx, entry.metadata, entry.digest, tier)

    async def _shared(self, key: str, req: CompileRequest) -> tuple[Entry, str]:
        # Requests for a key this daemon is already fetching or compiling wait on that one.
        flight = self._flights.get(key)
        if flight is not None:
            return await asyncio.shield(flight)
        flight = asyncio.get_running_loop().create_future()
        self._flights[key] = flight
        try:
            result = await self._fetch_or_compile(key, req)
            flight.set_result(result)
            return result
        except BaseException as e:
            flight.set_exception(e)
            flight.exception()  # retrieved: a flight nobody else waited on must not log a warning
            raise
        finally:
            del self._flights[key]

    async def _fetch_or_compile(self, key: str, req: CompileRequest) -> tuple[Entry, str]:
        verified = False
        while True:
            if self.redis is not None:
                entry = await self.redis.get(key)
                if entry is not None:
                    self.memory.put(entry)
                    return entry, "redis"
            # Only a compile needs the IR to be sound: a hit returns what was built from these
            # exact bytes (the key covers them), which were verified before that compile.
            if not verified:
                await asyncio.to_thread(self._verify, req.ir)
                verified = True
            lease = None if self.redis is None else await self.redis.acquire(key, self.owner)
            if lease is False and self.redis is not None:
                waited = await self.redis.wait(key, self.config.poll_ms / 1000)
                if isinstance(waited, Entry):
                    self.memory.put(waited)
                    return waited, "redis"
                if isinstance(waited, str):
                    raise InvalidArgument(waited)
                continue  # the lease expired without an entry, or Redis failed: try again
            return await self._compile_and_publish(key, req, lease is True), "compiled"

    @staticmethod
    def _verify(ir: bytes) -> None:
        try:
            verify(decode(ir))
        except IRDecodeError as e:
            raise InvalidArgument(f"invalid IR: {e}") from None
        except VerificationError as e:
            raise InvalidArgument(f"the IR failed verification: {e}") from None

    async def _compile_and_publish(self, key: str, req: CompileRequest, leased: bool) -> Entry:
        renewer = asyncio.ensure_future(self._renew(key)) if leased else None
        try:
            entry = await self._compile(key, req)
            if self.redis is not None:
                await self.redis.put(entry)  # before the lease goes, so that its waiters find the entry
            return entry
        except (InvalidArgument, DeadlineExceeded) as e:
            if leased and self.redis is not None:
                await self.redis.put_error(key, e.message)
            raise
        finally:
            if renewer is not None:
                renewer.cancel()
            if leased and self.redis is not None:
                await self.redis.release(key, self.owner)

    async def _compile(self, key: str, req: CompileRequest) -> Entry:
        self.metrics.in_flight.inc()
        try:
            with self.metrics.compile_seconds.time():
                result = await self.pool.compile(req.ir, req.target, req.num_warps, req.num_stages)
        except ServiceError as e:
            outcome = {"INVALID_ARGUMENT": "error", "DEADLINE_EXCEEDED": "timeout"}.get(e.code, "crash")
            self.metrics.compiles.labels(outcome).inc()
            raise
        finally:
            self.metrics.in_flight.dec()
        self.metrics.compiles.labels("ok").inc()
        metadata = dict(result["metadata"], target=req.target, num_warps=req.num_warps, num_stages=req.num_stages,
                        compile_seconds=round(result["seconds"], 6))
        entry = Entry(key, result["stages"], metadata)
        self.memory.put(entry)
        return entry

    async def _renew(self, key: str) -> None:
        assert self.redis is not None
        while True:
            await asyncio.sleep(self.config.lease_ms / 3000)
            await self.redis.renew(key, self.owner)

    # ---- artifacts and listings ---------------------------------------------------------------

    async def entry(self, key: str) -> Entry:
        """The cached kernel for `key` (memory, then Redis); `NotFound` when neither has it."""
        if not is_key(key):
            raise self._failed(InvalidArgument(f"{key[:80]!r} is not a cache key (64 lowercase hex digits)"))
        entry = self.memory.get(key)
        if entry is None and self.redis is not None:
            entry = await self.redis.get(key)
            if entry is not None:
                self.memory.put(entry)
        if entry is None:
            raise self._failed(NotFound(f"no kernel with key {key} in this daemon's cache"))
        return entry

    async def get_artifact(self, key: str, stage: str) -> bytes:
        """One stage's output: text stages as UTF-8, the cubin as its bytes."""
        self._count("get_artifact")
        if stage not in STAGES:
            raise self._failed(InvalidArgument(f"stage {stage[:40]!r} is not one of {', '.join(STAGES)}"))
        entry = await self.entry(key)
        if stage not in entry.stages:
            raise self._failed(NotFound(f"kernel {key} has no '{stage}' stage (the backend did not produce one)"))
        return entry.stages[stage]

    def recent(self, limit: int = 100) -> list[dict[str, Any]]:
        self._count("list")
        return [e.summary() for e in self.memory.recent(limit)]

    # ---- Execute and Stats --------------------------------------------------------------------

    async def execute(self, req: ExecuteRequest) -> list[bytes]:
        """Run the kernel on this host's GPU; see execute.py for the design."""
        self._count("execute")
        if req.buffers_nbytes + len(req.kernel.ir) > self.config.max_request_bytes:
            raise self._failed(ResourceExhausted(f"the request's buffers and IR hold {req.buffers_nbytes + len(req.kernel.ir)}"
                                                 f" bytes; this daemon accepts at most {self.config.max_request_bytes}"))
        if not 1 <= len(req.grid) <= 3 or any(g < 1 for g in req.grid):
            raise self._failed(InvalidArgument(f"grid must be 1 to 3 positive numbers, got {list(req.grid)}"))
        raise self._failed(Unimplemented(execute.unavailable_reason()))

    def stats(self) -> dict[str, Any]:
        m = self.metrics
        return {
            "requests": int(sum(m.value("despina_requests_total", method=x)
                                for x in ("compile", "get_artifact", "list", "execute"))),
            "hits": {t: int(m.value("despina_cache_answers_total", tier=t)) for t in ("memory", "redis", "compiled")},
            "compiles": int(m.value("despina_compiles_total", outcome="ok")),
            "compile_errors": int(sum(m.value("despina_compiles_total", outcome=x) for x in ("error", "timeout", "crash"))),
            "in_flight": int(m.value("despina_compiles_in_flight")),
            "workers": len(self.pool.workers),
            "worker_pids": self.pool.pids(),
            "memory_entries": len(self.memory),
            "memory_bytes": self.memory.nbytes,
            "redis_connected": self.redis is not None and self.redis.connected,
            "redis_errors": int(sum(s.value for mf in m.redis_errors.collect() for s in mf.samples
                                    if s.name.endswith("_total"))),
        }
