"""The compilation service on loopback: cache-hit throughput and latency, and a fresh process's remote hit.

    python benchmarks/service.py [--seconds 3] [--clients 1 16 64] [--rate 2000] [--attack KIND]

Starts redis-server (when installed) and `despina serve` on free ports, compiles one kernel, then:

1. Closed loop: C clients (asyncio tasks in one process) each send the same Compile request
   back to back for `--seconds`, over gRPC and over HTTP: hits/s and p50/p99 latency.
2. Open loop at `--rate` hits/s spread over the largest client count: p50/p99 at that load.
3. A fresh Python process asks a second daemon for a kernel that only Redis holds, against a
   fresh process compiling the same kernel in-process; both against a bare `python -c pass`.

With --attack (benchmarks/attacks.py: decode-bomb, preauth, slowloris, json-values), 1 and 2 run again
while an attacker process runs, with the daemon's memory (VmRSS, VmHWM) before, during and after, new
connections' GET /healthz, and the daemon's log lines (WARNING and up) during the attack.

Every figure of 1 and 2 says how much CPU each process took while it ran, in % of one core: the daemon, its
compile workers, this load generator, Redis and the attacker all share the host's cores (on a 2-core box,
the load generator alone takes about a third of a core at 1,000 gRPC hits/s).

Goals (issue 4): >= 2,000 hits/s on 2 cores with p99 <= 5 ms at 64 clients over gRPC; a fresh
process's remote hit <= 5 ms beyond process start-up. Issue 13: while six decode bombs or pre-auth 60 MB
messages run, the daemon stays under 400 MB and other clients' hits keep p99 <= 10 ms; under 3,000
slowloris connections new clients are served and the log stays bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from despina.compiler.ir.codec import encode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attacks  # noqa: E402
from loopback import RedisServer, percentile, start_daemons, vector_add  # noqa: E402

Client = Callable[[], Callable[[], Awaitable[Any]]]


async def closed_loop(new_client: Client, clients: int, seconds: float) -> dict[str, float]:
    latencies: list[float] = []
    stop = time.perf_counter() + seconds

    async def client() -> None:
        call = new_client()
        while time.perf_counter() < stop:
            t = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - t)

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.perf_counter() - start
    return summary(latencies, elapsed)


async def open_loop(new_client: Client, clients: int, rate: float, seconds: float) -> dict[str, float]:
    """`clients` clients, each sending at rate/clients per second on a fixed schedule."""
    latencies: list[float] = []
    interval = clients / rate
    start = time.perf_counter()

    async def client(i: int) -> None:
        call = new_client()
        due = start + interval * i / clients
        while due < start + seconds:
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            t = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - t)
            due += interval

    await asyncio.gather(*(client(i) for i in range(clients)))
    return summary(latencies, time.perf_counter() - start)


async def with_cpu(run: Awaitable[dict[str, Any]], processes: dict[str, list[int]]) -> dict[str, Any]:
    """`run`'s figures, and the CPU each group of `processes` took meanwhile, in % of one core."""
    def used() -> dict[str, float]:
        return {name: sum(map(attacks.cpu_seconds, pids)) for name, pids in processes.items()}

    before, start = used(), time.perf_counter()
    figures = await run
    after, elapsed = used(), time.perf_counter() - start
    figures["cpu_percent"] = {name: round(100 * (after[name] - before[name]) / elapsed) for name in processes}
    return figures


def summary(latencies: list[float], elapsed: float) -> dict[str, float]:
    return {"hits_per_s": len(latencies) / elapsed, "p50_ms": 1e3 * percentile(latencies, 0.5),
            "p99_ms": 1e3 * percentile(latencies, 0.99), "n": len(latencies)}


class RawHTTP:
    """One keep-alive HTTP/1.1 connection with nothing on top, so that the figures are the daemon's
    (httpx's async pool costs more CPU per request than the daemon does on the same two cores)."""

    def __init__(self, port: int, path: str, body: bytes, token: str | None = None) -> None:
        self.port = port
        head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        head += f"Authorization: Bearer {token}\r\n" if token else ""
        self.request = (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def __call__(self) -> None:
        if self.streams is None:
            self.streams = await asyncio.open_connection("127.0.0.1", self.port)
        reader, writer = self.streams
        writer.write(self.request)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):  # the daemon closed it (idle, or making room)
            self.streams = None
            return await self()
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(head.decode(errors="replace"))
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
        await reader.readexactly(length)


async def transports(grpc_port: int, http_port: int, ir: bytes, token: str | None = None
                     ) -> dict[str, Callable[[], Callable[[], Awaitable[Any]]]]:
    """Per transport, a factory of clients: each call of the factory is one more client."""
    import grpc

    from despina.proto import service_pb2 as pb
    from despina.proto import service_pb2_grpc

    stub = service_pb2_grpc.CompilerStub(grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}"))
    request = pb.CompileRequest(ir=ir, target="sm_90")
    body = json.dumps({"ir": base64.b64encode(ir).decode(), "target": "sm_90"}).encode()

    metadata = (("authorization", f"Bearer {token}"),) if token else None

    def grpc_client() -> Callable[[], Awaitable[Any]]:
        return lambda: stub.Compile(request, metadata=metadata)

    def http_client() -> Callable[[], Awaitable[Any]]:
        return RawHTTP(http_port, "/v1/compile", body, token)

    return {"grpc": grpc_client, "http": http_client}


CHILD = """
import time; t0 = time.perf_counter()
import sys, json
{imports}
t1 = time.perf_counter()
{work}
t2 = time.perf_counter()
print(json.dumps({{"import_ms": 1e3 * (t1 - t0), "work_ms": 1e3 * (t2 - t1)}}))
"""


