"""What the service (`core.CompileService`) takes and answers, whatever the transport: compile and execute
requests and responses."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from despina.compiler.options import DEFAULTS, CompileOptions

from . import execute
from .execute import Argument, Buffer

# A request's IR: the bytes a transport decoded, or a view of a large gRPC request's own bytes (no copy).
Blob = bytes | memoryview


@dataclass(frozen=True)
class CompileRequest:
    ir: Blob
    target: str = "sm_90"
    options: CompileOptions = DEFAULTS
    specialization: Mapping[str, str] = field(default_factory=dict)
    # The client's CUDA driver (cuDriverGetVersion: 12080 is 12.8); 0 when unknown.
    driver_version: int = 0


@dataclass(frozen=True)
class CompileResponse:
    """`image_format` "cubin": `cubin` is what the client loads; "ptx": `ptx` is (its .version
    lowered for the client's driver) and `cubin` is empty. `digest` is the SHA-256 of that image."""

    key: str
    cubin: bytes
    ptx: str
    metadata: dict[str, Any]
    digest: str
    tier: str
    image_format: str = "cubin"


@dataclass(frozen=True)
class ExecuteRequest:
    """Run `kernel` on the daemon's GPU over `grid` with `args` (Buffer, int or float; None for an
    argument that set none). An empty `kernel.target` means the daemon's GPU; `kernel.driver_version`
    is ignored (the daemon's own driver loads the kernel)."""

    kernel: CompileRequest
    grid: tuple[int, ...]
    args: tuple[Argument, ...] = ()

    @property
    def buffers_nbytes(self) -> int:
        return execute.buffers_nbytes(self.args)


@dataclass(frozen=True)
class ExecuteResponse:
    """Every buffer argument after the kernel ran, in argument order; the kernel's cache key, the tier
    that answered its compile, and the kernel's time on the GPU."""

    buffers: list[Buffer]
    key: str
    tier: str
    seconds: float
