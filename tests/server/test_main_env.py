"""`despina serve` configured by the environment: every flag has a variable (named in --help), the command line
wins, a bad value is one line naming the variable (exit 2), and a daemon started from variables alone serves."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from despina import cli_env
from despina.cli import main
from despina.server import main as serve_main

from .conftest import FAKE_COMPILER, TESTS, free_port, wait_for

ROOT = TESTS.parent


def serve_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    serve_main.add_arguments(p)
    return p


def flags() -> list[str]:
    return [max(a.option_strings, key=len) for a in serve_parser()._actions
            if a.option_strings and not isinstance(a, argparse._HelpAction)]


def variables() -> dict[str, str]:
    return {flag: cli_env.variable(flag, serve_main.ENVIRONMENT_NAMES) for flag in flags()}


def test_every_flag_names_its_variable_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = re.sub(r"\s+", " ", capsys.readouterr().out)
    names = variables()
    assert names["--redis-url"] == "DESPINA_REDIS_URL" and names["--grpc-port"] == "DESPINA_GRPC_PORT"
    assert len(set(names.values())) == len(names)
    for action in serve_parser()._actions:
        if action.option_strings and not isinstance(action, argparse._HelpAction):
            name = names[max(action.option_strings, key=len)]
            assert action.help.endswith(f"[env: {name}]") and f"[env: {name}]" in text, action.option_strings


def test_no_variable_means_something_else_already() -> None:
    """A serve flag named DESPINA_SERVER or DESPINA_CACHE_DIR would change what clients on the same host do.
    The daemon's own modules (its flags, its health probe, the mechanism) name its variables on purpose."""
    own = {ROOT / "server" / "main.py", ROOT / "server" / "health.py", ROOT / "client" / "cli_env.py"}
    read_elsewhere = set()
    for folder in ("client", "compiler", "server"):
        for path in (ROOT / folder).rglob("*.py"):
            if path not in own:
                read_elsewhere |= set(re.findall(r"\bDESPINA_[A-Z0-9_]+", path.read_text()))
    assert set(variables().values()) & read_elsewhere == set()


@pytest.mark.parametrize("flag, value, dest, from_env, cli, from_cli", [
    ("--workers", "3", "workers", 3, "2", 2),
    ("--grpc-port", "off", "grpc_port", None, "123", 123),
    ("--log-level", "debug", "log_level", "DEBUG", "warning", "WARNING"),
    ("--redis-url", "redis://cache:6379/0", "redis_url", "redis://cache:6379/0", "redis://b:6379/1", "redis://b:6379/1"),
    ("--cache-dir", "/var/cache/despina", "cache_dir", "/var/cache/despina", "/elsewhere", "/elsewhere"),
    ("--compile-timeout", "2.5", "compile_timeout", 2.5, "9", 9.0),
])
def test_variable_beats_default_and_flag_beats_variable(monkeypatch: pytest.MonkeyPatch, flag: str, value: str,
                                                        dest: str, from_env: object, cli: str, from_cli: object) -> None:
    default = getattr(serve_parser().parse_args([]), dest)
    monkeypatch.setenv(variables()[flag], value)
    assert getattr(serve_parser().parse_args([]), dest) == from_env != default
    assert getattr(serve_parser().parse_args([flag, cli]), dest) == from_cli


@pytest.mark.parametrize("flag", ["--insecure", "--no-disk-cache", "--protect-docs"])
def test_switches(monkeypatch: pytest.MonkeyPatch, flag: str) -> None:
    dest = flag.lstrip("-").replace("-", "_")
    monkeypatch.setenv(variables()[flag], "true")
    assert getattr(serve_parser().parse_args([]), dest) is True
    monkeypatch.setenv(variables()[flag], "0")
    assert getattr(serve_parser().parse_args([]), dest) is False
    assert getattr(serve_parser().parse_args([flag]), dest) is True


BAD = [
    ("DESPINA_WORKERS", "two"),
    ("DESPINA_GRPC_PORT", "70000"),
    ("DESPINA_HTTP_PORT", "eighty"),
    ("DESPINA_LOG_LEVEL", "LOUD"),
    ("DESPINA_LOG_FORMAT", "xml"),
    ("DESPINA_INSECURE", "maybe"),
    ("DESPINA_COMPILE_TIMEOUT", "soon"),
    # accepted by the parser, refused by the daemon's own checks: the line names the variable too
    ("DESPINA_WORKERS", "0"),
    ("DESPINA_REDIS_URL", "foo://x"),
    ("DESPINA_TOKEN_FILE", "/nonexistent/token"),
    ("DESPINA_COMPILER", "not an entry point"),
]


@pytest.mark.parametrize("name, value", BAD, ids=[f"{n}={v}" for n, v in BAD])
def test_a_bad_variable_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                              name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    try:
        code = main(["serve", "--no-disk-cache"])
    except SystemExit as e:
        code = int(e.code or 0)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("despina serve: error:") and name in lines[0], lines[0]


def test_a_busy_port_from_a_variable_names_it(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        env = dict(os.environ, PYTHONPATH=str(TESTS), DESPINA_HTTP_PORT=str(taken.getsockname()[1]),
                   DESPINA_GRPC_PORT="0", DESPINA_NO_DISK_CACHE="1", DESPINA_WORKERS="1", DESPINA_COMPILER=FAKE_COMPILER)
        out = subprocess.run([sys.executable, "-m", "despina", "serve"], env=env, capture_output=True, text=True,
                             timeout=60)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines()[-1].endswith("(--http-port is DESPINA_HTTP_PORT)"), out.stderr


def test_a_daemon_from_variables_alone(tmp_path: Path) -> None:
    http_port = free_port()
    env = dict(os.environ, PYTHONPATH=str(TESTS), DESPINA_HTTP_PORT=str(http_port), DESPINA_GRPC_PORT="off",
               DESPINA_DAEMON_CACHE_DIR=str(tmp_path / "disk"), DESPINA_WORKERS="1", DESPINA_COMPILER=FAKE_COMPILER,
               DESPINA_LOG_FORMAT="json")
    proc = subprocess.Popen([sys.executable, "-m", "despina", "serve"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: httpx.get(f"http://127.0.0.1:{http_port}/healthz", timeout=1).status_code == 200, "health")
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    started = next(line for line in out.splitlines() if "despina serve: gRPC" in line)
    assert started.startswith("{") and "gRPC on off" in started and str(tmp_path / "disk") in started, out
