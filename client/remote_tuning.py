"""The daemon's tuning calls (proto/service.proto's Tune, ReportTuning, ListTunings, ClearTunings), over
gRPC or HTTP as `despina.remote` reaches the daemon.

    answer = tune(url, TuneCall(client_key, "matmul", device="NVIDIA H100 80GB HBM3"))   # a lookup
    answer.tuning, answer.kernels   # the record, or (tier "compiled") every config's kernel to measure here
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from despina.compiler.options import CompileOptions

from .remote import (
    COMPILE_TIMEOUT_S,
    RemoteBuffer,
    RemoteError,
    RemoteKernel,
    ServerUnavailable,
    _checked,
    _Client,
    _failover,
    _Grpc,
    _Http,
)
from .runtime.tunings import Tuning, from_json

TUNE_TIMEOUT_S = 1800.0


class Synthetic(NamedTuple):
    """A buffer argument the daemon makes (zeros): element type as the IR names it, and shape."""

    dtype: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class CallCandidate:
    ir: bytes
    options: CompileOptions
    grid: tuple[int, ...]
    label: str


@dataclass(frozen=True)
class TuneCall:
    client_key: str
    kernel: str
    candidates: list[CallCandidate] = field(default_factory=list)
    args: list[RemoteBuffer | Synthetic | int | float] = field(default_factory=list)
    restore: list[int] = field(default_factory=list)
    target: str = "sm_90"
    device: str = ""
    driver_version: int = 0
    warmup_ms: float = 25.0
    rep_ms: float = 100.0


@dataclass(frozen=True)
class TuneAnswer:
    key: str
    tier: str
    tuning: Tuning | None
    kernel: RemoteKernel | None
    kernels: list[RemoteKernel | None]
    errors: list[str | None]


def tune(url: str, call: TuneCall) -> TuneAnswer:
    """The daemon's answer (the first of `url`'s daemons that can be reached, as a compile asks them);
    RemoteError (code NOT_FOUND for a lookup that missed) when it refuses."""
    return _failover(url, lambda client: _grpc_tune(client, call) if isinstance(client, _Grpc)
                     else _http_tune(client, call))


def _http(client: Any) -> _Http:
    assert isinstance(client, _Http)
    return client


def report(url: str, client_key: str, tuning: Tuning) -> Tuning:
    return _failover(url, lambda client: _report(client, client_key, tuning))


def _report(client: _Client, client_key: str, tuning: Tuning) -> Tuning:
    if isinstance(client, _Grpc):
        from despina.proto import service_pb2 as pb

        r = _rpc(client, "ReportTuning", pb.ReportTuningRequest(client_key=client_key,
                                                                  tuning_json=json.dumps(tuning.to_json())))
        return from_json(json.loads(r.tuning_json))
    return from_json(_http(client)._call("/v1/tunings", {"client_key": client_key, "tuning": tuning.to_json()}))


def listing(url: str, key: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
    """One record in full (`key`), or the daemon's most recent ones (their summaries)."""
    return _failover(url, lambda client: _listing(client, key, limit))


def _listing(client: _Client, key: str | None, limit: int) -> list[dict[str, Any]]:
    if isinstance(client, _Grpc):
        from despina.proto import service_pb2 as pb

        r = _rpc(client, "ListTunings", pb.ListTuningsRequest(key=key or "", limit=limit))
        found = [from_json(json.loads(t)) for t in r.tunings_json]
        return [t.to_json() if key else t.summary() for t in found]
    got = _http(client)._get(f"/v1/tunings/{key}" if key else f"/v1/tunings?limit={limit}")
    return [got] if key else list(got)


def clear(url: str, key: str | None = None) -> int:
    return _failover(url, lambda client: _clear(client, key))


def _clear(client: _Client, key: str | None) -> int:
    if isinstance(client, _Grpc):
        from despina.proto import service_pb2 as pb

        return int(_rpc(client, "ClearTunings", pb.ClearTuningsRequest(key=key or "")).deleted)
    return int(_http(client)._delete(f"/v1/tunings/{key}" if key else "/v1/tunings")["deleted"])


