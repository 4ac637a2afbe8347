"""`despina serve`'s flags: defaults in --help, and one clear line with exit code 2 for every value it cannot
use (malformed, out of range, a busy port, a bad Redis URL), never a traceback."""

from __future__ import annotations

import argparse
import logging
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from despina.cli import main
from despina.server import main as serve_main

from .conftest import FAKE_COMPILER, TESTS, free_port, wait_for


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line `despina serve ARGV` prints when it refuses to start (exit code 2)."""
    try:
        code = main(["serve", *argv])
    except SystemExit as e:  # argparse's own refusals
        code = int(e.code or 0)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_help_shows_every_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = re.sub(r"\s+", " ", capsys.readouterr().out)
    for flag in re.findall(r"(--[a-z-]+)", text.split("options:")[1]):
        if flag != "--help":
            after = text.split(flag, 2)[-1]
            assert "(default: " in after.split(" --")[0] or "default" in after[:400], flag
    for flag in ("--compile-timeout", "--max-ir-bytes", "--max-request-bytes", "--redis-ttl", "--log-level"):
        section = text.split(f"{flag} ")[-1]
        assert re.search(r"\(default: [^)]+\)", section[:300]), flag


BAD = [
    (["--workers", "-1"], "--workers"),
    (["--workers", "100000000"], "--workers"),
    (["--workers", "two"], "--workers"),
    (["--grpc-port", "70000"], "--grpc-port"),
    (["--http-port", "-5"], "--http-port"),
    (["--http-port", "eighty"], "--http-port"),
    (["--grpc-port", "off", "--http-port", "off"], "--http-port off"),
    (["--cache-max-bytes", "0"], "--cache-max-bytes"),
    (["--cache-max-bytes", "-10"], "--cache-max-bytes"),
    (["--max-ir-bytes", "-1"], "--max-ir-bytes"),
    (["--max-request-bytes", "0"], "--max-request-bytes"),
    (["--max-request-bytes", "1e9"], "--max-request-bytes"),
    (["--redis-ttl", "-3"], "--redis-ttl"),
    (["--redis-ttl", str(10**12)], "--redis-ttl"),
    (["--compile-timeout", "-1"], "--compile-timeout"),
    (["--compile-timeout", "inf"], "--compile-timeout"),
    (["--compile-timeout", "nan"], "--compile-timeout"),
    (["--execute-timeout-s", "0"], "--execute-timeout-s"),
    (["--worker-memory", "-1"], "--worker-memory"),
    (["--max-checks-per-client", "0"], "--max-checks-per-client"),
    (["--http-max-connections", "0"], "--http-max-connections"),
    (["--http-header-timeout", "0"], "--http-header-timeout"),
    (["--http-body-timeout", "inf"], "--http-body-timeout"),
    (["--log-level", "LOUD"], "--log-level"),
    (["--log-format", "xml"], "--log-format"),
    (["--redis-url", "foo://x"], "--redis-url"),
    (["--redis-url", "redis://host:notaport/0"], "--redis-url"),
    (["--redis-url", "redis+sentinel://127.0.0.1:26379"], "name the service"),
    (["--redis-cluster"], "--redis-cluster needs --redis-url"),
    (["--redis-cluster", "--redis-url", "unix:///run/redis.sock"], "over TCP"),
    (["--redis-cluster", "--redis-url", "redis+sentinel://127.0.0.1/svc"], "not a sentinel URL"),
    (["--compiler", "not an entry point"], "--compiler"),
    (["--executor", "module.without.function"], "--executor"),
    (["--token-file", "/nonexistent/token"], "--token-file"),
    (["--tls-cert", "/nonexistent/cert.pem"], "--tls-key"),
    (["--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/key.pem"], "--tls-cert"),
]


@pytest.mark.parametrize("argv,flag", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_values_are_one_line_naming_the_flag(argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    line = refused(argv, capsys)
    assert flag in line and line.startswith(("despina serve: error:", "despina serve: error: argument")), line


def test_a_bad_redis_url_hides_its_password(capsys: pytest.CaptureFixture[str]) -> None:
    line = refused(["--redis-url", "redis+sentinel://:hunter2@127.0.0.1:26379"], capsys)
    assert "hunter2" not in line and ":***@" in line and "name the service" in line


def test_empty_token_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "token").write_text("\n")
    assert "is empty" in refused(["--token-file", str(tmp_path / "token")], capsys)


def serve(*argv: str) -> subprocess.Popen[str]:
    args = ["serve", "--host", "127.0.0.1", "--workers", "1", "--compiler", FAKE_COMPILER, "--no-disk-cache", *argv]
    return subprocess.Popen([sys.executable, "-c", "from despina.cli import main; raise SystemExit(main())", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={"PYTHONPATH": str(TESTS), "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_a_busy_port_is_one_line_and_exit_2(transport: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        busy = str(taken.getsockname()[1])
        ports = ["--http-port", busy, "--grpc-port", "0"] if transport == "http" else ["--grpc-port", busy, "--http-port", "0"]
        proc = serve(*ports)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, out
    assert "Traceback" not in out and "despina serve: gRPC on" not in out, out  # no start-up line
    line = out.strip().splitlines()[-1]
    assert line.startswith("despina serve: error: cannot listen for") and busy in line, out
    assert f"--{transport}-port" in line and ("in use" in line.lower()), out


def test_port_0_picks_free_ports_and_names_them() -> None:
    proc = serve("--grpc-port", "0", "--http-port", "0")
    try:
        assert proc.stdout is not None
        line = ""
        while "despina serve: gRPC on" not in line:
            line = proc.stdout.readline()
            assert line, "the daemon exited before its start-up line"
        found = re.search(r"gRPC on 127\.0\.0\.1:(\d+), HTTP on 127\.0\.0\.1:(\d+)", line)
        assert found, line
        grpc_port, http_port = map(int, found.groups())
        assert grpc_port and http_port and grpc_port != http_port
        wait_for(lambda: httpx.get(f"http://127.0.0.1:{http_port}/healthz", timeout=1).status_code == 200, "health")
        with socket.create_connection(("127.0.0.1", grpc_port), timeout=5):
            pass
    finally:
        proc.terminate()
        proc.communicate(timeout=30)  # the rest of its output, and its pipe closed


def test_off_turns_one_transport_off() -> None:
    http_port = free_port()
    proc = serve("--grpc-port", "off", "--http-port", str(http_port))
    try:
        assert proc.stdout is not None
        line = ""
        while "despina serve: gRPC on" not in line:
            line = proc.stdout.readline()
            assert line, "the daemon exited before its start-up line"
        assert "gRPC on off" in line or "gRPC off" in line, line
        wait_for(lambda: httpx.get(f"http://127.0.0.1:{http_port}/healthz", timeout=1).status_code == 200, "health")
    finally:
        proc.terminate()
        proc.communicate(timeout=30)  # the rest of its output, and its pipe closed


# ---- closed by default, the cluster secret, the worker memory cap ---------------------------------


def parse_serve(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    serve_main.add_arguments(p)
    return p.parse_args(list(argv))


def test_loopback_by_default() -> None:
    args = parse_serve()
    assert args.host == "127.0.0.1" and serve_main.loopback(args.host)
    serve_main.check_exposure(args)


@pytest.mark.parametrize("host, is_loopback", [("127.0.0.1", True), ("::1", True), ("[::1]", True),
                                               ("localhost", True), ("0.0.0.0", False), ("::", False),
                                               ("10.1.2.3", False), ("gpu-host.example", False)])
def test_loopback(host: str, is_loopback: bool) -> None:
    assert serve_main.loopback(host) is is_loopback


def test_reachable_address_needs_a_token_or_insecure(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(serve_main.UsageError, match="--token-file.*--insecure"):
        serve_main.check_exposure(parse_serve("--host", "0.0.0.0"))
    token = tmp_path / "token"
    token.write_text("t0ken\n")
    serve_main.check_exposure(parse_serve("--host", "0.0.0.0", "--token-file", str(token)))
    with caplog.at_level(logging.WARNING, logger="despina.server"):
        serve_main.check_exposure(parse_serve("--host", "::", "--insecure"))
    assert "without a token (--insecure)" in caplog.text


def test_serve_refuses_to_listen_openly() -> None:
    out = subprocess.run([sys.executable, "-c", "from despina.cli import main; raise SystemExit(main())", "serve", "--host", "0.0.0.0",
                          "--grpc-port", "0", "--http-port", "0", "--no-disk-cache"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "reachable from other machines" in out.stderr


def test_cluster_secret_and_worker_memory(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s" * 32 + "\n")
    config = serve_main.config_from(parse_serve("--cluster-secret-file", str(secret), "--worker-memory", "0"))
    assert config.cluster_secret == b"s" * 32 and config.worker_memory_bytes == 0
    secret.write_text("short")
    with pytest.raises(serve_main.UsageError, match="at least 16"):
        serve_main.config_from(parse_serve("--cluster-secret-file", str(secret)))
    with pytest.raises(serve_main.UsageError, match="--worker-memory"):
        serve_main.config_from(parse_serve("--worker-memory", "-1"))


def test_http_answers_on_a_keep_alive_connection_without_nagle_delay(tmp_path: Path) -> None:
    """The listening socket is made with IPPROTO_TCP: asyncio sets TCP_NODELAY on what it accepts only
    then. Without it every answer on a kept-alive connection waited for the client's delayed ACK (44 ms)."""
    from .conftest import Daemon

    d = Daemon(tmp_path)
    try:
        with socket.create_connection(("127.0.0.1", d.http_port)) as s:
            times = []
            for _ in range(21):
                started = time.perf_counter()
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                answer = b""
                while not answer.endswith(b"}"):
                    answer += s.recv(4096)
                times.append(time.perf_counter() - started)
        assert sorted(times)[10] < 0.02, times
    finally:
        d.stop()
