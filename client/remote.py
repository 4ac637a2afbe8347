"""Compile on a Despina daemon instead of in-process.

    export DESPINA_SERVER=grpc://gpu-host:50051    # or http://gpu-host:8000; grpcs:// and https:// for TLS
    export DESPINA_TOKEN=...                       # when the daemon was started with --token-file

or `despina.set_server("grpc://gpu-host:50051", token="...")`. Then

    cubin, ptx, metadata = compile_remote(module, options, target="sm_90")

sends the IR and returns the daemon's cubin; `metadata["service"]` says which tier and which daemon
answered. `DESPINA_SERVER` may list several daemons, `grpc://a:50051,grpc://b:50051`: each process
asks one of them and goes on to the next when it cannot be reached (remote_failover.py). When no
daemon can be reached, it compiles in-process instead, with one warning; with
`DESPINA_SERVER_REQUIRED=1` that is an error naming every address. `DESPINA_SERVER_CA` names a CA
bundle for TLS.

The request carries this host's CUDA driver version (`driver.version()`, 0 without a driver). A
driver older than the daemon's toolchain gets PTX its driver can JIT instead of a cubin:
`image_format` is then "ptx", `cubin` is empty and `image` (what the runtime loads) is the PTX.
A driver too old even for the kernel's PTX is a `RemoteError` with code FAILED_PRECONDITION.

`kernel.run_remote[grid](*args, **constexprs)` (`run_remote` here) runs a kernel on the daemon's GPU:
NumPy arrays go there and come back, written into the caller's arrays in place.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar
from urllib.parse import quote

from despina.compiler.ir.core import Module
from despina.compiler.options import DEFAULTS, CompileOptions

from .caller import user_stacklevel
from .remote_errors import RemoteError, ServerUnavailable

if TYPE_CHECKING:
    from despina.jit import JITFunction

    from .remote_failover import Servers

CONNECT_TIMEOUT_S = 5.0
COMPILE_TIMEOUT_S = 600.0
# An Execute compiles (up to the daemon's compile time-out), then runs (its --execute-timeout-s).
EXECUTE_TIMEOUT_S = 900.0
_settings: dict[str, str | None] = {}
_clients: dict[tuple[str, str | None], _Client] = {}
_servers: dict[tuple[str, int], Servers] = {}  # by spec and process: a fork orders the daemons afresh
_lock = threading.Lock()
_prepared: set[tuple[str, int]] = set()  # (spec, pid) whose client `prepare_ahead` made
T = TypeVar("T")
_warned: set[str] = set()


class RemoteKernel(NamedTuple):
    cubin: bytes
    ptx: str
    metadata: dict[str, Any]

    @property
    def image_format(self) -> str:
        """"cubin", or "ptx" when the daemon answered PTX for this host's older driver."""
        return str(self.metadata.get("image_format", "cubin"))

    @property
    def image(self) -> bytes:
        """What cuModuleLoadData loads: the cubin, or the PTX's text."""
        return self.ptx.encode() if self.image_format == "ptx" else self.cubin


def set_server(url: str | None, token: str | None = None) -> None:
    """Use the daemon at `url` (grpc://, grpcs://, http:// or https://), or the daemons of a comma-separated
    list of them (each process asks one and fails over to the next); None goes back to DESPINA_SERVER."""
    if url is not None:
        from .remote_failover import addresses

        addresses(url, "set_server")
    _settings["url"], _settings["token"] = url, token
    with _lock:
        for client in _clients.values():
            client.close()
        _clients.clear()
        _servers.clear()
        _prepared.clear()
    prepare_ahead()


def server() -> str | None:
    """The daemon's URL (or comma-separated URLs), from `set_server` or DESPINA_SERVER; None: compile in-process."""
    return _settings.get("url") or os.environ.get("DESPINA_SERVER") or None


def _token() -> str | None:
    return _settings.get("token") or os.environ.get("DESPINA_TOKEN") or None


def _required() -> bool:
    return os.environ.get("DESPINA_SERVER_REQUIRED", "0").lower() in ("1", "true", "yes", "on")


