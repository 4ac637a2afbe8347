"""The compilation service without a transport: what gRPC and HTTP both call (its requests and responses:
`messages.py`).

    service = CompileService(ServiceConfig(redis_url="redis://localhost:6379/0"))
    await service.start()
    response = await service.compile(CompileRequest(ir=encode(module), target="sm_90"))
    response.tier   # "memory", "disk", "redis" or "compiled"

A compile request goes: size limits -> options -> cache key -> memory LRU -> disk -> Redis -> the
IR decoded and verified as untrusted input -> a lease in Redis (single-flight across daemons) -> a
compile worker; what a lower tier answers fills the tiers above it. The answer is the cubin, or,
for a client whose CUDA driver is older than the toolchain, PTX it can JIT (images.py), both from
the same cached kernel. Failures are `errors.ServiceError`s, which the transports map to status codes.

An execute request is checked (sizes, grid, the arguments against the kernel's signature), compiled
the same way for the GPU of the daemon's GPU worker, and run there (execute.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import json
import logging
import re
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from despina.compiler.ir.codec import IRDecodeError
from despina.compiler.options import OptionError
from despina.runtime import inventory

from . import execute, images
from .cache import STAGES, Entry, MemoryCache
from .cache.admin import CacheAdmin
from .cache.disk import DiskTier
from .cache.redis_tier import RETRY, Failure, RedisTier
from .config import DEFAULT_EXECUTOR, ServiceConfig
from .disassembly import Disassembler
from .errors import (
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    ServiceError,
)
from .execute import Buffer
from .intake import LARGE, Intake
from .keys import compile_key, is_key, key_pieces, toolchain
from .lines import lines_of
from .messages import CompileRequest, CompileResponse, ExecuteRequest, ExecuteResponse
from .metrics import Metrics, counts
from .tenancy import TENANT, Owners, visible
from .workers import CompilePool

log = logging.getLogger("despina.server")
TARGET = re.compile(r"sm_[0-9]{2,3}[a-z]?")
MAX_SPECIALIZATION = 256
MAX_DRIVER_VERSION = 999_990
PTX_CHECKS = 4096
SIGNATURES = 1024
# What a waiting daemon answers for another daemon's failed compile: the same status.
_SHARED_FAILURES: dict[str, type[ServiceError]] = {
    e.code: e for e in (InvalidArgument, DeadlineExceeded, ResourceExhausted)}


@dataclass
class _Flight:
    """One fetch-or-compile of a key and how many requests wait on it."""

    task: asyncio.Future[tuple[Entry, str]]
    waiters: int = 0
    abandoned: bool = False  # every caller left and the task was cancelled: a new caller starts afresh


class CompileService:
    def __init__(self, config: ServiceConfig, metrics: Metrics | None = None) -> None:
        self.config = config
        self.metrics = metrics or Metrics()
        self.memory = MemoryCache(config.memory_entries, config.memory_bytes)
        self.disk: DiskTier | None = None
        if config.disk_dir:
            self.disk = DiskTier(config.disk_dir, config.disk_bytes, self.metrics, in_use=self.memory.__contains__,
                                 secret=config.cluster_secret)
        self.redis: RedisTier | None = None
        if config.redis_url:
            self.redis = RedisTier(config.redis_url, self.metrics, config.redis_ttl_s, config.redis_timeout_s,
                                   config.redis_retry_s, config.lease_ms, config.cluster_secret,
                                   max_wait_s=config.compile_timeout_s + config.lease_ms / 1000,
                                   cluster=config.redis_cluster)
        self.admin = CacheAdmin(self.memory, self.disk, self.redis)
        self.owners = Owners(config.disk_dir, self.redis, config.redis_ttl_s)
        self.pool = CompilePool(config.workers, config.compiler, config.compile_timeout_s, self.metrics,
                                config.worker_memory_bytes, config.extra_workers, config.slow_compile_s)
        self.intake = Intake(self.pool, config.checks_per_client, 4 * config.max_ir_bytes)
        # Execute's GPU worker, started by the first Execute. The host check (no /dev/nvidiactl, no
        # cuda-bindings) is for the real executor; a test's executor decides for itself.
        precheck = execute.host_unavailable_reason if config.executor == DEFAULT_EXECUTOR else None
        self.gpu = execute.GpuRunner(config.executor, config.execute_timeout_s, self.metrics, precheck)
        self.signatures = execute.Signatures(SIGNATURES, self.intake.signature)
        self.toolchain = toolchain(config.compiler)
        self.owner = uuid.uuid4().hex
        self._flights: dict[str, _Flight] = {}
        self._writes: set[asyncio.Task[None]] = set()  # disk copies of lower tiers' hits, written after the answer
        # nvJitLink's verdict on lowered PTX, by (key, ISA version): None when it links, else its log.
        self._ptx_checks: OrderedDict[tuple[str, images.Version], str | None] = OrderedDict()
        self._nvjitlink = config.verify_ptx
        from .tuning import Tuner  # it builds on this class

        self.tuner = Tuner(self)

    async def start(self) -> None:
        await self.pool.start()
        await asyncio.to_thread(images.nvjitlink_release)  # imported here, not on the first old-driver request
        if self.disk is not None:
            await asyncio.to_thread(self.disk.scan)
            log.info("disk cache %s: %d kernels, %.1f MiB (bound %.1f MiB)", self.disk.directory, self.disk.entries,
                     self.disk.nbytes / 2**20, self.disk.max_bytes / 2**20)
        if self.redis is not None and not await self.redis.ping():
            log.warning("Redis at %s is not reachable; starting on the %s alone", self.redis.url,
                        "memory and disk tiers" if self.disk is not None else "memory tier")

    async def close(self) -> None:
        await asyncio.gather(*self._writes)
        await self.gpu.close()
        await self.pool.close()
        if self.redis is not None:
            await self.redis.close()

    def _count(self, method: str) -> None:
        self.metrics.requests.labels(method).inc()

    def _failed(self, e: ServiceError) -> ServiceError:
        if not e.counted:
            e.counted = True
            self.metrics.errors.labels(e.code).inc()
        return e

    def refused(self, e: ServiceError) -> ServiceError:
        """`e`, counted in despina_errors_total once: a transport calls it for every error it answers with,
        those it raised itself (no token, a body too large or malformed) and those the service raised."""
        return self._failed(e)

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
        try:
            req.options.check()
        except OptionError as e:
            raise InvalidArgument(str(e)) from None
        if not 0 <= req.driver_version <= MAX_DRIVER_VERSION:
            raise InvalidArgument(f"driver_version must be cuDriverGetVersion's number (12080 for CUDA 12.8) or 0,"
                                  f" got {req.driver_version}")
        spec = req.specialization
        if len(spec) > MAX_SPECIALIZATION or any(len(k) + len(v) > 1024 for k, v in spec.items()):
            raise InvalidArgument(f"specialization is limited to {MAX_SPECIALIZATION} entries of 1 KiB")
        try:
            ir = key_pieces(req.ir)
        except IRDecodeError as e:
            raise InvalidArgument(f"invalid IR: {e}") from None
        return compile_key(ir, req.target, req.options, spec, self.toolchain)

    async def compile(self, req: CompileRequest) -> CompileResponse:
        """A cubin and PTX for the request (PTX alone for a driver older than the toolchain), and the
        tier that answered."""
        self._count("compile")
        try:
            # Hashing megabytes of IR releases the GIL: off the event loop, the hits go on meanwhile.
            key = self.key_of(req) if len(req.ir) < LARGE else await asyncio.to_thread(self.key_of, req)
            entry = self.memory.get(key)
            tier = "memory"
            if entry is None:
                entry, tier = await self._shared(key, req)
            response = await self._respond(entry, tier, req.driver_version)
        except ServiceError as e:
            raise self._failed(e) from None
        tenant = TENANT.get()
        if tenant:  # the asker owns what it was answered with (no tenants: nobody needs to)
            await self.owners.add(response.key, tenant)
        self.admin.used(response.key, tier)
        self.metrics.answers.labels(tier).inc()
        self.metrics.images.labels(response.image_format).inc()
        return response

    # ---- the image: a cubin, or PTX for an older driver -----------------------------------------

    def toolchain_release(self, entry: Entry) -> images.Version | None:
        """The release of what made `entry`'s cubin: the backend records its assembler (nvJitLink, or ptxas for a
        kernel using setmaxnreg) in the metadata; for a backend that does not, its nvJitLink's, else the
        daemon's own nvJitLink."""
        meta = entry.metadata
        return (images.parse_release(meta.get("assembler_version")) or images.parse_release(meta.get("nvjitlink_version"))
                or images.nvjitlink_release())

    async def _respond(self, entry: Entry, tier: str, driver_version: int) -> CompileResponse:
        toolchain = self.toolchain_release(entry) if driver_version else None
        image = images.choose(entry.ptx, driver_version, toolchain)
        if image.format == "cubin":
            return CompileResponse(entry.key, entry.cubin, entry.ptx, entry.metadata, entry.digest, tier)
        assert image.version is not None and toolchain is not None
        if image.lowered:
            error = await self._check_ptx(entry.key, image)
            if error:
                first = next((line for line in error.splitlines() if "error" in line), error.splitlines()[0])
                driver = images.show(images.driver_release(driver_version))
                raise FailedPrecondition(
                    f"the client's CUDA driver {driver} is too old for this kernel: the daemon's toolchain (nvJitLink "
                    f"{images.show(toolchain)}) makes cubins for CUDA drivers {images.show(toolchain)} and newer, and the"
                    f" kernel's PTX uses more than PTX ISA {images.show(image.version)}, the newest that driver JITs "
                    f"(nvJitLink: {first.strip()}). Update the driver to CUDA {images.show(toolchain)} or newer")
        metadata = dict(entry.metadata, image_format="ptx", ptx_version=images.show(image.version),
                        driver_version=driver_version)
        digest = hashlib.sha256(image.ptx.encode()).hexdigest()
        return CompileResponse(entry.key, b"", image.ptx, metadata, digest, tier, "ptx")

    async def _check_ptx(self, key: str, image: images.Image) -> str | None:
        """nvJitLink's error log for the lowered PTX, None when it links (or when this daemon cannot tell)."""
        assert image.version is not None
        # Without nvJitLink here, the static checks (images.FEATURES) stand alone.
        if not self._nvjitlink or images.nvjitlink_release() is None:
            return None
        check = (key, image.version)
        if check in self._ptx_checks:
            self._ptx_checks.move_to_end(check)
            return self._ptx_checks[check]
        try:
            error = await asyncio.to_thread(images.check_with_nvjitlink, image.ptx)
        except Exception as e:  # nvJitLink could not try (a target it does not know): not the kernel's fault
            log.warning("lowered PTX of %s not checked with nvJitLink: %s: %s", key, type(e).__name__, e)
            return None
        self._ptx_checks[check] = error
        if len(self._ptx_checks) > PTX_CHECKS:
            self._ptx_checks.popitem(last=False)
        return error

    async def _shared(self, key: str, req: CompileRequest) -> tuple[Entry, str]:
        """Fetch or compile `key` once for every request that wants it now (single-flight). The work
        runs as a task of its own: a caller that gives up (a gRPC deadline, a cancelled call) leaves
        without touching it, the others still get its answer, and it is stopped only when no caller
        is left to take it."""
        flight = self._flights.get(key)
        if flight is None or flight.abandoned:
            flight = self._flights[key] = _Flight(asyncio.ensure_future(self._fetch_or_compile(key, req)))
            flight.task.add_done_callback(functools.partial(self._landed, key, flight))
        flight.waiters += 1
        try:
            return await asyncio.shield(flight.task)
        finally:
            flight.waiters -= 1
            if flight.waiters == 0 and not flight.task.done():
                flight.abandoned = True
                flight.task.cancel()
            # A failure's traceback holds this frame, and the flight its task, which holds the failure: without
            # this, each failed request (its IR with it) waited for a full garbage collection.
            del flight

    def _landed(self, key: str, flight: _Flight, task: asyncio.Future[Any]) -> None:
        if self._flights.get(key) is flight:
            del self._flights[key]
        if not flight.task.cancelled():
            flight.task.exception()  # retrieved: a flight whose callers all left must not log a warning

    async def _disk_get(self, key: str) -> Entry | None:
        if self.disk is None:
            return None
        try:
            return await asyncio.to_thread(self.disk.get, key)
        except Exception as e:  # the disk tier fails open, like Redis
            log.warning("disk cache read of %s failed: %s: %s", key, type(e).__name__, e)
            self.metrics.disk_errors.labels("read").inc()
            return None

    async def _disk_put(self, entry: Entry) -> None:
        if self.disk is None:
            return
        try:
            await asyncio.to_thread(self.disk.put, entry)
        except Exception as e:
            log.warning("disk cache write of %s failed: %s: %s", entry.key, type(e).__name__, e)
            self.metrics.disk_errors.labels("write").inc()

    async def _found(self, entry: Entry, disk: bool = True) -> Entry:
        """An entry a lower tier answered, kept in the tiers above it: in memory at once, on disk by a task
        that the answer does not wait for (a second daemon's first Redis hit of a tuned matmul waited
        for its disk write; `close` waits for the writes still running)."""
        self.memory.put(entry)
        if disk and self.disk is not None:
            task = asyncio.create_task(self._disk_put(entry))
            self._writes.add(task)
            task.add_done_callback(self._writes.discard)
        return entry

    async def _fetch_or_compile(self, key: str, req: CompileRequest) -> tuple[Entry, str]:
        entry = await self._disk_get(key)
        if entry is not None:
            return await self._found(entry, disk=False), "disk"
        verified = False
        while True:
            if self.redis is not None:
                entry = await self.redis.get(key)
                if entry is not None:
                    return await self._found(entry), "redis"
            # Only a compile needs the IR to be sound: a hit returns what was built from these
            # exact bytes (the key covers them), which were verified before that compile.
            if not verified:
                await self.intake.verify(req.ir)
                verified = True
            lease = None if self.redis is None else await self.redis.acquire(key, self.owner)
            if lease is False and self.redis is not None:
                waited = await self.redis.wait(key, self.config.poll_ms / 1000)
                if isinstance(waited, Entry):
                    return await self._found(waited), "redis"
                if isinstance(waited, Failure):
                    raise _SHARED_FAILURES.get(waited.code, Internal)(waited.message)
                if waited == RETRY:  # the lease expired without an entry, or Redis failed: try again
                    continue
            return await self._compile_and_publish(key, req, lease is True), "compiled"

    async def _compile_and_publish(self, key: str, req: CompileRequest, leased: bool) -> Entry:
        renewer = asyncio.ensure_future(self._renew(key)) if leased else None
        try:
            entry = await self._compile(key, req)
            if self.redis is not None:
                await self.redis.put(entry)  # before the lease goes, so that its waiters find the entry
            await self._disk_put(entry)
            return entry
        except (InvalidArgument, DeadlineExceeded, ResourceExhausted) as e:
            if leased and self.redis is not None:
                await self.redis.put_error(key, e.code, e.message)
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
                result = await self.pool.compile(req.ir, req.target, req.options)
        except ServiceError as e:
            outcome = {"INVALID_ARGUMENT": "error", "DEADLINE_EXCEEDED": "timeout"}.get(e.code, "crash")
            self.metrics.compiles.labels(outcome).inc()
            if outcome == "crash":  # verified IR that the backend cannot compile is a bug of ours
                log.error("compiling key %s failed: %s: %s", key, e.code, e.message)
            raise
        finally:
            self.metrics.in_flight.dec()
        self.metrics.compiles.labels("ok").inc()
        metadata = dict(result["metadata"], target=req.target, **req.options.as_dict(),
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
        """The cached kernel for `key` (memory, then disk, then Redis); `NotFound` when none has it."""
        if not is_key(key):
            raise self._failed(InvalidArgument(f"{key[:80]!r} is not a cache key (64 lowercase hex digits)"))
        entry = self.memory.get(key)
        if entry is None:
            entry = await self._disk_get(key)
            if entry is not None:
                self.memory.put(entry)
        if entry is None and self.redis is not None:
            entry = await self.redis.get(key)
            if entry is not None:
                await self._found(entry)
        if entry is None or not await visible(self.owners, key):  # another tenant's is not there for this one
            raise self._failed(NotFound(f"no kernel with key {key} in this daemon's cache"))
        return entry

    async def describe(self, key: str) -> dict[str, Any]:
        """One kernel as `kernels` lists it, with its metadata."""
        self._count("describe")
        entry = await self.entry(key)
        return dict(self.admin.item(entry).to_json(), metadata=entry.metadata)

    async def get_artifact(self, key: str, stage: str) -> bytes:
        """One stage's output: text stages as UTF-8, the cubin as its bytes, `lines` as `get_lines`' JSON. The
        SASS is disassembled on the first request for it (FAILED_PRECONDITION on a daemon without nvdisasm) and kept."""
        self._count("get_artifact")
        try:
            if stage not in STAGES:
                raise InvalidArgument(f"stage {stage[:40]!r} is not one of {', '.join(STAGES)}")
            entry = await self.entry(key)
            if stage == "lines":
                return json.dumps(await lines_of(entry, self.disassembler, self._keep)).encode()
            if stage == "sass" and stage not in entry.stages:
                entry = await self.disassembler.run(entry, self._keep)
            if stage not in entry.stages:
                raise NotFound(f"kernel {key} has no '{stage}' stage (the backend did not produce one)")
        except ServiceError as e:
            raise self._failed(e) from None
        return entry.stages[stage]

    async def get_lines(self, key: str) -> dict[str, Any]:
        """The source line of each line of the kernel's stages, and its source text (see server/lines.py)."""
        self._count("get_lines")
        try:
            return await lines_of(await self.entry(key), self.disassembler, self._keep)
        except ServiceError as e:
            raise self._failed(e) from None

    @functools.cached_property
    def disassembler(self) -> Disassembler:
        """nvdisasm for `get_artifact(key, "sass")`: as many at once as there are compile workers."""
        return Disassembler(self.config.workers)

    async def _keep(self, entry: Entry) -> None:
        """`entry`, grown by a stage made after its compile (the SASS), in place of the old one in every tier."""
        self.memory.put(entry)
        await self._disk_put(entry)
        if self.redis is not None:
            await self.redis.put(entry)

    async def kernels(self, name: str | None = None, target: str | None = None, since: str | None = None,
                      limit: int = 100) -> list[dict[str, Any]]:
        """The kernels of the memory and disk tiers, the most recently used first: `name` a glob, `target`
        exact, `since` an age (30m, 7d) or an ISO 8601 time."""
        self._count("list")
        try:
            used_since = self._when("since", since)
            items = await self.admin.listing(name, target, used_since, limit if TENANT.get() is None else None)
            shown = [i for i in items if await visible(self.owners, i.key)]
            return [i.to_json() for i in shown[:limit]]
        except ServiceError as e:
            raise self._failed(e) from None

    async def delete(self, key: str) -> list[str]:
        """Delete one kernel from memory, disk and Redis; the tiers that held it (`NotFound` for none)."""
        self._count("delete")
        try:
            if not is_key(key):
                raise InvalidArgument(f"{key[:80]!r} is not a cache key (64 lowercase hex digits)")
            tiers = await self.admin.delete(key) if await visible(self.owners, key) else []
            if not tiers:
                raise NotFound(f"no kernel with key {key} in this daemon's cache")
            await self.owners.forget(key)
        except ServiceError as e:
            raise self._failed(e) from None
        return tiers

    async def delete_unused(self, older_than: str, name: str | None = None, target: str | None = None) -> list[str]:
        """Delete from memory and disk the kernels not used since `older_than` (an age or a time); their keys."""
        self._count("delete")
        try:
            cutoff = self._when("older_than", older_than)
            assert cutoff is not None
            deleted = await self.admin.delete_unused_since(cutoff, name, target, self._visible)
            for key in deleted:
                await self.owners.forget(key, in_redis=False)  # the kernel stays in Redis, and so do its owners
            return deleted
        except ServiceError as e:
            raise self._failed(e) from None

    async def _visible(self, key: str) -> bool:
        return await visible(self.owners, key)

    @staticmethod
    def _when(field: str, text: str | None) -> float | None:
        if text is None:
            return None
        try:
            return inventory.parse_when(text)
        except ValueError as e:
            raise InvalidArgument(f"{field}: {e}") from None

    # ---- Execute and Stats --------------------------------------------------------------------

    async def execute(self, req: ExecuteRequest) -> ExecuteResponse:
        """Run the kernel on this host's GPU with the request's buffers; see execute.py for the design.

        The request is checked first (sizes, grid, options, the arguments against the kernel's
        signature), then the GPU worker is asked for its device (Unimplemented on a host without
        one), then the kernel is compiled for that device through the tiers, as Compile does."""
        self._count("execute")
        ran = False
        try:
            total = req.buffers_nbytes + len(req.kernel.ir)
            if total > self.config.max_request_bytes:
                raise ResourceExhausted(f"the request's buffers and IR hold {total} bytes; this daemon accepts at most "
                                        f"{self.config.max_request_bytes} (despina serve --max-request-bytes)")
            grid = execute.check_grid(req.grid)
            kernel = dataclasses.replace(req.kernel, driver_version=0)
            key = self.key_of(dataclasses.replace(kernel, target=kernel.target or "sm_90"))  # sizes and options
            sig = await self.signatures.get(key, bytes(kernel.ir))  # the transports decode Execute's IR into bytes
            values = execute.launch_values(sig, req.args)
            device = await self.gpu.device()
            kernel = dataclasses.replace(kernel, target=kernel.target or str(device["target"]),
                                         driver_version=int(device.get("driver_version") or 0))
            key = self.key_of(kernel)
            entry = self.memory.get(key)
            tier = "memory"
            if entry is None:
                entry, tier = await self._shared(key, kernel)
            self.metrics.answers.labels(tier).inc()
            image = await self._respond(entry, tier, kernel.driver_version)
            binary = image.ptx.encode() if image.image_format == "ptx" else image.cubin
            work = execute.job(sig, key, binary, image.metadata, kernel.options.num_warps, grid, values)
            ran = True  # from here on the GPU runner counts the outcome
            result = await self.gpu.run(work)
            sent = [a for a in req.args if isinstance(a, Buffer)]
            back = result["buffers"]
            if len(back) != len(sent) or any(len(b) != len(a.data) for b, a in zip(back, sent)):
                raise Internal(f"the GPU worker sent back {len(back)} buffers of {[len(b) for b in back][:8]} bytes for "
                               f"{len(sent)} of {[len(a.data) for a in sent][:8]}")
            buffers = [Buffer(bytes(data), a.dtype, a.shape) for data, a in zip(back, sent)]
        except ServiceError as e:
            if not ran:
                self.metrics.executes.labels("refused").inc()
            raise self._failed(e) from None
        self.admin.used(key, tier)
        return ExecuteResponse(buffers, key, tier, float(result.get("seconds", 0.0)))

    def stats(self) -> dict[str, Any]:
        """The numbers /metrics exposes, read from the same counters: `errors` counts every error answer
        by code (refusals before any work included), `compile_errors` the compilations that failed in a
        worker, `executes` the Execute requests by outcome."""
        return {
            **counts(self.metrics),
            "workers": len(self.pool.workers),
            "worker_pids": self.pool.pids(),
            "memory_entries": len(self.memory),
            "memory_bytes": self.memory.nbytes,
            "redis_connected": self.redis is not None and self.redis.connected,
            "disk_entries": self.disk.entries if self.disk is not None else 0,
            "disk_bytes": self.disk.nbytes if self.disk is not None else 0,
        }

