"""The HTTP transport: a FastAPI app over `CompileService` (OpenAPI at /docs, Prometheus at /metrics).

    POST /v1/compile               IR (base64) + options + target [+ driver_version] -> cubin (base64), PTX,
                                   metadata, tier, image_format (cubin, or ptx for an older driver)
    POST /v1/execute               a kernel (as /v1/compile takes it), grid and arguments (buffers base64) -> every
                                   buffer after the kernel ran on the daemon's GPU
    GET  /v1/kernels               the kernels of the memory and disk tiers, the most recently used first: key,
                                   name, target, options, sizes, hits, created and last use (ISO 8601);
                                   ?name=GLOB&target=sm_90&since=7d&limit=100 (an unknown parameter is refused)
    GET  /v1/kernels/{key}         one kernel, with its metadata
    DELETE /v1/kernels/{key}       delete it from memory, disk and Redis (needs the daemon's token)
    DELETE /v1/kernels?older_than=7d   delete from memory and disk those not used since (needs the token)
    GET  /v1/kernels/{key}/lines   the source line of each line of every stage, and the kernel's source text (JSON)
    GET  /v1/kernels/{key}/{stage} ir, gpuir, llir, ptx, sass as text; cubin as bytes
    POST /v1/tune                  a tuning: every config's IR, launch options and grid, the arguments -> the record
                                   (timings, winner) and the winner's kernel; or every config's kernel to measure
    POST /v1/tunings               keep a record the client measured
    GET  /v1/tunings               this daemon's tuning records, newest first
    GET  /v1/tunings/{key}         one tuning record
    DELETE /v1/tunings[/{key}]     forget every tuning (or one), in every tier
    GET  /v1/stats                 the counters /metrics exposes, as JSON
    GET  /healthz                  liveness
    GET  /metrics                  Prometheus exposition
    GET  /docs, /redoc, /openapi.json   the API's documentation (served from the package)
    GET  /ui                       the web viewer (server/ui/; `/` redirects here)

With a token (--token-file) every route needs it except /healthz, /metrics and the documentation,
which stay open for probes, Prometheus and browsers unless --protect-docs asks for the token there too;
the viewer takes it as the bearer header or as the session cookie its sign-in form sets.
Every answer other than a 2xx, FastAPI's validation errors (422) included, is
`{"error": {"code": "<gRPC status name>", "message": "<one line>"}}`.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from despina.compiler.ir.types import SCALAR_NAMES
from despina.compiler.options import DEFAULTS, MAX_MAXNREG, MAX_STAGES, MIN_MAXNREG, WARPS, CompileOptions

from . import auth, http_body, http_docs, ui
from .cache.entry import TEXT_STAGES
from .core import (
    MAX_DRIVER_VERSION,
    MAX_SPECIALIZATION,
    TARGET,
    CompileRequest,
    CompileResponse,
    CompileService,
    ExecuteRequest,
)
from .errors import (
    Internal,
    InvalidArgument,
    MethodNotAllowed,
    NotFound,
    PermissionDenied,
    ServiceError,
)
from .execute import MAX_DIMS, Argument, Buffer
from .http_access import AccessLog, note
from .intake import Intake
from .tenancy import acting_as
from .tuning import MAX_CONFIGS, MAX_LABEL, Candidate, Synthetic, TuneArgument, TuneRequest


class Body(BaseModel):
    """A request body: a field the daemon does not know is refused, not ignored, and the schema says
    what the daemon checks (so that a client built from it is not refused for what it allowed)."""

    model_config = ConfigDict(extra="forbid")


Warps = Literal[WARPS]  # type: ignore[valid-type]


class OptionsBody(Body):
    """`despina.compiler.options.CompileOptions` as JSON: its fields, defaults and limits."""

    num_warps: Warps = DEFAULTS.num_warps
    num_stages: int = Field(default=DEFAULTS.num_stages, ge=1, le=MAX_STAGES)
    num_ctas: Literal[1] = Field(default=1, description="1 only: thread-block clusters are not implemented.")
    maxnreg: int | None = Field(default=DEFAULTS.maxnreg, ge=MIN_MAXNREG, le=MAX_MAXNREG,
                                description="The most registers a thread may use; null: ptxas chooses.")
    enable_fp_fusion: bool = Field(default=DEFAULTS.enable_fp_fusion, description="Float mul + add may become fma.")
    debug: bool = DEFAULTS.debug

    def compile_options(self) -> CompileOptions:
        return CompileOptions(**self.model_dump())


class CompileBody(Body):
    ir: str = Field(description="A despina.ir.v1.Module (proto/ir.proto) as codec.encode writes it, base64-encoded.")
    target: str = Field("sm_90", pattern=f"^{TARGET.pattern}$", max_length=16, description="GPU architecture, e.g. sm_90.")
    options: OptionsBody = OptionsBody()
    specialization: dict[str, str] = Field(default_factory=dict, max_length=MAX_SPECIALIZATION)
    driver_version: int = Field(0, ge=0, le=MAX_DRIVER_VERSION, description=(
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
    target: str = Field("", pattern=f"^({TARGET.pattern})?$", max_length=16,
                        description="GPU architecture; empty (the default): the daemon's GPU.")
    driver_version: int = Field(0, ge=0, le=MAX_DRIVER_VERSION,
                                description="Ignored: the daemon's own driver loads the kernel.")


class BufferBody(Body):
    data: str = Field(description="The buffer's bytes, base64-encoded: exactly prod(shape) elements of dtype.")
    dtype: Literal[SCALAR_NAMES] = Field(  # type: ignore[valid-type]
        description="Element type as the IR names it: fp32, fp16, bf16, fp64, int8 ... int64, uint8 ... uint64, int1.")
    shape: list[Annotated[int, Field(ge=0)]] = Field(default_factory=list, max_length=MAX_DIMS)


class ArgumentBody(Body):
    """One of `buffer`, `int_value`, `float_value` (as proto/service.proto's Argument)."""

    buffer: BufferBody | None = None
    int_value: int | None = None
    float_value: float | None = None


class ExecuteBody(Body):
    kernel: ExecuteKernel
    grid: list[Annotated[int, Field(ge=1)]] = Field(min_length=1, max_length=3,
                                                    description="Programs along each axis: 1 to 3 positive numbers.")
    args: list[ArgumentBody] = Field(default_factory=list, description="The kernel's runtime arguments, in order.")


class ExecuteReply(BaseModel):
    buffers: list[BufferBody] = Field(description="Every buffer argument after the kernel ran, in argument order.")


class CandidateBody(Body):
    ir: str = Field(description="This config's kernel IR, base64-encoded (as /v1/compile's 'ir').")
    options: OptionsBody = OptionsBody()
    grid: list[Annotated[int, Field(ge=1)]] = Field(
        min_length=1, max_length=3, description="Programs along each axis for this config: 1 to 3 positive numbers.")
    label: str = Field("", max_length=MAX_LABEL, description="The config as the user wrote it.")


class SyntheticBody(Body):
    dtype: Literal[SCALAR_NAMES]  # type: ignore[valid-type]
    shape: list[Annotated[int, Field(ge=0)]] = Field(default_factory=list, max_length=MAX_DIMS)


class TuneArgumentBody(ArgumentBody):
    """One of `buffer`, `synthetic` (zeros the daemon makes), `int_value`, `float_value`."""

    synthetic: SyntheticBody | None = None


class TuneBody(Body):
    client_key: str = Field(pattern="^[0-9a-f]{64}$", description="The client's part of the tuning key (64 hex digits).")
    kernel: str = ""
    candidates: list[CandidateBody] = Field(default_factory=list, max_length=MAX_CONFIGS,
                                            description="Every config; none for a lookup.")
    args: list[TuneArgumentBody] = Field(default_factory=list)
    restore: list[Annotated[int, Field(ge=0)]] = Field(default_factory=list,
                                                       description="Arguments put back before every run.")
    target: str = Field("sm_90", pattern=f"^{TARGET.pattern}$", max_length=16, description="GPU architecture, e.g. sm_90.")
    device: str = Field("", description="The client's GPU name; empty: the daemon's.")
    driver_version: int = Field(0, ge=0, le=MAX_DRIVER_VERSION)
    warmup_ms: float = Field(25.0, gt=0, le=10_000)
    rep_ms: float = Field(100.0, gt=0, le=10_000)


class TuneReply(BaseModel):
    key: str
    tier: str = Field(description="memory, disk, redis, tuned (measured now) or compiled (the client measures).")
    tuning: dict[str, Any] | None = None
    kernel: CompileReply | None = None
    kernels: list[CompileReply | None] = Field(default_factory=list)
    errors: list[str | None] = Field(default_factory=list)


class ReportBody(Body):
    client_key: str
    tuning: dict[str, Any]


class KernelSummary(BaseModel):
    key: str
    name: str
    target: str
    created: str = Field(description="When it was compiled, ISO 8601 in UTC.")
    last_used: str = Field(description="When this daemon last answered with it (its disk file's time after a "
                           "restart), ISO 8601 in UTC.")
    hits: int = Field(description="Answers with it since this daemon started.")
    options: dict[str, Any] = Field(description="The compile options: num_warps, num_stages, num_ctas, maxnreg, "
                                    "enable_fp_fusion, debug.")
    sizes: dict[str, int] = Field(description="Bytes of each stage: ir, gpuir, llir, ptx, sass, cubin.")
    tiers: list[str] = Field(description="This daemon's tiers holding it: memory, disk.")
    compile_seconds: float | None = Field(None, description="How long its compile took (null when not recorded).")
    origin: str = Field("", description="The tier that answered the first request for it since this daemon "
                        "started: compiled, redis, disk or memory; empty when none was answered.")


class KernelInfo(KernelSummary):
    metadata: dict[str, Any]


class DeletedKernel(BaseModel):
    key: str
    tiers: list[str] = Field(description="The tiers it was deleted from: memory, disk, redis.")


class DeletedKernels(BaseModel):
    deleted: list[str] = Field(description="The keys deleted from memory and disk, the least recently used first.")


class SourceLines(BaseModel):
    file: str = Field(description="The kernel's source file, as the client that first compiled it named it.")
    first_line: int = Field(description="The line number (1-based) of text[0].")
    text: list[str] = Field(description="The lines the client sent: the kernel and its helpers in that file.")


class LineMaps(BaseModel):
    source: SourceLines | None = Field(description="The kernel's source text; null when the client sent none.")
    stages: dict[str, dict[str, int]] = Field(
        description="By stage (ir, gpuir, llir, ptx, sass): line number (1-based, as a string) in that stage's text "
                    "-> the source line it came from. A stage without a map is absent (sass on a daemon without "
                    "nvdisasm).")


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorReply(BaseModel):
    error: ErrorDetail


ERRORS: dict[int | str, dict[str, Any]] = {s: {"model": ErrorReply}
                                           for s in (400, 401, 403, 404, 409, 413, 422, 500, 501, 503, 504)}
# Open without a token unless --protect-docs: probes, Prometheus and browsers need no credentials.
OPEN = frozenset({"/healthz"})
DOCS_AND_METRICS = frozenset({"/metrics"})


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


def _tune_argument(i: int, a: TuneArgumentBody) -> TuneArgument:
    if a.synthetic is not None:
        if a.buffer is not None or a.int_value is not None or a.float_value is not None:
            raise InvalidArgument(f"argument {i} sets more than one of buffer, synthetic, int_value and float_value")
        return Synthetic(a.synthetic.dtype, tuple(a.synthetic.shape))
    return _argument(i, a)


def _compiled(r: CompileResponse) -> CompileReply:
    return CompileReply(key=r.key, tier=r.tier, image_format=r.image_format, digest=r.digest,
                        cubin=base64.b64encode(r.cubin).decode(), ptx=r.ptx, metadata=r.metadata)


def _error(e: ServiceError) -> JSONResponse:
    return JSONResponse({"error": {"code": e.code, "message": e.message}}, status_code=e.http_status)


WHEN = "Kernels {} this: an age (30m, 12h, 7d) or an ISO 8601 time (2026-11-24T10:00:00Z)."


def _only(request: Request, known: set[str]) -> None:
    """Refuse query parameters the route does not take, rather than ignore them."""
    unknown = sorted(set(request.query_params) - known)
    if unknown:
        raise InvalidArgument(f"{request.method} {request.url.path} takes no {', '.join(map(repr, unknown))}; it takes "
                              f"{', '.join(sorted(known))}")


def _validation_message(e: RequestValidationError) -> str:
    """FastAPI's validation errors as one line that names each field: `body.options.num_warps: ...`."""
    parts = []
    for err in e.errors():
        where = ".".join(str(p) for p in err.get("loc", ())) or "request"
        given = err.get("input")
        shown = f" (got {given!r:.60})" if isinstance(given, (str, int, float, bool)) else ""
        parts.append(f"{where}: {err.get('msg', 'invalid')}{shown}")
    return "; ".join(parts).replace("\n", " ") or "the request is malformed"


class Guard:
    """Token check and the request size limit, before any route runs. /healthz needs no token, nor
    (unless `protect_docs`) /metrics and the documentation pages."""

    def __init__(self, app: ASGIApp, tokens: auth.Tokens | None, max_bytes: int, protect_docs: bool = False,
                 refuse: Callable[[ServiceError], ServiceError] = lambda e: e, max_ir_bytes: int = 8 << 20,
                 body_timeout_s: float = 60.0) -> None:
        self.app, self.tokens, self.max_bytes, self.refuse = app, tokens, max_bytes, refuse
        self.protect_docs, self.max_ir_bytes, self.body_timeout_s = protect_docs, max_ir_bytes, body_timeout_s

    def _open(self, path: str) -> bool:
        return path in OPEN or (not self.protect_docs and (path in DOCS_AND_METRICS or http_docs.is_docs_path(path)))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers, path = dict(scope["headers"]), scope["path"]
        # The tenant the request acts as: none on a daemon without tokens; on one with tokens, its token's,
        # or "" (no kernel's owner) on the open paths.
        tenant: str | None = None if self.tokens is None else ""
        try:
            if ui.is_viewer_path(scope["path"]):
                refused = ui.refusal(scope, self.tokens)
                if refused is not None:
                    note(scope, code="UNAUTHENTICATED")
                    await refused(scope, receive, send)
                    return
                if self.tokens is not None:
                    tenant = ui.tenant(scope, self.tokens) or ""
            elif not self._open(scope["path"]) and self.tokens is not None:
                tenant = self.tokens.tenant_of([v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"])
            if scope["method"] == "DELETE" and self.tokens is None:
                raise PermissionDenied(auth.DELETE_NEEDS_TOKEN)
            length, most = headers.get(b"content-length"), http_body.limit(path, self.max_bytes, self.max_ir_bytes)
            if length is not None and (not length.isdigit() or int(length) > most[0]):
                raise http_body.too_large(length.decode("latin-1"), most, path)
            if scope["method"] in ("POST", "PUT", "PATCH"):
                receive = await http_body.read(receive, most, self.body_timeout_s, path)
        except ServiceError as e:
            note(scope, code=e.code)
            refusal = _error(self.refuse(e))
            if scope["method"] in ("POST", "PUT", "PATCH"):  # its body may still be coming: not read, not kept
                refusal.headers["connection"] = "close"
            await refusal(scope, receive, send)
            return
        with Intake.client_is(scope["client"][0] if scope.get("client") else ""), acting_as(tenant):
            await self.app(scope, receive, send)


def create_app(service: CompileService, tokens: auth.Tokens | None = None, protect_docs: bool = False) -> FastAPI:
    app = FastAPI(title="Despina compilation service", version="1", description=__doc__, docs_url=None,
                  redoc_url=None)
    http_docs.add_docs(app)
    app.state.sampler = ui.add_viewer(app, service, tokens)  # the daemon runs it (main.serve)
    app.add_middleware(Guard, tokens=tokens, max_bytes=service.config.max_request_bytes, protect_docs=protect_docs,
                       refuse=service.refused, max_ir_bytes=service.config.max_ir_bytes,
                       body_timeout_s=service.config.http_body_timeout_s)
    app.add_middleware(AccessLog)  # outermost: it sees the Guard's refusals too

    def answer(request: Request, e: ServiceError) -> JSONResponse:
        note(request, code=e.code)
        return _error(service.refused(e))

    @app.exception_handler(ServiceError)
    async def service_error(request: Request, e: ServiceError) -> JSONResponse:
        return answer(request, e)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, e: RequestValidationError) -> JSONResponse:
        response = answer(request, InvalidArgument(_validation_message(e)))
        response.status_code = 422  # the request's shape is wrong, before any of its values was looked at
        return response

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, e: HTTPException) -> JSONResponse:
        if e.status_code == 404:
            error: ServiceError = NotFound(f"no route {request.method} {request.url.path}; the API is listed at /docs")
        elif e.status_code == 405:
            error = MethodNotAllowed(f"{request.url.path} does not take {request.method}; the API is listed at /docs")
        else:
            error = InvalidArgument(str(e.detail)) if e.status_code < 500 else Internal(str(e.detail))
        return answer(request, error)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, e: Exception) -> JSONResponse:
        return answer(request, Internal(f"internal error: {type(e).__name__}: {e}"))

    @app.post("/v1/compile", response_model=CompileReply, responses=ERRORS)
    async def compile(body: CompileBody, request: Request) -> CompileReply:
        r = await service.compile(CompileRequest(_base64(body.ir, "'ir'"), body.target, body.options.compile_options(),
                                                 body.specialization, body.driver_version))
        note(request, key=r.key, tier=r.tier)
        return _compiled(r)

    @app.post("/v1/execute", response_model=ExecuteReply, responses=ERRORS)
    async def execute(body: ExecuteBody, request: Request) -> ExecuteReply:
        k = body.kernel
        kernel = CompileRequest(_base64(k.ir, "'kernel.ir'"), k.target, k.options.compile_options(), k.specialization)
        args = tuple(_argument(i, a) for i, a in enumerate(body.args))
        r = await service.execute(ExecuteRequest(kernel, tuple(body.grid), args))
        note(request, key=r.key, tier=r.tier)
        return ExecuteReply(buffers=[BufferBody(data=base64.b64encode(b.data).decode(), dtype=b.dtype, shape=list(b.shape))
                                     for b in r.buffers])

    @app.get("/v1/kernels", response_model=list[KernelSummary], responses=ERRORS)
    async def kernels(request: Request, limit: int = Query(100, ge=1, le=10_000),
                      name: str | None = Query(None, max_length=256, description="A glob: add_*, *matmul*."),
                      target: str | None = Query(None, max_length=16, description="sm_90, ..."),
                      since: str | None = Query(None, max_length=64, description=WHEN.format("used at or after"))
                      ) -> list[dict[str, Any]]:
        _only(request, {"limit", "name", "target", "since"})
        return await service.kernels(name, target, since, limit)

    @app.delete("/v1/kernels", response_model=DeletedKernels, responses=ERRORS)
    async def delete_kernels(request: Request, older_than: str = Query(max_length=64, description=WHEN.format(
                                 "not used since")),
                             name: str | None = Query(None, max_length=256), target: str | None = Query(None, max_length=16)
                             ) -> DeletedKernels:
        """Delete from memory and disk the kernels not used since `older_than` (Redis entries expire by themselves,
        after `despina serve --redis-ttl`). Needs the daemon's token (a daemon without one refuses)."""
        _only(request, {"older_than", "name", "target"})
        return DeletedKernels(deleted=await service.delete_unused(older_than, name, target))

    @app.get("/v1/kernels/{key}", response_model=KernelInfo, responses=ERRORS)
    async def kernel(key: str, request: Request) -> dict[str, Any]:
        note(request, key=key[:64])
        return await service.describe(key)

    @app.delete("/v1/kernels/{key}", response_model=DeletedKernel, responses=ERRORS)
    async def delete_kernel(key: str, request: Request) -> DeletedKernel:
        """Delete one kernel from memory, disk and Redis. Needs the daemon's token (a daemon without one refuses)."""
        note(request, key=key[:64])
        return DeletedKernel(key=key, tiers=await service.delete(key))

    @app.get("/v1/kernels/{key}/lines", response_model=LineMaps, responses=ERRORS)
    async def lines(key: str, request: Request) -> dict[str, Any]:
        """Which source line each line of the kernel's stages came from, and the source text itself."""
        note(request, key=key[:64])
        return await service.get_lines(key)

    @app.get("/v1/kernels/{key}/{stage}", responses={200: {"content": {"text/plain": {}, "application/octet-stream": {}}},
                                                      **ERRORS})
    async def artifact(key: str, stage: str, request: Request) -> Response:
        note(request, key=key[:64])
        data = await service.get_artifact(key, stage)
        media = "text/plain; charset=utf-8" if stage in TEXT_STAGES else "application/octet-stream"
        return Response(data, media_type=media)

    @app.post("/v1/tune", response_model=TuneReply, responses=ERRORS)
    async def tune(body: TuneBody, request: Request) -> TuneReply:
        candidates = tuple(Candidate(_base64(c.ir, f"candidate {i}'s 'ir'"), c.options.compile_options(), tuple(c.grid),
                                     c.label) for i, c in enumerate(body.candidates))
        args = tuple(_tune_argument(i, a) for i, a in enumerate(body.args))
        r = await service.tuner.tune(TuneRequest(body.client_key, body.kernel, candidates, args, tuple(body.restore),
                                                 body.target, body.device, body.driver_version, body.warmup_ms,
                                                 body.rep_ms))
        note(request, key=r.key, tier=r.tier)
        return TuneReply(key=r.key, tier=r.tier, tuning=r.tuning.to_json() if r.tuning else None,
                         kernel=_compiled(r.kernel) if r.kernel else None,
                         kernels=[_compiled(k) if k else None for k in r.kernels], errors=r.errors)

    @app.post("/v1/tunings", responses=ERRORS)
    async def report_tuning(body: ReportBody) -> dict[str, Any]:
        return (await service.tuner.report(body.tuning, body.client_key)).to_json()

    @app.get("/v1/tunings", responses=ERRORS)
    async def tunings(limit: int = Query(100, ge=1, le=10_000)) -> list[dict[str, Any]]:
        return [t.summary() for t in await service.tuner.list(limit)]

    @app.get("/v1/tunings/{key}", responses=ERRORS)
    async def tuning(key: str) -> dict[str, Any]:
        return (await service.tuner.get(key)).to_json()

    @app.delete("/v1/tunings", responses=ERRORS)
    async def clear_tunings() -> dict[str, int]:
        return {"deleted": await service.tuner.clear()}

    @app.delete("/v1/tunings/{key}", responses=ERRORS)
    async def clear_tuning(key: str) -> dict[str, int]:
        return {"deleted": await service.tuner.clear(key)}

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
