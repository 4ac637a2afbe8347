"""`despina serve`: the daemon, with gRPC and HTTP on one event loop over one `CompileService`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import logging
import math
import os
import re
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from despina import cli_env

from . import access, auth
from .access import LOG_FORMATS
from .config import DEFAULT_COMPILER, DEFAULT_EXECUTOR, ServiceConfig, default_disk_dir

HELP = "run the compilation daemon (gRPC and HTTP)"
log = logging.getLogger("despina.server")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
MAX_WORKERS = 256
MAX_REDIS_TTL = 10 * 365 * 24 * 3600
ENTRY_POINT = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
# Flags whose derived variable already means something else: DESPINA_CACHE_DIR is the client's cache
# folder, under which the daemon's default one lies.
ENVIRONMENT_NAMES = {"--cache-dir": "DESPINA_DAEMON_CACHE_DIR"}


class UsageError(Exception):
    """A flag's value the daemon cannot start with; `despina serve` prints it on one line and exits with 2."""


def port(text: str) -> int | None:
    """A port number, 0 for one the system picks, or `off` (None) for no listener."""
    if text.strip().lower() == "off":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number 0-65535 or 'off', got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0-65535 or 'off', got {value}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`despina serve`'s flags, each also read from its environment variable (`--grpc-port`: DESPINA_GRPC_PORT)."""
    _flags(p)
    cli_env.bind(p, ENVIRONMENT_NAMES)


