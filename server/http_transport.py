"""The HTTP transport: a FastAPI app over `CompileService` (OpenAPI at /docs, Prometheus at /metrics).

    POST /v1/compile               IR (base64) + options + target -> cubin (base64), PTX, metadata, tier
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
from .core import CompileRequest, CompileService
from .errors import InvalidArgument, ResourceExhausted, ServiceError


class Options(BaseModel):
    num_warps: int = 4
    num_stages: int = 3
    debug: bool = False


class CompileBody(BaseModel):
    ir: str = Field(description="A despina.ir.v1.Module (proto/ir.proto) as codec.encode writes it, base64-encoded.")
    target: str = Field("sm_90", description="GPU architecture, e.g. sm_90.")
    options: Options = Options()
    specialization: dict[str, str] = Field(default_factory=dict)


class CompileReply(BaseModel):
    key: str
    tier: str = Field(description="memory, redis or compiled: the tier that answered.")
    digest: str = Field(description="SHA-256 of the cubin.")
    cubin: str = Field(description="The cubin, base64-encoded.")
    ptx: str
    metadata: dict[str, Any]


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


ERRORS: dict[int | str, dict[str, Any]] = {s: {"model": ErrorReply} for s in (400, 401, 404, 413, 500, 501, 504)}


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
        r = await service.compile(CompileRequest(ir, body.target, o.num_warps, o.num_stages, o.debug, body.specialization))
        return CompileReply(key=r.key, tier=r.tier, digest=r.digest, cubin=base64.b64encode(r.cubin).decode(),
                            ptx=r.ptx, metadata=r.metadata)

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