def compile_remote(module: Module, options: CompileOptions | None = None, target: str = "sm_90",
                   specialization: dict[str, str] | None = None, driver_version: int | None = None) -> RemoteKernel:
    """The kernel's cubin, PTX and metadata, from the daemon (or in-process when there is none).

    `options`: the `CompileOptions` (None: the defaults).
    `driver_version` is the CUDA driver the image is for (cuDriverGetVersion's number, 12080 for
    12.8; 0 asks for a cubin whatever the driver); None: this host's driver.
    Raises `RemoteError` when the daemon refuses the kernel (its message says why).
    """
    got = try_remote(module, options, target, specialization, driver_version)
    return got if got is not None else _compile_local(module, options, target)


def try_remote(module: Module, options: CompileOptions | None = None, target: str = "sm_90", specialization: dict[str, str] | None = None,
               driver_version: int | None = None) -> RemoteKernel | None:
    """`compile_remote` without the in-process fallback: None when no daemon is configured, or when
    it is unreachable (with one warning; an error with DESPINA_SERVER_REQUIRED=1)."""
    url = server()
    if url is None:
        return None
    from despina.compiler.ir.codec import encode

    if driver_version is None:
        driver_version = _driver_version()
    ir, opts, spec = encode(module), _options(options), specialization or {}
    try:
        return _failover(url, lambda client: client.compile(ir, opts, target, spec, driver_version))
    except ServerUnavailable as e:
        if _required():
            raise
        if url not in _warned:
            _warned.add(url)
            warnings.warn(f"despina: {e.message}; compiling in-process", RuntimeWarning, stacklevel=user_stacklevel())
        return None


def artifact(url: str, key: str, stage: str) -> bytes:
    """One stage (ir, gpuir, llir, ptx, sass, cubin) of the kernel that the daemon at `url` keeps under
    `key`, as `GET /v1/kernels/{key}/{stage}` (gRPC GetArtifact) answers it: text as UTF-8, the cubin's
    bytes. `RemoteError` when the daemon has none (its message says why), `ServerUnavailable` when it
    cannot be reached."""
    return _failover(url, lambda client: client.artifact(key, stage))


def _driver_version() -> int:
    from despina.runtime import driver

    return driver.version()


def _options(options: CompileOptions | None) -> CompileOptions:
    return DEFAULTS if options is None else options


def _compile_local(module: Module, options: CompileOptions | None, target: str) -> RemoteKernel:
    try:
        from despina.compiler.backends.nvptx import compile_module
    except ImportError as e:
        raise RemoteError("UNAVAILABLE", f"no daemon to compile on and no local backend ({e})") from None
    kernel = compile_module(module, target, _options(options))
    ptx = kernel.asm["ptx"]
    assert isinstance(ptx, str)
    return RemoteKernel(kernel.cubin, ptx, dict(kernel.metadata, service={"tier": "local"}))


def _checked(url: str, key: str, tier: str, digest: str, cubin: bytes, ptx: str, metadata: dict[str, Any],
             image_format: str = "cubin") -> RemoteKernel:
    """The answer, once the image the client will load (the cubin, or the PTX) matches its digest."""
    if image_format not in ("cubin", "ptx"):
        raise RemoteError("DATA_LOSS", f"{url} answered an image of unknown format {image_format[:20]!r}")
    image = ptx.encode() if image_format == "ptx" else cubin
    if hashlib.sha256(image).hexdigest() != digest:
        raise RemoteError("DATA_LOSS", f"the {image_format} from {url} does not match its digest")
    service = {"tier": tier, "key": key, "server": url}
    return RemoteKernel(cubin, ptx, dict(metadata, image_format=image_format, service=service))


class _Client(Protocol):
    def compile(self, ir: bytes, options: CompileOptions, target: str, spec: dict[str, str],
                driver_version: int = 0) -> RemoteKernel: ...

    def execute(self, ir: bytes, options: CompileOptions, target: str, grid: Sequence[int],
                args: Sequence[RemoteArgument]) -> list[RemoteBuffer]: ...

    def artifact(self, key: str, stage: str) -> bytes: ...

    def close(self) -> None: ...


def _client(url: str) -> _Client:
    """The connection to the one daemon at `url`, shared by the threads of this process."""
    token = _token()
    client = _clients.get((url, token))
    if client is None:
        with _lock:
            client = _clients.get((url, token))
            if client is None:
                client = _clients[(url, token)] = (_Grpc if url.startswith("grpc") else _Http)(url, token)
    return client


