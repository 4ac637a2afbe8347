"""The client (`despina.remote`) against real daemons: gRPC, HTTP, TLS, tokens, fallback."""

from __future__ import annotations

import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import despina
from despina import remote
from despina.compiler.options import CompileOptions

from .conftest import Daemon, free_port, unique
from .kernels import vector_add
from .test_grpc import TOKEN, guarded  # noqa: F401  (fixture)


@pytest.fixture(autouse=True)
def fresh_client(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("DESPINA_SERVER", "DESPINA_TOKEN", "DESPINA_SERVER_REQUIRED", "DESPINA_SERVER_CA"):
        monkeypatch.delenv(name, raising=False)
    yield
    despina.set_server(None)
    remote._warned.clear()


@pytest.mark.parametrize("scheme", ["grpc", "http"])
def test_compile_remote(daemon: Daemon, scheme: str) -> None:
    despina.set_server(daemon.grpc if scheme == "grpc" else daemon.http)
    module = vector_add(salt=unique())
    cubin, ptx, metadata = remote.compile_remote(module, CompileOptions(num_warps=2), target="sm_90")
    assert metadata["service"]["tier"] == "compiled" and metadata["num_warps"] == 2 and cubin and "add_kernel" in ptx
    again = remote.compile_remote(module, CompileOptions(num_warps=2), target="sm_90")
    assert again.metadata["service"]["tier"] == "memory" and again.cubin == cubin


def test_token_from_the_environment(guarded: Daemon, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setenv("DESPINA_SERVER", guarded.grpc)
    with pytest.raises(remote.RemoteError) as info:
        remote.compile_remote(vector_add(salt=unique()))
    assert info.value.code == "UNAUTHENTICATED"
    monkeypatch.setenv("DESPINA_TOKEN", TOKEN)
    assert remote.compile_remote(vector_add(salt=unique())).metadata["service"]["tier"] == "compiled"


def test_refused_kernel_is_an_error_not_a_fallback(daemon: Daemon) -> None:
    despina.set_server(daemon.http)
    with pytest.raises(remote.RemoteError, match="INVALID_ARGUMENT.*refuses"):
        remote.compile_remote(vector_add(salt=unique(), fake_fail=True))


@pytest.mark.parametrize("scheme", ["grpc", "http"])
def test_unreachable_daemon_falls_back_with_one_warning(scheme: str, monkeypatch: pytest.MonkeyPatch) -> None:
    local = remote.RemoteKernel(b"local", "// local", {"service": {"tier": "local"}})
    monkeypatch.setattr(remote, "_compile_local", lambda *a: local)
    despina.set_server(f"{scheme}://127.0.0.1:{free_port()}")
    with pytest.warns(RuntimeWarning, match="unreachable"):
        assert remote.compile_remote(vector_add()) is local
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert remote.compile_remote(vector_add()) is local
    monkeypatch.setenv("DESPINA_SERVER_REQUIRED", "1")
    with pytest.raises(remote.ServerUnavailable):
        remote.compile_remote(vector_add())


def test_set_server_checks_the_scheme() -> None:
    with pytest.raises(ValueError, match="grpc://"):
        despina.set_server("tcp://host:1")


def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True)
    return cert, key


def test_tls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if subprocess.run(["which", "openssl"], capture_output=True).returncode:
        pytest.skip("openssl is not installed")
    cert, key = self_signed(tmp_path)
    d = Daemon(tmp_path, extra=("--tls-cert", str(cert), "--tls-key", str(key)), token=TOKEN)
    try:
        monkeypatch.setenv("DESPINA_SERVER_CA", str(cert))
        monkeypatch.setenv("DESPINA_TOKEN", TOKEN)
        module = vector_add(salt=unique())
        for url in (d.grpc.replace("grpc://", "grpcs://"), d.http):
            despina.set_server(url)
            got: Any = remote.compile_remote(module)
            assert got.metadata["service"]["tier"] in ("compiled", "memory")
        despina.set_server(d.http.replace("https://", "http://"))
        monkeypatch.setenv("DESPINA_SERVER_REQUIRED", "1")
        with pytest.raises(remote.RemoteError):
            remote.compile_remote(module)
    finally:
        despina.set_server(None)  # closes the client's connections, so the daemon stops at once
        d.stop()


def _prepared_clients(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The addresses whose client `prepare_ahead`'s thread makes, recorded; each wait joins the thread."""
    _join_preparation()  # another test's
    made: list[str] = []
    real = remote._client
    monkeypatch.setattr(remote, "_client", lambda url: made.append(url) or real(url))
    return made


def _join_preparation() -> None:
    import threading

    for t in threading.enumerate():
        if t.name == "despina-prepare-ahead":
            t.join(10)


def test_defining_a_kernel_with_a_daemon_set_prepares_its_client(daemon: Daemon, monkeypatch: pytest.MonkeyPatch) -> None:
    """The gRPC client (its channel module imported, its channel made) is ready before the first launch:
    made on a background thread when a kernel is defined with DESPINA_SERVER set, once per process,
    and again when `set_server` names another daemon; not in the interpreter, not without a daemon."""
    from despina.jit import JITFunction

    made = _prepared_clients(monkeypatch)
    remote._prepared.clear()

    def kernel(x):  # noqa: ANN001, ANN202
        pass

    JITFunction(kernel)
    _join_preparation()
    assert made == []  # no daemon configured
    monkeypatch.setenv("DESPINA_SERVER", daemon.grpc)
    JITFunction(kernel, interpret=True)
    _join_preparation()
    assert made == []
    JITFunction(kernel)
    JITFunction(kernel)
    _join_preparation()
    assert made == [daemon.grpc] and isinstance(remote._clients[(daemon.grpc, None)], remote._Grpc)
    despina.set_server(daemon.http)
    _join_preparation()
    assert made == [daemon.grpc, daemon.http]
    module = vector_add(salt=unique())  # the prepared client serves the first request
    assert remote.compile_remote(module, CompileOptions(num_warps=2), target="sm_90").cubin
    assert made[-1] == daemon.http and len(remote._clients) == 1
    monkeypatch.delenv("DESPINA_SERVER")


def test_a_daemon_that_cannot_be_reached_is_prepared_silently(monkeypatch: pytest.MonkeyPatch) -> None:
    made = _prepared_clients(monkeypatch)
    despina.set_server(f"grpc://127.0.0.1:{free_port()}")
    _join_preparation()
    assert len(made) == 1  # the client of a daemon that is not there: made, no error, no connection attempted
