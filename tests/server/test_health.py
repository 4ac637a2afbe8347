"""`despina health` against real daemons: exit 0 and one line when the daemon serves, 1 and one line on standard error
when it does not (nothing listening, an unknown service, a certificate it cannot check), 2 for an address or file it
cannot use; the address, TLS and token from the daemon's own variables; never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from despina.server.health import default_address, target

from .conftest import Daemon, free_port
from .test_remote import self_signed

TOKEN = "health-probe-token"


def probe(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DESPINA_")}
    out = subprocess.run([sys.executable, "-m", "despina", "health", *argv], env={**clean, **env},
                         capture_output=True, text=True, timeout=60)
    assert "Traceback" not in out.stderr + out.stdout, out.stderr
    said = [line for line in (out.stdout + out.stderr).splitlines() if not line.startswith(("usage:", " "))]
    assert len(said) == 1, out  # argparse's usage lines aside
    return out


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("plain"), extra=("--no-disk-cache",))
    yield d
    d.stop()


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Daemon, Path]]:
    if subprocess.run(["which", "openssl"], capture_output=True).returncode:
        pytest.skip("openssl is not installed")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = self_signed(folder)
    d = Daemon(folder, extra=("--no-disk-cache", "--tls-cert", str(cert), "--tls-key", str(key)), token=TOKEN)
    yield d, cert
    d.stop()


def test_a_serving_daemon(plain: Daemon) -> None:
    out = probe(plain.grpc)
    assert out.returncode == 0 and out.stdout.strip() == f"{plain.grpc} despina.service.v1.Compiler: SERVING"
    assert probe(f"127.0.0.1:{plain.grpc_port}", "--service", "").returncode == 0


def test_the_address_of_the_daemon_the_environment_configures(plain: Daemon) -> None:
    out = probe(DESPINA_HOST="0.0.0.0", DESPINA_GRPC_PORT=str(plain.grpc_port))
    assert out.returncode == 0 and out.stdout.startswith(f"grpc://127.0.0.1:{plain.grpc_port} "), out


def test_nothing_listening_is_exit_1() -> None:
    out = probe(f"grpc://127.0.0.1:{free_port()}", "--timeout", "2")
    assert out.returncode == 1 and "UNAVAILABLE" in out.stderr and out.stdout == "", out


def test_an_unknown_service_is_exit_1(plain: Daemon) -> None:
    out = probe(plain.grpc, "--service", "no.such.Service")
    assert out.returncode == 1 and "no.such.Service: NOT_FOUND" in out.stderr, out


def test_tls_and_token_from_the_daemons_variables(tls: tuple[Daemon, Path], tmp_path: Path) -> None:
    d, cert = tls
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    env = {"DESPINA_HOST": "::", "DESPINA_GRPC_PORT": str(d.grpc_port), "DESPINA_TLS_CERT": str(cert)}
    out = probe(**env, DESPINA_TOKEN_FILE=str(token_file))
    assert out.returncode == 0 and out.stdout.startswith(f"grpcs://127.0.0.1:{d.grpc_port} "), out
    assert probe(**env).returncode == 0  # the daemon answers health checks without its token
    # plain gRPC to a TLS port, and TLS with roots that do not sign the daemon's certificate, both fail
    assert probe(f"grpc://127.0.0.1:{d.grpc_port}", "--timeout", "2").returncode == 1
    other, _ = self_signed(tmp_path)
    assert probe(f"grpcs://127.0.0.1:{d.grpc_port}", "--ca", str(other), "--timeout", "2").returncode == 1


@pytest.mark.parametrize("argv, env, words", [
    (["http://127.0.0.1:8000"], {}, "grpc:// or grpcs://"),
    (["127.0.0.1"], {}, "HOST:PORT"),
    ([], {"DESPINA_GRPC_PORT": "off"}, "gRPC is off"),
    (["127.0.0.1:1", "--token-file", "/nonexistent/token"], {}, "--token-file '/nonexistent/token'"),
    (["127.0.0.1:1"], {"DESPINA_TOKEN_FILE": "/nonexistent/token"}, "(--token-file is DESPINA_TOKEN_FILE)"),
    (["grpcs://127.0.0.1:1"], {"DESPINA_SERVER_CA": "/nonexistent/ca.pem"}, "(--ca is DESPINA_SERVER_CA)"),
    (["127.0.0.1:1", "--timeout", "soon"], {}, "--timeout"),
])
def test_what_it_cannot_use_is_exit_2(argv: list[str], env: dict[str, str], words: str) -> None:
    out = probe(*argv, **env)
    assert out.returncode == 2 and words in out.stderr, out
    assert out.stderr.splitlines()[-1].startswith("despina health: error:"), out


def test_the_token_reaches_a_proxy_that_wants_it(tmp_path: Path) -> None:
    """A health service behind something that checks the token (here a gRPC server that refuses calls without it)."""

    class NeedsToken(grpc.ServerInterceptor):
        def intercept_service(self, continuation: Any, details: grpc.HandlerCallDetails) -> Any:
            if ("authorization", f"Bearer {TOKEN}") in tuple(details.invocation_metadata or ()):
                return continuation(details)
            return grpc.unary_unary_rpc_method_handler(
                lambda request, context: context.abort(grpc.StatusCode.UNAUTHENTICATED, "no token"))

    server = grpc.server(futures.ThreadPoolExecutor(2), interceptors=[NeedsToken()])
    servicer = health.HealthServicer()
    servicer.set("despina.service.v1.Compiler", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        refused = probe(f"127.0.0.1:{port}")
        assert refused.returncode == 1 and "UNAUTHENTICATED" in refused.stderr, refused
        assert probe(f"127.0.0.1:{port}", DESPINA_TOKEN=TOKEN).returncode == 0
        (tmp_path / "token").write_text(f"  {TOKEN}\n")
        assert probe(f"127.0.0.1:{port}", "--token-file", str(tmp_path / "token")).returncode == 0
    finally:
        server.stop(None)


def test_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DESPINA_HOST", "DESPINA_GRPC_PORT", "DESPINA_TLS_CERT"):
        monkeypatch.delenv(name, raising=False)
    assert default_address() == "grpc://127.0.0.1:50051"
    monkeypatch.setenv("DESPINA_HOST", "::1")
    monkeypatch.setenv("DESPINA_TLS_CERT", "/etc/cert.pem")
    assert default_address() == "grpcs://[::1]:50051"
    assert target("grpcs://[::1]:50051") == ("[::1]:50051", True)
    assert target("gpu-host:7000") == ("gpu-host:7000", False)
    with pytest.raises(ValueError, match="port 1-65535"):
        target("gpu-host:0")