def prepare_ahead() -> None:
    """Make the client of the configured daemon (the address this process tries first) on a background
    thread, once per process and daemon setting: a program that defines its kernels and then prepares
    its data finds it made at the first launch. On an H100 host, importing gRPC's channel module and
    making the channel took 7 ms of a second client's 33 ms to its first tuned launch. The channel
    connects on its first call, as before (waiting for it here left gRPC's watcher failing on a
    channel that `set_server` closed). A failure here is silent: the first request reports it."""
    spec = server()
    if spec is None:
        return
    key = (spec, os.getpid())
    with _lock:
        if key in _prepared:
            return
        _prepared.add(key)
    threading.Thread(target=_prepare, args=(spec,), name="despina-prepare-ahead", daemon=True).start()


def _prepare(spec: str) -> None:
    try:
        _client(_servers_of(spec).candidates()[0])
    except Exception:  # noqa: BLE001 - reported by the first request, with its context
        pass


def _servers_of(spec: str) -> Servers:
    """This process's order and back-off of the daemons of `spec`."""
    servers = _servers.get((spec, os.getpid()))
    if servers is None:
        from .remote_failover import Servers

        with _lock:
            servers = _servers.setdefault((spec, os.getpid()), Servers(spec))
    return servers


def _failover(spec: str, fn: Callable[[_Client], T]) -> T:
    """`fn` of the client of the first daemon of `spec` (one URL or several) that can be reached
    (remote_failover.py); `ServerUnavailable` naming every address when none can."""
    return _servers_of(spec).call(lambda address: fn(_client(address)))


def _ca() -> bytes | None:
    path = os.environ.get("DESPINA_SERVER_CA")
    return open(path, "rb").read() if path else None