def _flags(p: argparse.ArgumentParser) -> None:
    d = ServiceConfig()
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on; another than loopback needs --token-file or --insecure (default: 127.0.0.1)")
    p.add_argument("--insecure", action="store_true",
                   help="allow listening on a non-loopback address without a token (anyone who reaches it can use it)"
                        " (default: off)")
    p.add_argument("--grpc-port", type=port, default=50051,
                   help="gRPC port; 0 lets the system pick one (the start-up line names it), 'off' serves no gRPC"
                        " (default: 50051)")
    p.add_argument("--http-port", type=port, default=8000,
                   help="HTTP port; 0 lets the system pick one (the start-up line names it), 'off' serves no HTTP"
                        " (default: 8000)")
    p.add_argument("--redis-url", default=None,
                   help="shared cache: redis://[:PASSWORD@]HOST:PORT/DB, rediss://... (TLS), unix://PATH, or "
                        "redis+sentinel://[:PASSWORD@]HOST:PORT[,HOST:PORT...]/SERVICE[/DB] for the master the "
                        "sentinels name (followed through failovers) (default: none)")
    p.add_argument("--redis-cluster", action="store_true",
                   help="--redis-url redis://HOST:PORT names one node of a Redis Cluster; the daemon finds the others"
                        " (default: off)")
    p.add_argument("--cache-dir", default=None,
                   help="the daemon's disk cache; '' turns it off (default: $DESPINA_CACHE_DIR/daemon or ~/.cache/despina/daemon)")
    p.add_argument("--no-disk-cache", action="store_true", help="no disk cache: memory (and Redis) only (default: off)")
    p.add_argument("--cache-max-bytes", type=int, default=d.disk_bytes,
                   help=f"bound of the disk cache; the least recently used kernels go first (default: {d.disk_bytes})")
    p.add_argument("--workers", type=int, default=d.workers,
                   help=f"compile worker processes, 1 to {MAX_WORKERS} (default: {d.workers}, the CPU count)")
    p.add_argument("--token-file", default=None,
                   help="require 'Authorization: Bearer <token>' with a token of this file: one a line, TOKEN or "
                        "TENANT TOKEN; each tenant lists and reads only its own kernels (default: none, no token)")
    p.add_argument("--cluster-secret-file", default=None,
                   help="key the MAC of disk and Redis cache entries with the secret in this file; every daemon "
                        "sharing the caches needs the same one (default: none, plain SHA-256 digests)")
    p.add_argument("--protect-docs", action="store_true",
                   help="with --token-file, require the token for /docs, /redoc, /openapi.json and /metrics too"
                        " (default: off: they stay open for browsers and Prometheus; /healthz is always open)")
    p.add_argument("--tls-cert", default=None, help="serve gRPC and HTTP over TLS with this certificate (PEM) (default: none)")
    p.add_argument("--tls-key", default=None, help="... and this private key (PEM) (default: none)")
    p.add_argument("--compile-timeout", type=float, default=d.compile_timeout_s,
                   help=f"seconds one compilation may take before its worker is replaced (default: {d.compile_timeout_s:g})")
    p.add_argument("--extra-workers", type=int, default=d.extra_workers,
                   help="compile workers started beyond --workers while every worker is busy with a slow compile "
                        f"and requests wait; 0: never (default: {d.extra_workers})")
    p.add_argument("--slow-compile", type=float, default=d.slow_compile_s,
                   help=f"seconds after which a busy worker counts as slow for --extra-workers (default: {d.slow_compile_s:g})")
    p.add_argument("--worker-memory", type=int, default=d.worker_memory_bytes,
                   help=f"address-space cap of each compile worker in bytes; 0: none (default: {d.worker_memory_bytes})")
    p.add_argument("--max-ir-bytes", type=int, default=d.max_ir_bytes,
                   help=f"largest IR accepted, in bytes (default: {d.max_ir_bytes})")
    p.add_argument("--max-request-bytes", type=int, default=d.max_request_bytes,
                   help=f"largest request accepted, in bytes (default: {d.max_request_bytes})")
    p.add_argument("--max-checks-per-client", type=int, default=d.checks_per_client,
                   help="kernels of one client address whose IR may wait for its check in a compile worker; more are"
                        " refused (a large gRPC request's refusal comes a second later while the client has checks)"
                        f" (default: {d.checks_per_client})")
    p.add_argument("--http-max-connections", type=int, default=d.http_max_connections,
                   help="HTTP connections at once; past it, the one waiting longest for its request's headers is "
                        f"closed (default: {d.http_max_connections}, fewer when ulimit -n is lower)")
    p.add_argument("--http-header-timeout", type=float, default=d.http_header_timeout_s,
                   help="seconds a connection may take to send a request's headers, from connecting or from its last"
                        f" answer (default: {d.http_header_timeout_s:g})")
    p.add_argument("--http-body-timeout", type=float, default=d.http_body_timeout_s,
                   help=f"seconds a request's body may take to arrive (default: {d.http_body_timeout_s:g})")
    p.add_argument("--redis-ttl", type=int, default=d.redis_ttl_s,
                   help=f"seconds a Redis entry lives (default: {d.redis_ttl_s}, 7 days)")
    p.add_argument("--compiler", default=DEFAULT_COMPILER, help=f"backend entry point, module:function (default: {DEFAULT_COMPILER})")
    p.add_argument("--execute-timeout-s", type=float, default=d.execute_timeout_s,
                   help=f"seconds one Execute may run on the GPU before its worker is killed (default: {d.execute_timeout_s:g})")
    p.add_argument("--executor", default=DEFAULT_EXECUTOR,
                   help=f"Execute's GPU worker entry point, module:function (default: {DEFAULT_EXECUTOR})")
    p.add_argument("--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS,
                   help="the least severe messages logged; INFO includes one access line per request (default: INFO)")
    p.add_argument("--log-format", default="text", choices=LOG_FORMATS,
                   help="text, or json: one JSON object per line, access lines with their fields (default: text)")


