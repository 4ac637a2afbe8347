"""Real servers on loopback: redis-server on a free port, `despina serve` as a subprocess.

Under CI (CI=true) a missing redis-server fails the tests that need it instead of skipping them.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from despina.server.config import ServiceConfig
from despina.server.core import CompileService

TESTS = Path(__file__).resolve().parents[1]
FAKE_COMPILER = "server.fake_backend:compile_module"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def unique() -> str:
    """A module attribute value that makes a kernel no cache has seen."""
    return uuid.uuid4().hex


class RedisProcess:
    """redis-server on a free loopback port; `extra` adds to its flags (cluster mode, --replicaof ...)."""

    def __init__(self, workdir: Path, extra: tuple[str, ...] = ()) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            message = "redis-server is not installed (apt-get install -y redis-server)"
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail(message)
            pytest.skip(message)
        self.exe = exe
        self.workdir = workdir
        self.extra = extra
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.workdir), "--maxmemory", "256mb", "--maxmemory-policy", "allkeys-lru",
             *self.extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: self.client().ping(), what="redis-server")

    def client(self) -> Any:
        import redis

        return redis.Redis.from_url(self.url, socket_timeout=1)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def wait_for(check: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except Exception:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not come up within {timeout:g}s")
        time.sleep(0.05)


class Daemon:
    """`despina serve` on free ports; `.http`/`.grpc` are its addresses. Its disk cache is a folder of
    its own under `workdir` unless `cache_dir` names one (or `extra` sets --cache-dir / --no-disk-cache).
    It compiles with the fake backend unless `compiler` names another (None: the daemon's default, NVPTX)."""

    def __init__(self, workdir: Path, redis_url: str | None = None, token: str | None = None, workers: int = 1,
                 extra: tuple[str, ...] = (), cache_dir: Path | None = None,
                 compiler: str | None = FAKE_COMPILER) -> None:
        self.grpc_port, self.http_port = free_port(), free_port()
        self.token = token
        self.log = workdir / f"daemon-{self.http_port}.log"
        self.cache_dir = cache_dir or workdir / f"disk-{self.http_port}"
        args = ["serve", "--grpc-port", str(self.grpc_port), "--http-port", str(self.http_port),
                "--workers", str(workers), "--host", "127.0.0.1", *extra]
        if compiler:
            args += ["--compiler", compiler]
        if "--cache-dir" not in extra and "--no-disk-cache" not in extra:
            args += ["--cache-dir", str(self.cache_dir)]
        if redis_url:
            args += ["--redis-url", redis_url]
        if token:
            token_file = workdir / f"token-{self.http_port}"
            token_file.write_text(token + "\n")
            args += ["--token-file", str(token_file)]
        exe = shutil.which("despina")
        cmd = [exe, *args] if exe else [sys.executable, "-c", "from despina.cli import main; main()", *args]
        env = dict(os.environ, PYTHONPATH=str(TESTS))
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT)
        scheme = "https" if "--tls-cert" in extra else "http"
        self.http = f"{scheme}://127.0.0.1:{self.http_port}"
        self.grpc = f"grpc://127.0.0.1:{self.grpc_port}"
        try:
            wait_for(self._healthy, what=f"despina serve (log: {self.log})", timeout=60)
        except TimeoutError:
            self.stop()
            raise TimeoutError(f"despina serve did not come up:\n{self.log.read_text()[-3000:]}") from None

    def _healthy(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"despina serve exited with {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
        return httpx.get(self.http + "/healthz", timeout=1, verify=False).status_code == 200

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def metric(self, name: str, **labels: str) -> float:
        """The sum of `name`'s samples matching `labels`, read from GET /metrics."""
        from prometheus_client.parser import text_string_to_metric_families

        text = httpx.get(self.http + "/metrics", headers=self.headers(), timeout=5, verify=False).text
        total = 0.0
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                    total += s.value
        return total

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisProcess]:
    server = RedisProcess(tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def shared_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    """One redis-server for the tests that only need one that stays up (kernels are unique per test)."""
    server = RedisProcess(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, shared_redis: RedisProcess) -> Iterator[Daemon]:
    """A daemon on the shared Redis, without a token, for tests that do not restart it."""
    d = Daemon(tmp_path_factory.mktemp("daemon"), shared_redis.url)
    yield d
    d.stop()


T = TypeVar("T")


def with_service(body: Callable[[CompileService], Awaitable[T]], **config: Any) -> T:
    """`body` run on a started CompileService (the fake backend and one worker unless `config` says
    otherwise), closed afterwards."""
    async def main() -> T:
        service = CompileService(ServiceConfig(**{"compiler": FAKE_COMPILER, "workers": 1, **config}))
        await service.start()
        try:
            return await body(service)
        finally:
            await service.close()

    return asyncio.run(main())