class _Grpc:
    def __init__(self, url: str, token: str | None) -> None:
        import grpc

        from despina.proto import service_pb2_grpc

        address = url.split("://", 1)[1].rstrip("/")
        # A daemon that comes back is used again within remote_failover's longest back-off.
        options = [("grpc.max_receive_message_length", -1), ("grpc.max_reconnect_backoff_ms", 30_000)]
        if url.startswith("grpcs://"):
            channel = grpc.secure_channel(address, grpc.ssl_channel_credentials(_ca()), options)
        else:
            channel = grpc.insecure_channel(address, options)
        self.url, self.grpc, self.channel = url, grpc, channel
        self.stub = service_pb2_grpc.CompilerStub(channel)
        self.metadata = (("authorization", f"Bearer {token}"),) if token else ()

    def close(self) -> None:
        self.channel.close()

    def compile(self, ir: bytes, options: CompileOptions, target: str, spec: dict[str, str],
                driver_version: int = 0) -> RemoteKernel:
        from despina.proto import service_pb2 as pb
        from despina.proto.options import to_pb

        request = pb.CompileRequest(ir=ir, target=target, specialization=spec, options=to_pb(options),
                                    driver_version=driver_version)
        try:
            r = self.stub.Compile(request, timeout=COMPILE_TIMEOUT_S, metadata=self.metadata)
        except self.grpc.RpcError as e:
            raise self._error(e) from None
        tier = pb.Tier.Name(r.tier).lower()
        image_format = "ptx" if r.image_format == pb.PTX else "cubin"  # UNSPECIFIED: a daemon that predates PTX answers
        return _checked(self.url, r.key, tier, r.digest, r.cubin, r.ptx, json.loads(r.metadata_json or "{}"), image_format)

    def execute(self, ir: bytes, options: CompileOptions, target: str, grid: Sequence[int],
                args: Sequence[RemoteArgument]) -> list[RemoteBuffer]:
        from despina.proto import service_pb2 as pb
        from despina.proto.options import to_pb

        def argument(a: RemoteArgument) -> Any:
            if isinstance(a, RemoteBuffer):
                return pb.Argument(buffer=pb.Buffer(data=a.data, dtype=a.dtype, shape=a.shape))
            return pb.Argument(float_value=a) if isinstance(a, float) else pb.Argument(int_value=int(a))

        kernel = pb.CompileRequest(ir=ir, target=target, options=to_pb(options))
        request = pb.ExecuteRequest(kernel=kernel, grid=list(grid), args=[argument(a) for a in args])
        try:
            r = self.stub.Execute(request, timeout=EXECUTE_TIMEOUT_S, metadata=self.metadata)
        except self.grpc.RpcError as e:
            raise self._error(e) from None
        return [RemoteBuffer(b.data, b.dtype, tuple(b.shape)) for b in r.buffers]

    def artifact(self, key: str, stage: str) -> bytes:
        from despina.proto import service_pb2 as pb

        try:
            r = self.stub.GetArtifact(pb.GetArtifactRequest(key=key, stage=stage), timeout=COMPILE_TIMEOUT_S,
                                      metadata=self.metadata)
        except self.grpc.RpcError as e:
            raise self._error(e) from None
        return bytes(r.data)

    def _error(self, e: Any) -> RemoteError:
        code, details = e.code(), e.details() or ""
        return (ServerUnavailable if code == self.grpc.StatusCode.UNAVAILABLE else RemoteError)(code.name, details)


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

    def _post(self, path: str, body: bytes | None, method: str = "POST") -> tuple[int, bytes]:
        with self.lock:
            for attempt in (0, 1):
                fresh = self.conn is None
                if fresh:
                    self.conn = self.connect()
                try:
                    self.conn.request(method, path, body, self.headers)
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

    def _call(self, path: str, body: dict[str, Any] | None, method: str = "POST") -> Any:
        """POST `body` as JSON to `path` (or GET or DELETE it, without a body): the JSON reply, or the
        daemon's error (`{"error": {code, message}}`, else the status and the start of the body) raised."""
        status, data = self._post(path, None if body is None else json.dumps(body).encode(), method)
        if status != 200:
            raise self._error(status, data)
        try:
            return json.loads(data)
        except ValueError:
            return {}

    @staticmethod
    def _error(status: int, data: bytes) -> RemoteError:
        """The daemon's error answer (`{"error": {code, message}}`, else the status and the start of the body)."""
        try:
            reply = json.loads(data)
        except ValueError:
            reply = {}
        error = reply.get("error") if isinstance(reply, dict) else None
        code, message = (error["code"], error["message"]) if isinstance(error, dict) else (f"HTTP_{status}", data[:500].decode(errors="replace"))
        return (ServerUnavailable if status == 503 else RemoteError)(code, message)

    def _get(self, path: str) -> Any:
        return self._call(path, None, "GET")

    def _delete(self, path: str) -> Any:
        return self._call(path, None, "DELETE")

    def compile(self, ir: bytes, options: CompileOptions, target: str, spec: dict[str, str],
                driver_version: int = 0) -> RemoteKernel:
        body = {"ir": base64.b64encode(ir).decode(), "target": target, "options": options.as_dict(), "specialization": spec,
                "driver_version": driver_version}
        reply = self._call("/v1/compile", body)
        cubin = base64.b64decode(reply["cubin"])
        return _checked(self.url, reply["key"], reply["tier"], reply["digest"], cubin, reply["ptx"], reply["metadata"],
                        reply.get("image_format", "cubin"))

    def execute(self, ir: bytes, options: CompileOptions, target: str, grid: Sequence[int],
                args: Sequence[RemoteArgument]) -> list[RemoteBuffer]:
        def argument(a: RemoteArgument) -> dict[str, Any]:
            if isinstance(a, RemoteBuffer):
                return {"buffer": {"data": base64.b64encode(a.data).decode(), "dtype": a.dtype, "shape": list(a.shape)}}
            return {"float_value": a} if isinstance(a, float) else {"int_value": int(a)}

        body = {"kernel": {"ir": base64.b64encode(ir).decode(), "target": target, "options": options.as_dict()},
                "grid": list(grid), "args": [argument(a) for a in args]}
        reply = self._call("/v1/execute", body)
        return [RemoteBuffer(base64.b64decode(b["data"]), b["dtype"], tuple(b["shape"])) for b in reply["buffers"]]

    def artifact(self, key: str, stage: str) -> bytes:
        status, data = self._post(f"/v1/kernels/{quote(key, safe='')}/{quote(stage, safe='')}", None, "GET")
        if status != 200:
            raise self._error(status, data)
        return data


# ---- remote execution: kernel.run_remote[grid](...) ------------------------------------------------