def loopback(host: str) -> bool:
    """Whether `host` is a loopback address (or `localhost`): only this machine can reach it."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: whatever it resolves to, it is not known to be loopback
        return False


def check_exposure(args: argparse.Namespace) -> None:
    """Closed by default: a daemon reachable from other machines needs a token, or --insecure."""
    if loopback(args.host) or args.token_file:
        return
    if not args.insecure:
        raise UsageError(f"--host {args.host} is reachable from other machines; give --token-file "
                         "(clients then send 'Authorization: Bearer <token>'), or --insecure to serve anyone who "
                         "reaches it")
    log.warning("listening on %s without a token (--insecure): anyone who reaches this address can compile, run "
                "kernels and read every cached kernel", args.host)


def load_secret(path: str) -> bytes:
    try:
        secret = Path(path).read_bytes().strip()
    except OSError as e:
        raise UsageError(f"--cluster-secret-file {path!r}: {e.strerror or e}") from None
    if len(secret) < 16:
        raise UsageError(f"--cluster-secret-file: the secret in {path} is {len(secret)} bytes; use at least 16 "
                         "(e.g. head -c 32 /dev/urandom | base64)")
    return secret


def config_from(args: argparse.Namespace) -> ServiceConfig:
    """The daemon's settings from its flags; `UsageError` naming the flag for a value it cannot use."""
    if bool(args.tls_cert) != bool(args.tls_key):
        raise UsageError("--tls-cert and --tls-key go together")
    if args.grpc_port is None and args.http_port is None:
        raise UsageError("--grpc-port off and --http-port off leave nothing to serve; 0 picks a free port")
    _positive("--execute-timeout-s", args.execute_timeout_s)
    _positive("--compile-timeout", args.compile_timeout)
    _positive("--http-header-timeout", args.http_header_timeout)
    _positive("--http-body-timeout", args.http_body_timeout)
    for flag, value in (("--cache-max-bytes", args.cache_max_bytes), ("--max-ir-bytes", args.max_ir_bytes),
                        ("--max-request-bytes", args.max_request_bytes), ("--redis-ttl", args.redis_ttl),
                        ("--max-checks-per-client", args.max_checks_per_client),
                        ("--http-max-connections", args.http_max_connections)):
        if value < 1:
            raise UsageError(f"{flag} must be positive, got {value}")
    if args.redis_ttl > MAX_REDIS_TTL:
        raise UsageError(f"--redis-ttl is at most {MAX_REDIS_TTL} seconds, got {args.redis_ttl}")
    _positive("--slow-compile", args.slow_compile)
    if not 0 <= args.extra_workers <= MAX_WORKERS:
        raise UsageError(f"--extra-workers must be 0 to {MAX_WORKERS}, got {args.extra_workers}")
    if args.worker_memory < 0:
        raise UsageError(f"--worker-memory must be 0 (no cap) or a number of bytes, got {args.worker_memory}")
    if not 1 <= args.workers <= MAX_WORKERS:
        raise UsageError(f"--workers must be 1 to {MAX_WORKERS}, got {args.workers}")
    for flag, value in (("--compiler", args.compiler), ("--executor", args.executor)):
        if not ENTRY_POINT.fullmatch(value):
            raise UsageError(f"{flag} takes module:function (like {DEFAULT_COMPILER}), got {value!r}")
    if args.redis_url is not None:
        _check_redis_url(args.redis_url, args.redis_cluster)
    elif args.redis_cluster:
        raise UsageError("--redis-cluster needs --redis-url redis://HOST:PORT naming one node of the cluster")
    for flag, path in (("--token-file", args.token_file), ("--tls-cert", args.tls_cert), ("--tls-key", args.tls_key)):
        if path is not None and not os.path.isfile(path):
            raise UsageError(f"{flag} {path!r}: no such file")
    disk_dir = None if args.no_disk_cache or args.cache_dir == "" else (args.cache_dir or default_disk_dir())
    return ServiceConfig(
        redis_url=args.redis_url, workers=args.workers, compile_timeout_s=args.compile_timeout, compiler=args.compiler,
        redis_cluster=args.redis_cluster,
        worker_memory_bytes=args.worker_memory, extra_workers=args.extra_workers, slow_compile_s=args.slow_compile,
        redis_ttl_s=args.redis_ttl, max_ir_bytes=args.max_ir_bytes, max_request_bytes=args.max_request_bytes,
        checks_per_client=args.max_checks_per_client, http_max_connections=args.http_max_connections,
        http_header_timeout_s=args.http_header_timeout, http_body_timeout_s=args.http_body_timeout,
        disk_dir=disk_dir, disk_bytes=args.cache_max_bytes,
        execute_timeout_s=args.execute_timeout_s, executor=args.executor,
        cluster_secret=load_secret(args.cluster_secret_file) if args.cluster_secret_file else None,
    )


def _positive(flag: str, value: float) -> None:
    if not (value > 0 and math.isfinite(value)):
        raise UsageError(f"{flag} must be a positive number of seconds, got {value}")


