"""What the attack tests share: benchmarks/attacks.py's decode bomb and /proc reading, and cache-hit latency."""

from __future__ import annotations

import importlib.util
import sys
import threading
import time
from pathlib import Path
from types import ModuleType

import grpc

from despina.proto import service_pb2 as pb
from despina.proto import service_pb2_grpc


def _attacks() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "despina_benchmark_attacks", Path(__file__).resolve().parents[3] / "benchmarks" / "attacks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


attacks = _attacks()
MB = 1 << 20


def memory(pid: int) -> float:
    """The resident memory of `pid`, in MB."""
    found: float = attacks.memory(pid)["rss_mb"]
    return found


def decode_bomb(ops: int, salt: int = 0) -> bytes:
    """A module whose one function holds `ops` empty ops, two bytes each."""
    found: bytes = attacks.decode_bomb(ops, salt, op=b"")
    return found


class Peak:
    """The most resident memory (MB) `pid` had while the block ran, sampled every 10 ms from /proc."""

    def __init__(self, pid: int) -> None:
        self.pid, self.mb = pid, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.mb = max(self.mb, memory(self.pid))
            time.sleep(0.01)

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def stub(address: str) -> service_pb2_grpc.CompilerStub:
    channel = grpc.insecure_channel(address.split("://")[-1], options=[("grpc.max_send_message_length", -1)])
    return service_pb2_grpc.CompilerStub(channel)


class Hits:
    """A client asking for one cached kernel back to back on a thread of its own, recording each latency."""

    def __init__(self, address: str, ir: bytes, metadata: tuple[tuple[str, str], ...] = ()) -> None:
        self.stub, self.request, self.metadata = stub(address), pb.CompileRequest(ir=ir), metadata
        self.stub.Compile(self.request, timeout=60, metadata=metadata)  # compiled: every later call is a hit
        self.latencies: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            t = time.perf_counter()
            self.stub.Compile(self.request, timeout=60, metadata=self.metadata)
            self.latencies.append(time.perf_counter() - t)
            time.sleep(0.002)

    def __enter__(self) -> Hits:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)

    def p99(self) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
