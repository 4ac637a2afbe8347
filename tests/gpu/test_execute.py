"""`kernel.run_remote[grid](...)` against a real `despina serve` on this host's GPU: gRPC only, no
Redis, no disk cache, the real NVPTX backend. A kernel that faults or never ends costs its GPU
worker (replaced for the next request) and a clear error; the daemon goes on serving."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from language.reference import bf16_bits, bf16_from_bits

import despina
import despina.language as tl
from despina import remote
from despina.runtime import driver

grpc = pytest.importorskip("grpc")
pytest.importorskip("grpc_health")
pytest.importorskip("llvmlite")  # the daemon compiles with the NVPTX backend

TIMEOUT_S = 5  # --execute-timeout-s: short, for the kernel that never ends


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class GrpcDaemon:
    """`despina serve` with gRPC alone on a free port (as tests/server/conftest.py's Daemon, without HTTP)."""

    def __init__(self, workdir: Path, extra: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        self.url = f"grpc://127.0.0.1:{self.port}"
        self.log = workdir / f"daemon-{self.port}.log"
        args = ["serve", "--grpc-port", str(self.port), "--http-port", "off", "--host", "127.0.0.1", "--workers", "1",
                "--no-disk-cache", *extra]
        cmd = [sys.executable, "-c", "from despina.cli import main; main()", *args]
        env = {k: v for k, v in os.environ.items() if not k.startswith("DESPINA_SERVER")}
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 90
        while not self.serving():
            if self.proc.poll() is not None:
                raise RuntimeError(f"despina serve exited with {self.proc.returncode}:\n{self.tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"despina serve did not come up:\n{self.tail()}")
            time.sleep(0.1)

    def serving(self) -> bool:
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        try:
            with grpc.insecure_channel(f"127.0.0.1:{self.port}") as channel:
                reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1)
            return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)
        except grpc.RpcError:
            return False

    def stats(self) -> Any:
        from despina.proto import service_pb2, service_pb2_grpc

        with grpc.insecure_channel(f"127.0.0.1:{self.port}") as channel:
            return service_pb2_grpc.CompilerStub(channel).Stats(service_pb2.StatsRequest(), timeout=10)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def gpu_daemon(gpu_device: driver.Device, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GrpcDaemon]:
    d = GrpcDaemon(tmp_path_factory.mktemp("execute"), extra=("--execute-timeout-s", str(TIMEOUT_S)))
    try:
        yield d
    finally:
        d.stop()


@pytest.fixture
def on_daemon(gpu_daemon: GrpcDaemon, monkeypatch: pytest.MonkeyPatch) -> Iterator[GrpcDaemon]:
    for name in ("DESPINA_SERVER", "DESPINA_TOKEN", "DESPINA_SERVER_REQUIRED"):
        monkeypatch.delenv(name, raising=False)
    despina.set_server(gpu_daemon.url)
    try:
        yield gpu_daemon
    finally:
        despina.set_server(None)


@despina.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@despina.jit
def axpy_bf16(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (alpha * x + y).to(tl.bfloat16), mask=mask)


@despina.jit
def wild_store(out_ptr, offset, BLOCK: tl.constexpr):
    """Stores `offset` elements past `out_ptr`: far outside every allocation."""
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offset + offs, offs.to(tl.float32))


@despina.jit
def spin_forever(flag_ptr, out_ptr):
    """Never ends while flag is 0."""
    i = 0
    while tl.load(flag_ptr) == 0:
        i += 1
        tl.store(out_ptr, i)


def vector_add(n: int = 10_000) -> None:
    rng = np.random.default_rng(n)
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    out = np.full(n + 7, -1.0, np.float32)  # past n: the kernel must leave it alone
    add_kernel.run_remote[(despina.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    np.testing.assert_array_equal(out[:n], x + y)
    assert (out[n:] == -1.0).all()


def test_vector_add_matches_numpy(on_daemon: GrpcDaemon) -> None:
    vector_add()
    vector_add(1)
    assert on_daemon.stats().compiles >= 1


def test_bf16_and_float_scalars(on_daemon: GrpcDaemon) -> None:
    n = 1000
    rng = np.random.default_rng(1)
    x, y = bf16_bits(rng.standard_normal(n)), bf16_bits(rng.standard_normal(n))
    out = np.zeros(n, np.uint16)
    bf = tl.bfloat16
    axpy_bf16.run_remote[(despina.cdiv(n, 256),)](despina.reinterpret(x, bf), despina.reinterpret(y, bf),
                                                   despina.reinterpret(out, bf), 0.5, n, BLOCK=256)
    want = 0.5 * bf16_from_bits(x) + bf16_from_bits(y)
    np.testing.assert_allclose(bf16_from_bits(out), want, rtol=1e-2, atol=1e-2)


def test_illegal_address_is_a_clear_error_and_the_worker_is_replaced(on_daemon: GrpcDaemon) -> None:
    out = np.zeros(64, np.float32)
    with pytest.raises(remote.RemoteError) as info:
        wild_store.run_remote[(1,)](out, 1 << 45, BLOCK=64)
    e = info.value
    assert e.code == "ABORTED", e
    assert "kernel 'wild_store' faulted" in e.message and "CUDA_ERROR_" in e.message, e.message
    assert (out == 0).all()  # nothing came back
    vector_add()  # a new GPU worker, a fresh context
    assert on_daemon.proc.poll() is None


def test_infinite_loop_hits_the_timeout_and_the_daemon_goes_on(on_daemon: GrpcDaemon) -> None:
    vector_add()  # compiled and warm: what follows times the kernel alone
    start = time.monotonic()
    with pytest.raises(remote.RemoteError) as info:
        spin_forever.run_remote[(1,)](np.zeros(1, np.int32), np.zeros(1, np.int32))
    e = info.value
    assert e.code == "DEADLINE_EXCEEDED", e
    assert "kernel 'spin_forever' did not finish within 5s" in e.message
    assert time.monotonic() - start < 120  # the compile, then the time-out
    vector_add()
    assert on_daemon.stats().requests >= 3 and on_daemon.proc.poll() is None
