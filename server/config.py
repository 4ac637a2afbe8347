"""The daemon's settings, in one typed place; `despina serve` fills them from its flags."""

from __future__ import annotations

import os
from dataclasses import dataclass

MiB = 1 << 20
GiB = 1 << 30
DEFAULT_COMPILER = "despina.compiler.backends.nvptx:compile_module"
# What the GPU worker of Execute runs: a function returning an executor (server/gpu.py).
DEFAULT_EXECUTOR = "despina.server.gpu:open_executor"


@dataclass(frozen=True)
class ServiceConfig:
    """What `CompileService` needs; every field has a default that suits one GPU host."""

    # One Redis, or the master Sentinel names (server/cache/redis_url.py for the forms);
    # with redis_cluster, one seed node of a Redis Cluster.
    redis_url: str | None = None
    redis_cluster: bool = False
    workers: int = max(1, os.cpu_count() or 1)
    compile_timeout_s: float = 120.0
    # The address-space cap (RLIMIT_AS) of each compile worker; 0: none. A kernel past it is
    # RESOURCE_EXHAUSTED, and its worker is replaced.
    worker_memory_bytes: int = 4 * GiB
    # Extra compile workers started while every worker has been busy for `slow_compile_s` and requests
    # wait (so that slow compiles do not hold up the rest); the pool shrinks back once they are over.
    extra_workers: int = 1
    slow_compile_s: float = 2.0
    # "module:function" taking (module, target=, options=CompileOptions) and returning an object
    # with `.asm` (stage -> text or bytes) and `.metadata` (a JSON-able dict).
    compiler: str = DEFAULT_COMPILER
    memory_entries: int = 4096
    memory_bytes: int = 512 * MiB
    redis_ttl_s: int = 7 * 24 * 3600
    redis_timeout_s: float = 0.5
    # A Redis that failed is skipped for this long before the next try, so a dead Redis costs
    # one timeout per interval rather than one per request.
    redis_retry_s: float = 1.0
    # The single-flight lease: short, and renewed while the compile runs, so that a crashed
    # daemon holds a key for at most this long.
    lease_ms: int = 10_000
    poll_ms: int = 20
    # Keys the MAC of every entry in the disk and Redis tiers (and of Redis error records): with it,
    # write access to Redis or the cache folder does not let anyone plant a kernel that daemons serve.
    cluster_secret: bytes | None = None
    max_ir_bytes: int = 8 * MiB
    max_request_bytes: int = 64 * MiB
    # Kernels of one client (one address) waiting for, or in, the check of their IR in a compile
    # worker (server/intake.py); past it, or past 4 * max_ir_bytes of their IR, RESOURCE_EXHAUSTED.
    checks_per_client: int = 32
    # HTTP (server/http_guard.py, http_body.py): connections at once; seconds a request's headers, and
    # then its body, may take to arrive.
    http_max_connections: int = 1000
    http_header_timeout_s: float = 10.0
    http_body_timeout_s: float = 60.0
    # The disk tier's folder (None: no disk tier). `despina serve` turns it on by default, with
    # `default_disk_dir()`; a bare ServiceConfig leaves it off so that services built in-process
    # share no state through the user's home folder.
    disk_dir: str | None = None
    # Its bound: past it, the least recently used files are deleted.
    disk_bytes: int = 10 * GiB
    # Link a PTX answer whose .version was lowered with the daemon's nvJitLink first (when it has
    # one), so that a kernel using an instruction newer than that version is refused here, with
    # ptxas' message, rather than by the client's driver at load time.
    verify_ptx: bool = True
    # Execute: seconds one kernel run may take in the GPU worker (load, copies, the kernel, copies
    # back) before the daemon kills that worker and answers DEADLINE_EXCEEDED.
    execute_timeout_s: float = 30.0
    # Execute's GPU worker entry point, "module:function": called once in the worker, it opens the
    # device and returns an object with `.info` and `.run(job)` (server/gpu.py; tests swap in fakes).
    executor: str = DEFAULT_EXECUTOR


def default_disk_dir() -> str:
    """$DESPINA_CACHE_DIR/daemon, or ~/.cache/despina/daemon: beside the client's own disk cache."""
    from despina.runtime.cache import cache_dir

    return str(cache_dir() / "daemon")