def _check_redis_url(url: str, cluster: bool) -> None:
    from .cache import redis_url

    try:
        redis_url.parse(url, cluster)  # no connection is made
    except ValueError as e:
        raise UsageError(f"--redis-url {redis_url.redacted(url)!r}: {e}") from None


def run(args: argparse.Namespace) -> int:
    try:
        config = config_from(args)
        tokens = auth.Tokens.load(args.token_file) if args.token_file else None
    except (UsageError, ValueError, OSError) as e:
        return _fail(e, args)
    access.configure(args.log_level, args.log_format)
    try:
        check_exposure(args)
    except UsageError as e:
        return _fail(e, args)
    try:
        asyncio.run(serve(args, config, tokens))
    except UsageError as e:
        return _fail(e, args)
    return 0


def _fail(error: Exception, args: argparse.Namespace) -> int:
    print(f"despina serve: error: {cli_env.blame(str(error), args)}", file=sys.stderr)
    return 2


def _bind_http(host: str, port: int) -> socket.socket:
    """The HTTP listening socket, bound before anything starts so that a busy port is one clear line."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # asyncio sets TCP_NODELAY only then
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise UsageError(f"cannot listen for HTTP on {host}:{port} (--host, --http-port): {e.strerror or e}") from None
    sock.listen(2048)
    sock.setblocking(False)
    return sock


async def serve(args: argparse.Namespace, config: ServiceConfig, tokens: auth.Tokens | None = None) -> None:
    from .core import CompileService

    http_socket = _bind_http(args.host, args.http_port) if args.http_port is not None else None
    service = CompileService(config)
    # The workers spawn and import the compiler while this process imports the transports.
    starting = asyncio.ensure_future(service.start())
    await asyncio.sleep(0)
    import uvicorn

    from . import grpc_transport, http_guard, http_transport, memory

    tls = (args.tls_cert, args.tls_key) if args.tls_cert else None
    await starting
    grpc_server = None
    if args.grpc_port is not None:
        try:
            grpc_server, grpc_port = await grpc_transport.start(service, args.host, args.grpc_port, tokens, tls)
        except grpc_transport.BindError as e:
            if http_socket is not None:
                http_socket.close()
            await service.close()
            raise UsageError(f"{e} (--host, --grpc-port)") from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    http_server = None
    if http_socket is not None:
        app = http_transport.create_app(service, tokens, protect_docs=args.protect_docs)
        http_server = _http_server(uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="off",
            ssl_certfile=args.tls_cert, ssl_keyfile=args.tls_key, timeout_graceful_shutdown=3,
            http=http_guard.guarded(config.http_max_connections, config.http_header_timeout_s),
        ))
        http_guard.quiet_floods("asyncio", "uvicorn.error")
        http_task = asyncio.ensure_future(http_server.serve(sockets=[http_socket]))
        sampling = asyncio.ensure_future(app.state.sampler.run())  # the viewer's plots over time
    http_port = http_socket.getsockname()[1] if http_socket is not None else None
    memory.settle()
    reclaiming = asyncio.ensure_future(memory.reclaim())  # large requests' memory back to the system
    log.info("despina serve: gRPC on %s, HTTP on %s, disk cache %s, Redis %s, %d workers%s",
             "off" if grpc_server is None else f"{args.host}:{grpc_port}",
             "off" if http_port is None else f"{args.host}:{http_port}", config.disk_dir or "off",
             _redis_shown(config), config.workers, ", TLS" if tls else "")
    await stop.wait()
    log.info("shutting down")
    reclaiming.cancel()
    if http_server is not None:
        sampling.cancel()
        http_server.should_exit = True
        await http_task
    if grpc_server is not None:
        await grpc_server.stop(grace=5)
    await service.close()


def _redis_shown(config: ServiceConfig) -> str:
    from .cache.redis_url import redacted

    if config.redis_url is None:
        return "off"
    return redacted(config.redis_url) + (" (cluster)" if config.redis_cluster else "")


def _http_server(config: Any) -> Any:
    """uvicorn's server without its own signal handling: this daemon owns SIGINT and SIGTERM."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return Server(config)