def fresh_process(imports: str, work: str, env: dict[str, str], arg: str) -> dict[str, float]:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD.format(imports=imports, work=work), arg], env=env,
                         capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    result["process_ms"] = 1e3 * (time.perf_counter() - start)
    return result


def fresh_process_figures(grpc_url: str, http_url: str, salts: list[str]) -> dict[str, dict[str, float]]:
    """Each kernel of `salts` is in Redis and not in the answering daemon's memory."""
    env = dict(os.environ, DESPINA_SERVER_REQUIRED="1")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    kernel = f"sys.path.insert(0, {root!r})\nm = __import__('benchmarks.loopback', fromlist=['x']).vector_add(sys.argv[1])"
    remote = "import despina.remote, grpc, http.client, despina.proto.service_pb2_grpc"
    figures = {"bare_python": fresh_process("", "", env, "")}
    for (name, url), salt in zip((("grpc", grpc_url), ("http", http_url)), salts):
        work = f"despina.remote.set_server({url!r}); despina.remote.compile_remote(m)"
        figures[f"remote_hit_from_redis_{name}"] = fresh_process(f"{remote}\n{kernel}", work, env, salt)
    local = f"from despina.compiler.backends.nvptx import compile_module\n{kernel}"
    figures["in_process_compile"] = fresh_process(local, "compile_module(m, isolate=False)", env, salts[0])
    return figures


def under_attack(kind: str, daemon: Any, log: str, measure: Callable[[int], dict[str, Any]]) -> dict[str, Any]:
    """The hit figures while `kind` attacks the daemon, its memory before, during and after, new connections'
    GET /healthz, and its log lines during the attack."""
    pid, lines_before = daemon.proc.pid, _lines(log)
    result: dict[str, Any] = {"memory_before": attacks.memory(pid)}
    attacker = attacks.start(kind, daemon.grpc_port, daemon.http_port)
    try:
        time.sleep(3)  # the attack in full swing
        result["hits"] = measure(attacker.pid)
        result["new_connections_healthz"] = attacks.new_clients(daemon.http_port, 5)
        result["memory_during"] = attacks.memory(pid)
    finally:
        attacker.kill()
        attacker.wait()
    time.sleep(2)
    result["memory_after"] = attacks.memory(pid)
    result["daemon_log_lines"] = _lines(log) - lines_before
    return result


def _lines(path: str) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--rate", type=float, default=2000.0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--attack", choices=attacks.KINDS, default=None,
                        help="run the hit figures again while this attacker runs (benchmarks/attacks.py)")
    args = parser.parse_args()

    workdir = tempfile.mkdtemp(prefix="despina-bench-")
    redis = RedisServer.start(workdir)
    redis_url = redis.url if redis else None
    token = "bench-token" if args.attack == "preauth" else None  # the attacker has none
    extra: tuple[str, ...] = ()
    if token:
        with open(os.path.join(workdir, "token"), "w") as f:
            f.write(token)
        extra = ("--token-file", os.path.join(workdir, "token"))
    log = os.path.join(workdir, "daemon.log")
    daemons = start_daemons(1, redis_url, args.workers, cache_root=workdir, extra=extra, log=log)
    try:
        grpc_port, http_port = daemons[0].grpc_port, daemons[0].http_port
        ir = encode(vector_add(uuid.uuid4().hex))
        httpx.post(f"http://127.0.0.1:{http_port}/v1/compile", json={"ir": base64.b64encode(ir).decode()},
                   headers={"Authorization": f"Bearer {token}"} if token else {}, timeout=120).raise_for_status()

        async def measure(label: str = "", attacker: int | None = None) -> dict[str, Any]:
            calls = await transports(grpc_port, http_port, ir, token)
            pid = daemons[0].proc.pid
            processes = {"daemon": [pid], "compile workers": attacks.children(pid), "load generator": [os.getpid()]}
            processes |= {"redis": [redis.proc.pid]} if redis else {}
            processes |= {"attacker": [attacker]} if attacker else {}
            figures: dict[str, Any] = {}
            for name, new_client in calls.items():
                warm = new_client()
                for _ in range(50):
                    await warm()
                for c in args.clients:
                    figures[f"{name} closed-loop {c} clients{label}"] = await with_cpu(
                        closed_loop(new_client, c, args.seconds), processes)
                c = max(args.clients)
                figures[f"{name} open-loop {args.rate:g}/s over {c} clients{label}"] = await with_cpu(
                    open_loop(new_client, c, args.rate, args.seconds), processes)
            return figures

        figures = asyncio.run(measure())
        if args.attack:
            figures[f"under {args.attack}"] = under_attack(args.attack, daemons[0], log, lambda attacker: asyncio.run(
                measure(f" under {args.attack}", attacker)))
        if redis_url and not args.attack:  # the attack runs measure the daemon under attack only
            salts = [uuid.uuid4().hex for _ in range(3)]
            for salt in salts:
                httpx.post(f"http://127.0.0.1:{http_port}/v1/compile", timeout=120,
                           json={"ir": base64.b64encode(encode(vector_add(salt))).decode()}).raise_for_status()
            daemons += start_daemons(1, redis_url, args.workers, cache_root=workdir)  # holds the kernels in Redis only
            grpc_b, http_b = daemons[1].grpc_port, daemons[1].http_port
            httpx.post(f"http://127.0.0.1:{http_b}/v1/compile", timeout=120,  # warms its Redis connection
                       json={"ir": base64.b64encode(encode(vector_add(salts[2]))).decode()}).raise_for_status()
            figures["fresh process"] = fresh_process_figures(f"grpc://127.0.0.1:{grpc_b}", f"http://127.0.0.1:{http_b}",
                                                             salts[:2])
        print(json.dumps(figures, indent=2))
    finally:
        for d in daemons:
            d.stop()
        if redis is not None:
            redis.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
