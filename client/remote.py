"""Compile on a Despina daemon instead of in-process.

    export DESPINA_SERVER=grpc://gpu-host:50051    # or http://gpu-host:8000; grpcs:// and https:// for TLS
    export DESPINA_TOKEN=...                       # when the daemon was started with --token-file

or `despina.set_server("grpc://gpu-host:50051", token="...")`. Then

    cubin, ptx, metadata = compile_remote(module, options, target="sm_90")

sends the IR and returns the daemon's cubin; `metadata["service"]` says which tier answered. An
unreachable daemon makes it compile in-process instead, with one warning; with
`DESPINA_SERVER_REQUIRED=1` that is an error. `DESPINA_SERVER_CA` names a CA bundle for TLS.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from despina.compiler.ir.core import Module

CONNECT_TIMEOUT_S = 5.0
COMPILE_TIMEOUT_S = 600.0
_settings: dict[str, str | None] = {}
_clients: dict[tuple[str, str | None], _Client] = {}
_warned: set[str] = set()


class RemoteError(RuntimeError):
    """The daemon answered with an error (`code` is its gRPC status name)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class ServerUnavailable(RemoteError):
    """The daemon could not be reached."""


class RemoteKernel(NamedTuple):
    cubin: bytes
    ptx: str
    metadata: dict[str, Any]


def set_server(url: str | None, token: str | None = None) -> None:
    """Use the daemon at `url` (grpc://, grpcs://, http:// or https://); None goes back to DESPINA_SERVER."""
    if url is not None and url.partition("://")[0] not in ("grpc", "grpcs", "http", "https"):
        raise ValueError(f"server URL {url!r} must start with grpc://, grpcs://, http:// or https://")
    _settings["url"], _settings["token"] = url, token
    for client in _clients.values():
        client.close()
    _clients.clear()


def server() -> str | None:
    """The daemon's URL, from `set_server` or DESPINA_SERVER; None: compile in-process."""
    return _settings.get("url") or os.environ.get("DESPINA_SERVER") or None


def _token() -> str | None:
    return _settings.get("token") or os.environ.get("DESPINA_TOKEN") or None


def _required() -> bool:
    return os.environ.get("DESPINA_SERVER_REQUIRED", "0").lower() in ("1", "true", "yes", "on")


def compile_remote(module: Module, options: Any = None, target: str = "sm_90",
                   specialization: dict[str, str] | None = None) -> RemoteKernel:
    """The kernel's cubin, PTX and metadata, from the daemon (or in-process when there is none).

    `options` is `despina.jit.Options` or anything with num_warps / num_stages / debug.
    Raises `RemoteError` when the daemon refuses the kernel (its message says why).
    """
    url = server()
    if url is None:
        return _compile_local(module, options, target)
    from despina.compiler.ir.codec import encode

    try:
        return _client(url).compile(encode(module), _options(options), target, specialization or {})
    except ServerUnavailable as e:
        if _required():
            raise
        if url not in _warned:
            _warned.add(url)
            warnings.warn(f"despina: the daemon at {url} is unreachable ({e.message}); compiling in-process",
                          RuntimeWarning, stacklevel=2)
        return _compile_local(module, options, target)


def _options(options: Any) -> dict[str, Any]:
    return {k: getattr(options, k, d) for k, d in (("num_warps", 4), ("num_stages", 3), ("debug", False))}


def _compile_local(module: Module, options: Any, target: str) -> RemoteKernel:
    try:
        from despina.compiler.backends.nvptx import compile_module
    except ImportError as e:
        raise RemoteError("UNAVAILABLE", f"no daemon to compile on and no local backend ({e})") from None
    o = _options(options)
    kernel = compile_module(module, target=target, num_warps=o["num_warps"], num_stages=o["num_stages"])
    ptx = kernel.asm["ptx"]
    assert isinstance(ptx, str)
    return RemoteKernel(kernel.cubin, ptx, dict(kernel.metadata, service={"tier": "local"}))


def _checked(url: str, key: str, tier: str, digest: str, cubin: bytes, ptx: str, metadata: dict[str, Any]) -> RemoteKernel:
    if hashlib.sha256(cubin).hexdigest() != digest:
        raise RemoteError("DATA_LOSS", f"the cubin from {url} does not match its digest")
    return RemoteKernel(cubin, ptx, dict(metadata, service={"tier": tier, "key": key, "server": url}))


class _Client(Protocol):
    def compile(self, ir: bytes, options: dict[str, Any], target: str, spec: dict[str, str]) -> RemoteKernel: ...

    def close(self) -> None: ...


