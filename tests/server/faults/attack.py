"""What the attack tests share: the daemon's memory from /proc, a decode bomb, cache-hit latency."""

from __future__ import annotations

import threading
import time

import grpc

from despina.proto import ir_pb2, service_pb2_grpc
from despina.proto import service_pb2 as pb

MB = 1 << 20


def memory(pid: int) -> tuple[int, int]:
    """(resident, peak resident) bytes of `pid`: VmRSS and VmHWM."""
    found = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0]) * 1024
    return found["VmRSS"], found["VmHWM"]


class Peak:
    """The most resident memory `pid` had while the block ran, sampled every 10 ms from /proc."""

    def __init__(self, pid: int) -> None:
        self.pid, self.bytes = pid, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.bytes = max(self.bytes, memory(self.pid)[0])
            time.sleep(0.01)

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def decode_bomb(ops: int) -> bytes:
    """A module whose one function holds `ops` empty ops, two bytes each."""
    fn = ir_pb2.Function(name="k").SerializeToString() + _record(2, b"\x12\x00" * ops)
    return ir_pb2.Module(schema_version=2).SerializeToString() + _record(4, fn)


def _record(field: int, payload: bytes) -> bytes:
    n, length = len(payload), bytearray()
    while True:
        length.append(n & 0x7F | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes([field << 3 | 2]) + bytes(length) + payload


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
