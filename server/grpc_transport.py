"""The gRPC transport: `despina.service.v1.Compiler` over grpc.aio, plus health and reflection.

Requests arrive as raw bytes and are parsed here, so that a truncated or garbled message is an
INVALID_ARGUMENT that names the message rather than gRPC's generic deserialization failure.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import grpc
from google.protobuf.message import DecodeError, Message
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from despina.compiler.ir.wire import IRDecodeError, top_records
from despina.proto import service_pb2 as pb
from despina.proto.options import from_pb

from . import access, auth
from .core import MAX_SPECIALIZATION, CompileRequest, CompileResponse, CompileService, ExecuteRequest
from .errors import Internal, InvalidArgument, PermissionDenied, ServiceError
from .execute import Argument, Buffer
from .intake import LARGE, Intake, peer_host
from .messages import Blob
from .tenancy import acting_as
from .tuning import Candidate, Synthetic, TuneArgument, TuneRequest

log = logging.getLogger("despina.server.grpc")
SERVICE = pb.DESCRIPTOR.services_by_name["Compiler"].full_name
M = TypeVar("M", bound=Message)


def _parse(cls: type[M], data: bytes) -> M:
    msg = cls()
    try:
        msg.ParseFromString(data)
    except DecodeError as e:
        raise InvalidArgument(f"the request is not a serialized {cls.DESCRIPTOR.full_name}: {e}") from None
    return msg


def to_core(req: Any, default_target: str = "sm_90", ir: Blob | None = None) -> CompileRequest:
    return CompileRequest(req.ir if ir is None else ir, req.target or default_target, from_pb(req.options),
                          dict(req.specialization), req.driver_version)


def compile_request(data: bytes) -> CompileRequest:
    """A serialized CompileRequest as the core takes it. A large one's IR is a view of the received bytes, and
    only the rest is parsed: protobuf copies a bytes field twice (into the parsed message, then out of it), and
    even one copy of an 8 MiB IR holds the event loop (and the GIL) for 2-5 ms on a busy 2-core host."""
    cut = _cut_ir(data) if len(data) >= LARGE else None
    if cut is None:
        return to_core(_parse(pb.CompileRequest, data))
    rest, ir = cut
    return to_core(_parse(pb.CompileRequest, rest), ir=ir)


_IR_TAG = pb.CompileRequest.DESCRIPTOR.fields_by_name["ir"].number << 3 | 2
_MOST_RECORDS = MAX_SPECIALIZATION + 8  # an honest request's top-level records: ir, target, options, driver, the map


def _cut_ir(data: bytes) -> tuple[bytes, memoryview] | None:
    """`data` without its `ir` records, and a view of the last one's bytes (what protobuf gives the field); None
    for anything but a few well-formed top-level records, which protobuf then parses (and names what is wrong
    with) as it parses every other request."""
    view = memoryview(data)
    kept: list[memoryview] = []
    found: memoryview | None = None
    try:
        for tag, start, value, end in top_records(data, _MOST_RECORDS, "records"):
            if tag == _IR_TAG:
                found = view[value:end]
            else:
                kept.append(view[start:end])
    except IRDecodeError:
        return None
    return None if found is None else (b"".join(kept), found)


def argument(arg: Any) -> Argument:
    """An Argument message as the core takes it (None when it sets no value)."""
    which = arg.WhichOneof("value")
    if which == "buffer":
        b = arg.buffer
        return Buffer(b.data, b.dtype, tuple(b.shape))
    if which == "int_value":
        return int(arg.int_value)
    if which == "float_value":
        return float(arg.float_value)
    return None


def compiled(r: CompileResponse) -> pb.CompileResponse:
    return pb.CompileResponse(key=r.key, cubin=r.cubin, ptx=r.ptx, metadata_json=json.dumps(r.metadata), digest=r.digest,
                              tier=pb.Tier.Value(r.tier.upper()), image_format=pb.ImageFormat.Value(r.image_format.upper()))


def tune_argument(arg: Any) -> TuneArgument:
    if arg.WhichOneof("value") == "synthetic":
        return Synthetic(arg.synthetic.dtype, tuple(arg.synthetic.shape))
    return argument(arg)


def tune_request(req: Any) -> TuneRequest:
    candidates = tuple(Candidate(c.ir, from_pb(c.options), tuple(c.grid), c.label)
                       for c in req.candidates)
    return TuneRequest(req.client_key, req.kernel, candidates, tuple(map(tune_argument, req.args)), tuple(req.restore),
                       req.target or "sm_90", req.device, req.driver_version, req.warmup_ms or 25.0, req.rep_ms or 100.0)


def _json_object(text: str) -> dict[str, Any]:
    try:
        found = json.loads(text)
    except ValueError as e:
        raise InvalidArgument(f"the tuning record is not JSON: {e}") from None
    if not isinstance(found, dict):
        raise InvalidArgument("the tuning record is not a JSON object")
    return found


class Servicer:
    def __init__(self, service: CompileService, tokens: auth.Tokens | None = None) -> None:
        self.service = service
        # With tokens, each call acts as the tenant of its token (the interceptor has checked it), and
        # deleting (ClearTunings) is allowed at all, as DELETE is over HTTP.
        self.tokens = tokens
        self.admin = tokens is not None

    async def _answer(self, context: grpc.aio.ServicerContext, rpc: str, fn: Callable[[], Awaitable[Message]]) -> bytes:
        started = time.perf_counter()
        try:
            tenant = self.tokens.tenant_of(authorization(context.invocation_metadata())) if self.tokens else None
            with Intake.client_is(peer_host(context.peer())), acting_as(tenant):
                reply = await fn()
        except ServiceError as e:
            error = e
        except Exception as e:
            log.exception("unexpected error")
            error = Internal(f"internal error: {type(e).__name__}: {e}")
        else:
            key = getattr(reply, "key", "")
            tier = pb.Tier.Name(reply.tier).lower() if isinstance(reply, pb.CompileResponse) else ""
            access.record("grpc", rpc, "OK", "OK", started, key, tier, context.peer())
            return reply.SerializeToString()
        self.service.refused(error)
        access.record("grpc", rpc, error.code, error.code, started, peer=context.peer())
        # The status is set and the handler returns (grpc drops the answer of a call whose status is not OK)
        # rather than context.abort(): the AbortError that raises is kept by the call's state, and its
        # traceback keeps the call's frames, the request's bytes with them, until a full garbage collection.
        # Under a flood of refused 8 MiB requests, each second's collection freed dozens of them at once and
        # stalled the event loop 10-20 ms.
        context.set_code(grpc.StatusCode[error.code])
        context.set_details(error.message)
        del error  # its traceback holds this frame: the same kind of cycle
        return b""

    async def compile(self, requests: Any, context: grpc.aio.ServicerContext) -> bytes:
        """Compile takes its request as a stream of one message (what a unary call sends), read here rather than
        by grpc before the handler runs, so that the handler holds the only reference to its bytes: a large
        request that is refused (past its client's share, IR past the limits) is answered a second later while
        that client has other checks (`Intake.refusing`), without its bytes meanwhile. Refused at once, six
        decode bombs sent back to back had the daemon read ~40 a second (8 MiB each, copied twice on the
        event loop by grpc), and the other clients' cache hits waited behind them."""
        message = await context.read()
        received = [b"" if message is grpc.aio.EOF else message]  # no message: an empty request, refused as such
        del message

        async def run() -> Message:
            data = received.pop()
            size = len(data)
            try:
                self.service.intake.admit(size)
                return compiled(await self.service.compile(compile_request(data)))
            except ServiceError as e:
                if size < LARGE:
                    raise
                error = _bare(e)
            del data
            await self.service.intake.refusing()
            try:
                raise error
            finally:
                del error  # its traceback holds this frame: no cycle through it

        return await self._answer(context, "Compile", run)

    async def get_artifact(self, data: bytes, context: grpc.aio.ServicerContext) -> bytes:
        async def run() -> Message:
            req = _parse(pb.GetArtifactRequest, data)
            return pb.Artifact(key=req.key, stage=req.stage, data=await self.service.get_artifact(req.key, req.stage))

        return await self._answer(context, "GetArtifact", run)

    async def execute(self, data: bytes, context: grpc.aio.ServicerContext) -> bytes:
        async def run() -> Message:
            req = _parse(pb.ExecuteRequest, data)
            # An empty target means the daemon's GPU.
            kernel = to_core(req.kernel, default_target="")
            r = await self.service.execute(ExecuteRequest(kernel, tuple(req.grid), tuple(map(argument, req.args))))
            return pb.ExecuteResponse(buffers=[pb.Buffer(data=b.data, dtype=b.dtype, shape=b.shape) for b in r.buffers])

        return await self._answer(context, "Execute", run)

    async def stats(self, data: bytes, context: grpc.aio.ServicerContext) -> bytes:
        async def run() -> Message:
            stats = dict(self.service.stats(), version=_version())
            for only_http in ("worker_pids", "errors", "executes"):  # StatsResponse has no fields for these
                stats.pop(only_http)
            return pb.StatsResponse(**stats)

        return await self._answer(context, "Stats", run)

    async def tune(self, data: bytes, context: grpc.aio.ServicerContext) -> bytes:
        async def run() -> Message:
            r = await self.service.tuner.tune(tune_request(_parse(pb.TuneRequest, data)))
            return pb.TuneResponse(
                key=r.key, tier=r.tier, tuning_json=json.dumps(r.tuning.to_json()) if r.tuning else "",
                kernel=compiled(r.kernel) if r.kernel else None,
                kernels=[compiled(k) if k else pb.CompileResponse() for k in r.kernels], errors=[e or "" for e in r.errors])

        return await self._answer(context, "Tune", run)

    async def report_tuning(self, data: bytes, context: grpc.aio.ServicerContext) -> bytes:
        async def run() -> Message:
            req = _parse(pb.ReportTuningRequest, data)
            tuning = await self.service.tuner.report(_json_object(req.tuning_json), req.client_key)
            return pb.TuningRecord(tuning_json=json.dumps(tuning.to_json()))

        return await self._answer(context, "ReportTuning", run)

    async def list_tunings(self, data: bytes, context: grpc.aio.ServicerContext) -> bytes:
        async def run() -> Message:
            req = _parse(pb.ListTuningsRequest, data)
            found = [await self.service.tuner.get(req.key)] if req.key else await self.service.tuner.list(req.limit or 100)
            return pb.ListTuningsResponse(tunings_json=[json.dumps(t.to_json()) for t in found])

        return await self._answer(context, "ListTunings", run)

    async def clear_tunings(self, data: bytes, context: grpc.aio.ServicerContext) -> bytes:
        async def run() -> Message:
            req = _parse(pb.ClearTuningsRequest, data)
            if not self.admin:
                raise PermissionDenied(auth.DELETE_NEEDS_TOKEN)
            return pb.ClearTuningsResponse(deleted=await self.service.tuner.clear(req.key or None))

        return await self._answer(context, "ClearTunings", run)

    def handler(self) -> grpc.GenericRpcHandler:
        methods = {"Compile": self.compile, "GetArtifact": self.get_artifact, "Execute": self.execute, "Stats": self.stats,
                   "Tune": self.tune, "ReportTuning": self.report_tuning, "ListTunings": self.list_tunings,
                   "ClearTunings": self.clear_tunings}
        handlers = {name: grpc.unary_unary_rpc_method_handler(fn) for name, fn in methods.items() if name != "Compile"}
        handlers["Compile"] = grpc.stream_unary_rpc_method_handler(self.compile)  # the wire form of a unary call
        return grpc.method_handlers_generic_handler(SERVICE, handlers)


def _bare(error: ServiceError) -> ServiceError:
    """`error` without the frames it was raised through (its traceback, and the exceptions it replaced), whose
    locals hold the request that it answers."""
    error.__traceback__ = error.__context__ = error.__cause__ = None
    return error


def _version() -> str:
    from despina import __version__

    return __version__


class TokenInterceptor(grpc.aio.ServerInterceptor):
    """Every RPC except the health service needs `authorization: Bearer <token>` metadata."""

    def __init__(self, tokens: auth.Tokens, refuse: Callable[[ServiceError], ServiceError] = lambda e: e) -> None:
        self.tokens, self.refuse = tokens, refuse

    async def intercept_service(self, continuation: Any, details: grpc.HandlerCallDetails) -> Any:
        handler = await continuation(details)
        if handler is None or details.method.startswith("/grpc.health.v1.Health/"):
            return handler
        try:
            self.tokens.tenant_of(authorization(details.invocation_metadata))
        except ServiceError as e:
            return _refusal(handler, self.refuse(e), details.method.rpartition("/")[2])
        return handler


def _refusal(handler: Any, error: ServiceError, rpc: str) -> Any:
    """A handler that answers `error` without reading the request. It takes the request as a stream and
    never iterates it: grpc.aio reads a unary request whole (up to max_receive_message_length, one limit for
    the whole server) before the handler runs, but a streamed one only when the handler asks for it. So a
    caller without the token gets its refusal at the metadata stage, and its message, however large, is
    not taken in beyond HTTP/2's flow-control window."""

    async def abort(requests: Any, context: grpc.aio.ServicerContext) -> None:
        access.record("grpc", rpc, error.code, error.code, time.perf_counter(), peer=context.peer())
        await context.abort(grpc.StatusCode[error.code], error.message)

    if handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(abort)
    return grpc.stream_unary_rpc_method_handler(abort)


class BindError(Exception):
    """The gRPC port could not be bound (in use, or an address not on this host)."""


def authorization(metadata: Any) -> list[str]:
    """The `authorization` values of a call's metadata."""
    return [v for k, v in metadata or () if k == "authorization" and isinstance(v, str)]


async def start(service: CompileService, host: str, port: int, tokens: auth.Tokens | None = None,
                tls: tuple[str, str] | None = None) -> tuple[grpc.aio.Server, int]:
    """A started grpc.aio server on host:port with the Compiler, health and reflection services, and the
    port it listens on (the one the system picked when `port` is 0)."""
    server = grpc.aio.server(
        interceptors=[TokenInterceptor(tokens, service.refused)] if tokens else None,
        options=[("grpc.max_receive_message_length", service.config.max_request_bytes),
                 ("grpc.max_send_message_length", -1), ("grpc.so_reuseport", 0)],
    )
    server.add_generic_rpc_handlers([Servicer(service, tokens).handler()])
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = (SERVICE, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME)
    reflection.enable_server_reflection(names, server)
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        if tls:
            cert, key = (Path(p).read_bytes() for p in tls)
            bound = server.add_secure_port(address, grpc.ssl_server_credentials([(key, cert)]))
        else:
            bound = server.add_insecure_port(address)
    except RuntimeError:
        bound = 0
    if not bound:
        raise BindError(f"cannot listen for gRPC on {address}: the port is in use, or the address is not this host's")
    await server.start()
    for name in ("", SERVICE):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return server, bound