def _client(url: str) -> _Client:
    token = _token()
    client = _clients.get((url, token))
    if client is None:
        client = _clients[(url, token)] = (_Grpc if url.startswith("grpc") else _Http)(url, token)
    return client


def _ca() -> bytes | None:
    path = os.environ.get("DESPINA_SERVER_CA")
    return open(path, "rb").read() if path else None


class _Grpc:
    def __init__(self, url: str, token: str | None) -> None:
        import grpc

        from despina.proto import service_pb2_grpc

        address = url.split("://", 1)[1].rstrip("/")
        options = [("grpc.max_receive_message_length", -1)]
        if url.startswith("grpcs://"):
            channel = grpc.secure_channel(address, grpc.ssl_channel_credentials(_ca()), options)
        else:
            channel = grpc.insecure_channel(address, options)
        self.url, self.grpc, self.channel = url, grpc, channel
        self.stub = service_pb2_grpc.CompilerStub(channel)
        self.metadata = (("authorization", f"Bearer {token}"),) if token else ()

    def close(self) -> None:
        self.channel.close()

    def compile(self, ir: bytes, options: dict[str, Any], target: str, spec: dict[str, str]) -> RemoteKernel:
        from despina.proto import service_pb2 as pb

        request = pb.CompileRequest(ir=ir, target=target, specialization=spec, options=pb.CompileOptions(**options))
        try:
            r = self.stub.Compile(request, timeout=COMPILE_TIMEOUT_S, metadata=self.metadata)
        except self.grpc.RpcError as e:
            code, details = e.code(), e.details() or ""
            error = ServerUnavailable if code == self.grpc.StatusCode.UNAVAILABLE else RemoteError
            raise error(code.name, details) from None
        tier = pb.Tier.Name(r.tier).lower()
        return _checked(self.url, r.key, tier, r.digest, r.cubin, r.ptx, json.loads(r.metadata_json or "{}"))


class _Http:
    """JSON over one keep-alive connection (the standard library's: quick to start in a fresh process)."""

    def __init__(self, url: str, token: str | None) -> None:
        import http.client
        import threading
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        self.url, self.http = url.rstrip("/"), http.client
        self.headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
        self.connect: Callable[[], http.client.HTTPConnection]
        if parts.scheme == "https":
            import ssl

            ca = _ca()
            context = ssl.create_default_context(cadata=ca.decode() if ca else None)
            self.connect = lambda: http.client.HTTPSConnection(parts.netloc, timeout=COMPILE_TIMEOUT_S, context=context)
        else:
            self.connect = lambda: http.client.HTTPConnection(parts.netloc, timeout=COMPILE_TIMEOUT_S)
        self.conn: Any = None
        self.lock = threading.Lock()

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _post(self, path: str, body: bytes) -> tuple[int, bytes]:
        with self.lock:
            for attempt in (0, 1):
                fresh = self.conn is None
                if fresh:
                    self.conn = self.connect()
                try:
                    self.conn.request("POST", path, body, self.headers)
                    response = self.conn.getresponse()
                    return response.status, response.read()
                except TimeoutError:
                    self.close()
                    raise RemoteError("DEADLINE_EXCEEDED", f"no answer from {self.url} within {COMPILE_TIMEOUT_S:g}s") from None
                except (OSError, self.http.HTTPException) as e:
                    self.close()
                    if fresh or attempt:  # a kept-alive connection may have been closed by the daemon: retry once
                        raise ServerUnavailable("UNAVAILABLE", f"{type(e).__name__}: {e}") from None
            raise AssertionError("unreachable")

    def compile(self, ir: bytes, options: dict[str, Any], target: str, spec: dict[str, str]) -> RemoteKernel:
        body = {"ir": base64.b64encode(ir).decode(), "target": target, "options": options, "specialization": spec}
        status, data = self._post("/v1/compile", json.dumps(body).encode())
        try:
            reply = json.loads(data)
        except ValueError:
            reply = {}
        if status != 200:
            error = reply.get("error") if isinstance(reply, dict) else None
            code, message = (error["code"], error["message"]) if isinstance(error, dict) else (f"HTTP_{status}", data[:500].decode(errors="replace"))
            raise (ServerUnavailable if status == 503 else RemoteError)(code, message)
        cubin = base64.b64decode(reply["cubin"])
        return _checked(self.url, reply["key"], reply["tier"], reply["digest"], cubin, reply["ptx"], reply["metadata"])
