"""`despina serve`: the daemon, with gRPC and HTTP on one event loop over one `CompileService`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from collections.abc import Iterator
from typing import Any

from .config import DEFAULT_COMPILER, DEFAULT_EXECUTOR, ServiceConfig, default_disk_dir

HELP = "run the compilation daemon (gRPC and HTTP)"
log = logging.getLogger("despina.server")


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = ServiceConfig()
    p.add_argument("--host", default="0.0.0.0", help="address to listen on (default: all)")
    p.add_argument("--grpc-port", type=int, default=50051, help="gRPC port; 0 turns gRPC off (default: 50051)")
    p.add_argument("--http-port", type=int, default=8000, help="HTTP port; 0 turns HTTP off (default: 8000)")
    p.add_argument("--redis-url", default=None, help="shared cache, e.g. redis://HOST:6379/0 (default: none)")
    p.add_argument("--cache-dir", default=None,
                   help="the daemon's disk cache; '' turns it off (default: $DESPINA_CACHE_DIR/daemon or ~/.cache/despina/daemon)")
    p.add_argument("--no-disk-cache", action="store_true", help="no disk cache: memory (and Redis) only")
    p.add_argument("--cache-max-bytes", type=int, default=d.disk_bytes,
                   help=f"bound of the disk cache; the least recently used kernels go first (default: {d.disk_bytes})")
    p.add_argument("--workers", type=int, default=d.workers, help=f"compile worker processes (default: {d.workers})")
    p.add_argument("--token-file", default=None, help="require 'Authorization: Bearer <token in this file>'")
    p.add_argument("--tls-cert", default=None, help="serve gRPC and HTTP over TLS with this certificate (PEM)")
    p.add_argument("--tls-key", default=None, help="... and this private key (PEM)")
    p.add_argument("--compile-timeout", type=float, default=d.compile_timeout_s, help="seconds per compilation")
    p.add_argument("--worker-memory", type=int, default=d.worker_memory_bytes,
                   help=f"address-space cap of each compile worker in bytes; 0: none (default: {d.worker_memory_bytes})")
    p.add_argument("--max-ir-bytes", type=int, default=d.max_ir_bytes, help="largest IR accepted")
    p.add_argument("--max-request-bytes", type=int, default=d.max_request_bytes, help="largest request accepted")
    p.add_argument("--redis-ttl", type=int, default=d.redis_ttl_s, help="seconds a Redis entry lives")
    p.add_argument("--compiler", default=DEFAULT_COMPILER, help="backend entry point, module:function")
    p.add_argument("--execute-timeout-s", type=float, default=d.execute_timeout_s,
                   help=f"seconds one Execute may run on the GPU before its worker is killed (default: {d.execute_timeout_s:g})")
    p.add_argument("--executor", default=DEFAULT_EXECUTOR, help="Execute's GPU worker entry point, module:function")
    p.add_argument("--log-level", default="INFO")


def config_from(args: argparse.Namespace) -> ServiceConfig:
    if bool(args.tls_cert) != bool(args.tls_key):
        raise SystemExit("despina serve: --tls-cert and --tls-key go together")
    if not args.execute_timeout_s > 0:
        raise SystemExit("despina serve: --execute-timeout-s must be positive")
    if args.worker_memory < 0:
        raise SystemExit("despina serve: --worker-memory must be 0 (no cap) or a number of bytes")
    if args.cache_max_bytes < 1:
        raise SystemExit("despina serve: --cache-max-bytes must be positive")
    disk_dir = None if args.no_disk_cache or args.cache_dir == "" else (args.cache_dir or default_disk_dir())
    return ServiceConfig(
        redis_url=args.redis_url, workers=args.workers, compile_timeout_s=args.compile_timeout, compiler=args.compiler,
        worker_memory_bytes=args.worker_memory,
        redis_ttl_s=args.redis_ttl, max_ir_bytes=args.max_ir_bytes, max_request_bytes=args.max_request_bytes,
        disk_dir=disk_dir, disk_bytes=args.cache_max_bytes,
        execute_timeout_s=args.execute_timeout_s, executor=args.executor,
    )


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(serve(args, config))
    return 0


async def serve(args: argparse.Namespace, config: ServiceConfig) -> None:
    from .core import CompileService

    service = CompileService(config)
    # The workers spawn and import the compiler while this process imports the transports.
    starting = asyncio.ensure_future(service.start())
    await asyncio.sleep(0)
    import uvicorn

    from . import auth, grpc_transport, http_transport

    token = auth.load_token(args.token_file) if args.token_file else None
    tls = (args.tls_cert, args.tls_key) if args.tls_cert else None
    await starting
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    grpc_server = await grpc_transport.start(service, args.host, args.grpc_port, token, tls) if args.grpc_port else None
    http_server = None
    if args.http_port:
        app = http_transport.create_app(service, token)
        http_server = _http_server(uvicorn.Config(
            app, host=args.host, port=args.http_port, log_level="warning", access_log=False, lifespan="off",
            ssl_certfile=args.tls_cert, ssl_keyfile=args.tls_key, timeout_graceful_shutdown=3,
        ))
        http_task = asyncio.ensure_future(http_server.serve())
    log.info("despina serve: gRPC on %s:%s, HTTP on %s:%s, disk cache %s, Redis %s, %d workers%s", args.host,
             args.grpc_port or "-", args.host, args.http_port or "-", config.disk_dir or "off", config.redis_url or "off",
             config.workers, ", TLS" if tls else "")
    await stop.wait()
    log.info("shutting down")
    if http_server is not None:
        http_server.should_exit = True
        await http_task
    if grpc_server is not None:
        await grpc_server.stop(grace=5)
    await service.close()


def _http_server(config: Any) -> Any:
    """uvicorn's server without its own signal handling: this daemon owns SIGINT and SIGTERM."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return Server(config)