class RemoteBuffer(NamedTuple):
    """A buffer argument of an Execute, or one the daemon sent back: bytes, IR element type, shape."""

    data: bytes
    dtype: str
    shape: tuple[int, ...]


RemoteArgument = RemoteBuffer | int | float


def execute_remote(module: Module, grid: Sequence[int], args: Sequence[RemoteArgument], options: CompileOptions | None = None,
                   target: str = "") -> list[RemoteBuffer]:
    """Run `module`'s kernel on the daemon's GPU over `grid` with `args` (in the kernel's parameter order:
    a RemoteBuffer per pointer, a number per scalar); every buffer after the kernel ran, in argument
    order. `target` "" is the daemon's GPU. RuntimeError without a daemon; RemoteError when it refuses."""
    url = server()
    if url is None:
        raise RuntimeError(f"kernel '{module.kernel.name}': remote execution needs a daemon: set DESPINA_SERVER="
                           "grpc://HOST:50051 (or http://HOST:8000), or call despina.set_server(url)")
    ir, opts, dims, values = _encode(module), _options(options), tuple(grid), list(args)
    return _failover(url, lambda client: client.execute(ir, opts, target, dims, values))


class RemoteLauncher:
    """`kernel.run_remote[grid]`: the launch function of `run_remote` for one grid."""

    def __init__(self, fn: JITFunction) -> None:
        self.fn = fn

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return lambda *args, **kwargs: run_remote(self.fn, grid, args, kwargs)


class _Shipped:
    """An array as `JITFunction.specialize` sees it on the daemon: its element type and shape, and the
    address of a fresh device allocation, which is 256-byte aligned (so 0 will do)."""

    def __init__(self, dtype: Any, shape: tuple[int, ...]) -> None:
        self.dtype = dtype
        self.shape = shape

    def data_ptr(self) -> int:
        return 0