def _rpc(client: _Grpc, method: str, request: Any, timeout: float = COMPILE_TIMEOUT_S) -> Any:
    try:
        return getattr(client.stub, method)(request, timeout=timeout, metadata=client.metadata)
    except client.grpc.RpcError as e:
        code, details = e.code(), e.details() or ""
        error = ServerUnavailable if code == client.grpc.StatusCode.UNAVAILABLE else RemoteError
        raise error(code.name, details) from None


def _grpc_tune(client: _Grpc, call: TuneCall) -> TuneAnswer:
    from despina.proto import service_pb2 as pb

    def argument(a: Any) -> Any:
        if isinstance(a, Synthetic):
            return pb.TuneArgument(synthetic=pb.SyntheticBuffer(dtype=a.dtype, shape=a.shape))
        if isinstance(a, RemoteBuffer):
            return pb.TuneArgument(buffer=pb.Buffer(data=a.data, dtype=a.dtype, shape=a.shape))
        return pb.TuneArgument(float_value=a) if isinstance(a, float) else pb.TuneArgument(int_value=int(a))

    from despina.proto.options import to_pb

    candidates = [pb.TuneCandidate(ir=c.ir, options=to_pb(c.options), grid=c.grid, label=c.label)
                  for c in call.candidates]
    request = pb.TuneRequest(client_key=call.client_key, kernel=call.kernel, candidates=candidates,
                             args=[argument(a) for a in call.args], restore=call.restore, target=call.target,
                             device=call.device, driver_version=call.driver_version, warmup_ms=call.warmup_ms,
                             rep_ms=call.rep_ms)
    r = _rpc(client, "Tune", request, TUNE_TIMEOUT_S)

    def kernel(k: Any) -> RemoteKernel | None:
        if not k.key:
            return None
        image_format = "ptx" if k.image_format == pb.PTX else "cubin"
        return _checked(client.url, k.key, pb.Tier.Name(k.tier).lower(), k.digest, k.cubin, k.ptx,
                        json.loads(k.metadata_json or "{}"), image_format)

    tuning = from_json(json.loads(r.tuning_json)) if r.tuning_json else None
    return TuneAnswer(r.key, r.tier, tuning, kernel(r.kernel) if r.HasField("kernel") else None,
                      [kernel(k) for k in r.kernels], [e or None for e in r.errors])


def _http_tune(client: Any, call: TuneCall) -> TuneAnswer:
    def argument(a: Any) -> dict[str, Any]:
        if isinstance(a, Synthetic):
            return {"synthetic": {"dtype": a.dtype, "shape": list(a.shape)}}
        if isinstance(a, RemoteBuffer):
            return {"buffer": {"data": base64.b64encode(a.data).decode(), "dtype": a.dtype, "shape": list(a.shape)}}
        return {"float_value": a} if isinstance(a, float) else {"int_value": int(a)}

    body = {"client_key": call.client_key, "kernel": call.kernel, "args": [argument(a) for a in call.args],
            "candidates": [{"ir": base64.b64encode(c.ir).decode(), "grid": list(c.grid), "label": c.label,
                            "options": c.options.as_dict()} for c in call.candidates],
            "restore": call.restore, "target": call.target, "device": call.device,
            "driver_version": call.driver_version, "warmup_ms": call.warmup_ms, "rep_ms": call.rep_ms}
    reply = client._call("/v1/tune", body)

    def kernel(k: Any) -> RemoteKernel | None:
        if not k:
            return None
        return _checked(client.url, k["key"], k["tier"], k["digest"], base64.b64decode(k["cubin"]), k["ptx"],
                        k["metadata"], k.get("image_format", "cubin"))

    tuning = from_json(reply["tuning"]) if reply.get("tuning") else None
    return TuneAnswer(reply["key"], reply["tier"], tuning, kernel(reply.get("kernel")),
                      [kernel(k) for k in reply.get("kernels", [])], list(reply.get("errors", [])))
