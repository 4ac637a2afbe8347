"""`despina health [ADDRESS]`: ask a daemon's gRPC health service whether it serves; exit 0 if so, 1 if not.

Made for container health checks and probes: one line on standard output when the daemon serves,
one on standard error naming the address and what went wrong otherwise, never a traceback. With no
ADDRESS it probes the daemon that the same environment configures (`DESPINA_HOST`,
`DESPINA_GRPC_PORT`, `DESPINA_TLS_CERT`), so an image's HEALTHCHECK needs no arguments:

    despina health                          # grpc://127.0.0.1:$DESPINA_GRPC_PORT (grpcs:// with DESPINA_TLS_CERT)
    despina health grpcs://gpu-host:50051 --ca ca.pem
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from despina import cli_env

HELP = "ask a daemon's gRPC health service whether it serves (exit 0) or not (exit 1)"
SERVICE = "despina.service.v1.Compiler"
WILDCARDS = ("", "0.0.0.0", "::", "[::]")
# Variables that name something of the daemon's already: the probe reads the same ones.
ENVIRONMENT_NAMES = {"--ca": "DESPINA_SERVER_CA", "--timeout": "DESPINA_HEALTH_TIMEOUT",
                     "--service": "DESPINA_HEALTH_SERVICE", "--server-name": "DESPINA_HEALTH_SERVER_NAME"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("address", nargs="?", default=None,
                   help="[grpc://|grpcs://]HOST:PORT (default: the daemon this environment configures: "
                        "$DESPINA_HOST, or 127.0.0.1 when that is unset or a wildcard, port $DESPINA_GRPC_PORT or "
                        "50051, grpcs:// when $DESPINA_TLS_CERT is set)")
    p.add_argument("--service", default=SERVICE,
                   help=f"the service whose status to ask for; '' for the whole daemon (default: {SERVICE})")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the answer (default: 5)")
    p.add_argument("--ca", default=None,
                   help="CA bundle (PEM) to check a grpcs:// daemon's certificate with (default: $DESPINA_TLS_CERT, "
                        "the daemon's own certificate, else the system's roots)")
    p.add_argument("--server-name", default=None,
                   help="the name the daemon's certificate must carry, when it is not the address's host (default: "
                        "the host)")
    p.add_argument("--token-file", default=None,
                   help="send 'Authorization: Bearer <token in this file>', for a proxy in front of the daemon that "
                        "wants it; the daemon itself answers health checks without one (default: $DESPINA_TOKEN)")
    cli_env.bind(p, ENVIRONMENT_NAMES)


def default_address() -> str:
    """The gRPC address of the daemon that this process's environment configures."""
    host = os.environ.get("DESPINA_HOST", "").strip()
    host = "127.0.0.1" if host in WILDCARDS else host
    port = os.environ.get("DESPINA_GRPC_PORT", "50051").strip()
    scheme = "grpcs" if os.environ.get("DESPINA_TLS_CERT") else "grpc"
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


def target(address: str) -> tuple[str, bool]:
    """`host:port` and whether TLS is used, from `[grpc://|grpcs://]HOST:PORT`; ValueError naming what is wrong."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "grpc", address
    if scheme not in ("grpc", "grpcs"):
        raise ValueError(f"address {address!r}: the scheme is grpc:// or grpcs://")
    host, _, port = rest.rstrip("/").rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        hint = " (the daemon's gRPC is off: DESPINA_GRPC_PORT=off)" if port == "off" else ""
        raise ValueError(f"address {address!r}: expected HOST:PORT with a port 1-65535{hint}")
    return f"{host}:{port}", scheme == "grpcs"


def run(args: argparse.Namespace) -> int:
    address = args.address or default_address()
    try:
        where, tls = target(address)
        ca = args.ca or (os.environ.get("DESPINA_TLS_CERT") if tls else None)
        root = _read("--ca" if args.ca else "--ca (DESPINA_TLS_CERT)", ca) if tls and ca else None
        token = (_read("--token-file", args.token_file).decode() if args.token_file
                 else os.environ.get("DESPINA_TOKEN", "")).strip()
    except ValueError as e:
        print(f"despina health: error: {cli_env.blame(str(e), args)}", file=sys.stderr)
        return 2
    try:
        status = check(where, tls, root, args.server_name, token or None, args.service, args.timeout)
    except ImportError as e:
        print(f"despina health: error: the probe needs gRPC: pip install 'despina[server]' ({e})", file=sys.stderr)
        return 2
    service = args.service or "(whole daemon)"
    if status == "SERVING":
        print(f"{address} {service}: SERVING")
        return 0
    print(f"despina health: {address} {service}: {status}", file=sys.stderr)
    return 1


def _read(flag: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise ValueError(f"{flag} {path!r}: {e.strerror or e}") from None


def check(where: str, tls: bool, root: bytes | None, server_name: str | None, token: str | None, service: str,
          timeout: float) -> str:
    """The health status of `service` at `where` (SERVING, NOT_SERVING, ...), or the gRPC error that stood in the
    way as `CODE: details`."""
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")  # gRPC's own log lines would interleave with the answer
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    options = [("grpc.ssl_target_name_override", server_name)] if server_name else []
    channel = (grpc.secure_channel(where, grpc.ssl_channel_credentials(root), options) if tls
               else grpc.insecure_channel(where, options))
    metadata = (("authorization", f"Bearer {token}"),) if token else None
    try:
        with channel:
            answer = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout, metadata=metadata)
    except grpc.RpcError as e:
        details = (e.details() or "").splitlines() if isinstance(e, grpc.Call) else []
        code = e.code().name if isinstance(e, grpc.Call) else "UNKNOWN"
        return f"{code}: {details[0] if details else 'no details'}"
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status))

