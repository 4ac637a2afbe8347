"""The HTTP transport: a FastAPI app over `CompileService` (OpenAPI at /docs, Prometheus at /metrics).

    POST /v1/compile               IR (base64) + options + target [+ driver_version] -> cubin (base64), PTX,
                                   metadata, tier, image_format (cubin, or ptx for an older driver)
    POST /v1/execute               a kernel (as /v1/compile takes it), grid and arguments (buffers base64) -> every
                                   buffer after the kernel ran on the daemon's GPU
    GET  /v1/kernels               recently used kernels: name, target, sizes, key
    GET  /v1/kernels/{key}         one kernel's metadata
    GET  /v1/kernels/{key}/{stage} ir, gpuir, llir, ptx, sass as text; cubin as bytes
    GET  /healthz                  liveness (the one route that needs no token)
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from fastapi import FastAPI, Query
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, Field
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import auth
from .cache.entry import TEXT_STAGES
from .core import CompileRequest, CompileService, ExecuteRequest
from .errors import InvalidArgument, ResourceExhausted, ServiceError
from .execute import Argument, Buffer


class Options(BaseModel):
    num_warps: int = 4
    num_stages: int = 3
    debug: bool = False


class CompileBody(BaseModel):
    ir: str = Field(description="A despina.ir.v1.Module (proto/ir.proto) as codec.encode writes it, base64-encoded.")
    target: str = Field("sm_90", description="GPU architecture, e.g. sm_90.")
    options: Options = Options()
    specialization: dict[str, str] = Field(default_factory=dict)
    driver_version: int = Field(0, ge=0, le=999_990, description=(
        "The client's CUDA driver as cuDriverGetVersion reports it (12080 is CUDA 12.8); 0 when unknown. A driver "
        "older than the daemon's toolchain gets PTX it can JIT instead of a cubin."))


class CompileReply(BaseModel):
    key: str
    tier: str = Field(description="memory, disk, redis or compiled: the tier that answered.")
    image_format: str = Field("cubin", description=(
        "What the client loads: 'cubin', or 'ptx' (for a driver older than the toolchain; 'cubin' is then empty)."))
    digest: str = Field(description="SHA-256 of the image: the cubin's bytes, or the PTX's UTF-8 bytes.")
    cubin: str = Field(description="The cubin, base64-encoded.")
    ptx: str
    metadata: dict[str, Any]


class ExecuteKernel(CompileBody):
    target: str = Field("", description="GPU architecture; empty (the default): the daemon's GPU.")
    driver_version: int = Field(0, ge=0, le=999_990, description="Ignored: the daemon's own driver loads the kernel.")


class BufferBody(BaseModel):
    data: str = Field(description="The buffer's bytes, base64-encoded: exactly prod(shape) elements of dtype.")
    dtype: str = Field(description="Element type as the IR names it: fp32, fp16, bf16, fp64, int8 ... int64, uint8 ... "
                       "uint64, int1.")
    shape: list[int] = Field(default_factory=list)


class ArgumentBody(BaseModel):
    """One of `buffer`, `int_value`, `float_value` (as proto/service.proto's Argument)."""

    buffer: BufferBody | None = None
    int_value: int | None = None
    float_value: float | None = None


class ExecuteBody(BaseModel):
    kernel: ExecuteKernel
    grid: list[int] = Field(description="Programs along each axis: 1 to 3 positive numbers.")
    args: list[ArgumentBody] = Field(default_factory=list, description="The kernel's runtime arguments, in order.")


class ExecuteReply(BaseModel):
    buffers: list[BufferBody] = Field(description="Every buffer argument after the kernel ran, in argument order.")


class KernelSummary(BaseModel):
    key: str
    name: str
    target: str
    created: float
    sizes: dict[str, int]


class KernelInfo(KernelSummary):
    metadata: dict[str, Any]


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorReply(BaseModel):
    error: ErrorDetail


ERRORS: dict[int | str, dict[str, Any]] = {s: {"model": ErrorReply}
                                           for s in (400, 401, 404, 409, 413, 500, 501, 503, 504)}


def _base64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as e:
        raise InvalidArgument(f"{what} is not base64: {e}") from None


def _argument(i: int, a: ArgumentBody) -> Argument:
    given = [v for v in (a.buffer, a.int_value, a.float_value) if v is not None]
    if len(given) > 1:
        raise InvalidArgument(f"argument {i} sets more than one of buffer, int_value and float_value")
    if a.buffer is not None:
        return Buffer(_base64(a.buffer.data, f"argument {i}'s buffer data"), a.buffer.dtype, tuple(a.buffer.shape))
    return a.int_value if a.int_value is not None else a.float_value


def _error(e: ServiceError) -> JSONResponse:
    return JSONResponse({"error": {"code": e.code, "message": e.message}}, status_code=e.http_status)


class Guard:
    """Token check (all but /healthz) and the request size limit, before any route runs."""

    def __init__(self, app: ASGIApp, token: str | None, max_bytes: int) -> None:
        self.app, self.token, self.max_bytes = app, token, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        try:
            if scope["path"] != "/healthz":
                auth.check(headers.get(b"authorization", b"").decode("latin-1") or None, self.token)
            length = headers.get(b"content-length")
            if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
                raise self._too_large(length.decode("latin-1"))
            if length is None and scope["method"] in ("POST", "PUT", "PATCH"):
                receive = await self._buffered(receive)
        except ServiceError as e:
            await _error(e)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _too_large(self, size: str) -> ResourceExhausted:
        return ResourceExhausted(f"the request body is {size} bytes; this daemon accepts at most {self.max_bytes}"
                                 " (despina serve --max-request-bytes)")

    async def _buffered(self, receive: Receive) -> Receive:
        """Read a body of unknown length up to the limit, then hand it on as one message."""
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                raise self._too_large(f"more than {size}")
            chunks.append(chunk)
            more = message.get("more_body", False)
        body: Message = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return body

        return replay


def create_app(service: CompileService, token: str | None = None) -> FastAPI:
    app = FastAPI(title="Despina compilation service", version="1", description=__doc__)
    app.add_middleware(Guard, token=token, max_bytes=service.config.max_request_bytes)

    @app.exception_handler(ServiceError)
    async def service_error(request: Any, e: ServiceError) -> JSONResponse:
        return _error(e)

    @app.post("/v1/compile", response_model=CompileReply, responses=ERRORS)
    async def compile(body: CompileBody) -> CompileReply:
        try:
            ir = base64.b64decode(body.ir, validate=True)
        except (binascii.Error, ValueError) as e:
            raise InvalidArgument(f"'ir' is not base64: {e}") from None
        o = body.options
        r = await service.compile(CompileRequest(ir, body.target, o.num_warps, o.num_stages, o.debug, body.specialization,
                                                 body.driver_version))
        return CompileReply(key=r.key, tier=r.tier, image_format=r.image_format, digest=r.digest,
                            cubin=base64.b64encode(r.cubin).decode(), ptx=r.ptx, metadata=r.metadata)

    @app.post("/v1/execute", response_model=ExecuteReply, responses=ERRORS)
    async def execute(body: ExecuteBody) -> ExecuteReply:
        k, o = body.kernel, body.kernel.options
        kernel = CompileRequest(_base64(k.ir, "'kernel.ir'"), k.target, o.num_warps, o.num_stages, o.debug,
                                k.specialization)
        args = tuple(_argument(i, a) for i, a in enumerate(body.args))
        r = await service.execute(ExecuteRequest(kernel, tuple(body.grid), args))
        return ExecuteReply(buffers=[BufferBody(data=base64.b64encode(b.data).decode(), dtype=b.dtype, shape=list(b.shape))
                                     for b in r.buffers])

    @app.get("/v1/kernels", response_model=list[KernelSummary], responses=ERRORS)
    async def kernels(limit: int = Query(100, ge=1, le=10_000)) -> list[dict[str, Any]]:
        return service.recent(limit)

    @app.get("/v1/kernels/{key}", response_model=KernelInfo, responses=ERRORS)
    async def kernel(key: str) -> dict[str, Any]:
        entry = await service.entry(key)
        return dict(entry.summary(), metadata=entry.metadata)

    @app.get("/v1/kernels/{key}/{stage}", responses={200: {"content": {"text/plain": {}, "application/octet-stream": {}}},
                                                      **ERRORS})
    async def artifact(key: str, stage: str) -> Response:
        data = await service.get_artifact(key, stage)
        media = "text/plain; charset=utf-8" if stage in TEXT_STAGES else "application/octet-stream"
        return Response(data, media_type=media)

    @app.get("/v1/stats")
    async def stats() -> dict[str, Any]:
        return service.stats()

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        return {"status": "ok", "workers": len(service.pool.workers)}

    @app.get("/metrics", response_class=Response)
    async def metrics() -> Response:
        return Response(service.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    return app
