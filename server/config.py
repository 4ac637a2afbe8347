"""The daemon's settings, in one typed place; `despina serve` fills them from its flags."""

from __future__ import annotations

import os
from dataclasses import dataclass

MiB = 1 << 20
DEFAULT_COMPILER = "despina.compiler.backends.nvptx:compile_module"


@dataclass(frozen=True)
class ServiceConfig:
    """What `CompileService` needs; every field has a default that suits one GPU host."""

    redis_url: str | None = None
    workers: int = max(1, os.cpu_count() or 1)
    compile_timeout_s: float = 120.0
    # "module:function" taking (module, target=, num_warps=, num_stages=) and returning an object
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
    max_ir_bytes: int = 8 * MiB
    max_request_bytes: int = 64 * MiB