def run_remote(fn: JITFunction, grid: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
    """Specialize and lower `fn` here, as `fn[grid](*args, **kwargs)` does, run it on the daemon's GPU with
    copies of the NumPy arrays among the arguments, and write the arrays the daemon sends back into
    the caller's arrays, in place. Arguments: NumPy arrays (bf16 as `despina.reinterpret(uint16 bits,
    tl.bfloat16)`), numbers, and the kernel's constexprs; num_warps= and num_stages= as for a launch."""
    import numpy as np

    from despina import arguments
    from despina.arguments import TensorWrapper
    from despina.compiler.ir.types import PointerType, ScalarType
    from despina.language.core import unwrap
    from despina.language.descriptors import DescriptorArg
    from despina.specialization import LAUNCH_OPTIONS
    from despina.tools.tensor_descriptor import expand

    name = fn.__name__
    url = server()
    if url is None:
        raise RuntimeError(f"kernel '{name}': run_remote needs a daemon to run on: set DESPINA_SERVER=grpc://HOST:50051 "
                           "(or http://HOST:8000), or call despina.set_server(url)")
    call_kwargs = dict(kwargs)
    launch = {k: call_kwargs.pop(k) for k in LAUNCH_OPTIONS if k in call_kwargs and k not in fn.arg_names}
    if launch.get("stream") is not None:
        raise TypeError(f"kernel '{name}': run_remote takes no stream= (the kernel runs on the daemon's GPU, and the "
                        "call returns once it is done)")
    options = fn.options(launch, interpret=False)
    bound = fn.bind(args, call_kwargs)
    flat = expand(bound)  # a TensorDescriptor as its base, shape and strides
    arrays: dict[str, tuple[Any, Any, tuple[int, ...]]] = {}  # name -> (array, a uint8 view of its bytes, shape)
    as_seen: dict[str, Any] = {}  # the arguments as specialize sees them
    for pname, value in flat.items():
        v = unwrap(value)
        as_seen[pname] = value
        if pname in fn.constexpr_names or v is None or isinstance(v, (str, tuple, ScalarType, bool, int, float,
                                                                       np.bool_, np.number, DescriptorArg)):
            continue  # constexprs and numbers, as a launch takes them
        base = v.base if isinstance(v, TensorWrapper) else v
        if not isinstance(base, np.ndarray):
            raise TypeError(f"argument '{pname}' of kernel '{name}' is a {type(base).__module__}.{type(base).__name__}: "
                            "run_remote takes NumPy arrays (bf16 as despina.reinterpret(uint16 bits, tl.bfloat16)), "
                            "numbers and constexprs, and copies the arrays to the daemon's GPU and back")
        if arguments.element_type(v.dtype) is None:
            raise TypeError(f"argument '{pname}' of kernel '{name}' has unsupported dtype {v.dtype}")
        data, shape = _host_bytes(name, pname, base)
        arrays[pname] = (base, data, shape)
        as_seen[pname] = _Shipped(v.dtype, tuple(base.shape))
    shared = _overlapping(arrays)
    spec = fn.specialize(as_seen, options)
    dims = fn._grid(grid, bound, launch)
    module = fn.ir(spec, options)
    if 0 in dims:
        return
    kernel = module.kernel
    sent: list[str] = []
    values: list[RemoteArgument] = []
    for pname, param in zip(kernel.arg_names, kernel.args):
        if isinstance(param.type, PointerType):
            _, data, shape = arrays[pname]
            values.append(RemoteBuffer(data.tobytes(), str(param.type.element_ty), shape))
            sent.append(pname)
        else:
            v = unwrap(flat[pname])
            if isinstance(param.type, ScalarType) and param.type.is_floating():
                values.append(float(v))
            else:
                i = int(v)
                values.append(i - (1 << 64) if i >= 1 << 63 else i)  # a uint64 travels as its sint64 bits
    ir, opts = _encode(module), _options(options)
    back = _failover(url, lambda client: client.execute(ir, opts, "", dims, values))
    if len(back) != len(sent):
        raise RemoteError("DATA_LOSS", f"{url} sent back {len(back)} buffers for kernel '{name}', which has {len(sent)}")
    results: dict[str, Any] = {}
    for pname, buffer in zip(sent, back):
        base, data, _ = arrays[pname]
        got = np.frombuffer(buffer.data, np.uint8)
        if got.size != data.size:
            raise RemoteError("DATA_LOSS", f"{url} sent back {got.size} bytes for argument '{pname}' of kernel "
                              f"'{name}', which has {data.size}")
        if not np.array_equal(got, data):
            results[pname] = got
            if not base.flags.writeable:
                raise ValueError(f"kernel '{name}' wrote to argument '{pname}', a read-only array; pass a writable one")
    for a, b in shared:
        if a in results or b in results:
            raise ValueError(f"kernel '{name}' wrote to argument '{a if a in results else b}', which shares memory with "
                             f"argument '{b if a in results else a}': run_remote copies each array to the daemon's GPU "
                             "on its own, so the kernel did not see one buffer, and nothing was written back. Pass "
                             "distinct arrays (or run the kernel locally, kernel[grid](...))")
    for pname, got in results.items():
        arrays[pname][1][...] = got


def _encode(module: Module) -> bytes:
    from despina.compiler.ir.codec import encode

    return encode(module)


def _host_bytes(kernel: str, name: str, array: Any) -> tuple[Any, tuple[int, ...]]:
    """The bytes the kernel may address from `array`'s first element, as a writable uint8 view of the
    caller's memory (all of a C-contiguous array; the span of a strided one), and the shape sent."""
    import numpy as np

    from despina import arguments

    if array.flags.c_contiguous:
        flat = array.reshape(-1)
        return flat.view(np.uint8), tuple(array.shape)
    try:
        flat = arguments.host_buffer(array)
    except ValueError as e:
        raise ValueError(f"argument '{name}' of kernel '{kernel}': {e}") from None
    if flat.dtype != array.dtype:
        raise ValueError(f"argument '{name}' of kernel '{kernel}': its strides are not whole elements; pass "
                         "np.ascontiguousarray(x)")
    return flat.view(np.uint8), (flat.size,)


def _overlapping(arrays: dict[str, Any]) -> list[tuple[str, str]]:
    """The pairs of arguments whose bytes overlap: each array travels as a copy of its own, so a kernel
    that writes to one of them does not see one buffer (run_remote then refuses the result)."""
    spans = [(data.ctypes.data, data.ctypes.data + data.size, name) for name, (_, data, _) in arrays.items() if data.size]
    return [(a, b) for i, (start_a, end_a, a) in enumerate(spans) for start_b, end_b, b in spans[i + 1:]
            if start_a < end_b and start_b < end_a]
