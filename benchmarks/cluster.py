"""A cluster on loopback: N daemons sharing one Redis, M clients failing over between them, one daemon
killed mid-run.

    python benchmarks/cluster.py [--daemons 8] [--clients 256] [--seconds 12] [--rate 600]
                                 [--backend fake|real] [--out cluster.json]

Starts redis-server and N `despina serve` processes (one compile worker each, a disk tier each) on
free loopback ports, and M clients: threads of this process, each with every daemon in its
DESPINA_SERVER list and the order of addresses of a process of its own (despina.remote_failover),
over gRPC. The kernels: a pool of `--shared` kernels that every client asks for (repeated keys), one
kernel of each client's own (unique keys), and, in the last phase, a fresh kernel for `--fresh` of the
requests. `--backend fake` compiles with the tests' fake backend (tests/server/fake_backend.py),
which sleeps `--compile-ms` per kernel; `--backend real` with the NVPTX backend.

1. Warm-up: every client at once asks for `--warmup` kernels of the pool and then its own; each
   kernel of the pool is asked for by M * warmup / shared clients at about the same time, through
   different daemons.
2. Steady (half of `--seconds`): each client asks for a kernel of the pool or its own, on a fixed
   schedule (`--rate` requests per second over all clients).
3. Kill (the other half): the same, with fresh kernels; a quarter in, the daemon that most clients
   ask first is killed with SIGKILL, and its clients go on with the next daemon of their list.
4. After the run, every kernel that had been answered before the kill is asked for from the
   survivors (GET /v1/kernels/{key}, which reads memory, disk and Redis): it must still be there.

Compiles come from the daemons' own counters (/v1/stats; the killed daemon's as read just before the
kill), Redis round trips from Redis's own (INFO commandstats, this script's INFO calls left out).
Goals (issue 11): exactly 1 compile per unique key, hit ratio >= 99% after warm-up, <= 2 Redis round
trips per request, no failed request and no lost entry when a daemon dies. A hit costs 0 round trips
(memory) or 1 (GET); a compile 4 (GET, the lease, SET, its release); a daemon waiting on another's
lease an MGET every 20 ms until the entry lands: the warm-up, a storm of compiles queued on one
worker per daemon, costs more than 2 per request for that reason.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from despina import remote
from despina.compiler.ir.codec import encode
from despina.compiler.options import CompileOptions
from despina.remote_failover import Servers
from despina.server.cache.redis_tier import name as redis_name

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loopback import FAKE_COMPILER, DaemonProcess, RedisServer, percentile, start_daemons, vector_add  # noqa: E402

OPTIONS = CompileOptions()
PHASES = ("warm-up", "steady", "kill")


@dataclass(frozen=True)
class Record:
    phase: str
    start: float
    seconds: float
    tier: str = ""
    server: str = ""
    tried: tuple[str, ...] = ()
    key: str = ""
    error: str = ""


@dataclass
class Plan:
    spec: str
    shared: list[bytes]
    warmup: int
    rate: float
    clients: int
    fresh: float
    attrs: dict[str, Any]
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    phase: str = "warm-up"
    go: threading.Event = field(default_factory=threading.Event)
    steady: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)
    warm: threading.Barrier | None = None


class Client(threading.Thread):
    """One client: its own order of the daemons, its own kernel, its records."""

    def __init__(self, i: int, plan: Plan) -> None:
        super().__init__(daemon=True)
        self.i, self.plan = i, plan
        self.servers = Servers(plan.spec, seed=f"{plan.run}-client-{i}")
        self.own = encode(vector_add(f"{plan.run}-own-{i}", **plan.attrs))
        self.records: list[Record] = []
        self.rng = random.Random(i)

    def request(self, ir: bytes) -> None:
        tried: list[str] = []
        phase = self.plan.phase

        def attempt(address: str) -> remote.RemoteKernel:
            tried.append(address)
            return remote._client(address).compile(ir, OPTIONS, "sm_90", {}, 0)

        start = time.perf_counter()
        try:
            service = self.servers.call(attempt).metadata["service"]
        except remote.RemoteError as e:
            self.records.append(Record(phase, start, time.perf_counter() - start, tried=tuple(tried),
                                       error=f"{e.code}: {e.message}"))
            return
        self.records.append(Record(phase, start, time.perf_counter() - start, service["tier"], service["server"],
                                   tuple(tried), service["key"]))

    def run(self) -> None:
        plan = self.plan
        plan.go.wait()
        n = len(plan.shared)
        for j in range(plan.warmup):
            self.request(plan.shared[(self.i * plan.warmup + j) % n])
        self.request(self.own)
        assert plan.warm is not None
        plan.warm.wait(300)
        plan.steady.wait()
        interval = plan.clients / plan.rate
        due = time.perf_counter() + interval * self.i / plan.clients
        fresh = 0
        while not plan.stop.is_set():
            delay = due - time.perf_counter()
            if delay > 0 and plan.stop.wait(delay):
                break
            due += interval
            if plan.phase == "kill" and self.rng.random() < plan.fresh:
                fresh += 1
                self.request(encode(vector_add(f"{plan.run}-fresh-{self.i}-{fresh}", **plan.attrs)))
            else:
                pick = self.rng.randrange(n + 1)
                self.request(self.own if pick == n else plan.shared[pick])


def redis_commands(redis: RedisServer) -> int:
    """Commands Redis has run, by its own count, less this script's INFO calls (this one included)."""
    stats = redis.client().info("commandstats")
    return sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")


def phase_figures(records: list[Record], commands: int, seconds: float) -> dict[str, Any]:
    done = [r for r in records if not r.error]
    tiers = {t: sum(r.tier == t for r in done) for t in ("memory", "disk", "redis", "compiled")}
    hits = [r.seconds for r in done if r.tier != "compiled"]
    return {"requests": len(records), "errors": len(records) - len(done), "tiers": tiers,
            "hit_ratio": len(hits) / len(records) if records else float("nan"),
            "redis_round_trips": commands, "redis_round_trips_per_request": commands / max(1, len(records)),
            "requests_per_s": len(records) / seconds,
            "hit_p50_ms": 1e3 * percentile(hits, 0.5), "hit_p99_ms": 1e3 * percentile(hits, 0.99)}


def retrievable(keys: set[str], survivors: list[DaemonProcess]) -> int:
    """How many of `keys` a survivor still serves (GET /v1/kernels/{key}: memory, disk, then Redis)."""
    found = 0
    with httpx.Client(timeout=30) as http:
        for n, key in enumerate(sorted(keys)):
            found += http.get(f"{survivors[n % len(survivors)].http}/v1/kernels/{key}").status_code == 200
    return found


def simulate(daemons: int = 8, clients: int = 256, shared: int = 64, warmup: int = 8, seconds: float = 12.0,
             rate: float = 600.0, fresh: float = 0.002, backend: str = "fake", compile_ms: float = 50.0,
             kill: bool = True) -> dict[str, Any]:
    """Run the cluster and return its figures (what `main` prints)."""
    fake = backend == "fake"
    # Each client thread stands for a process of its own, which would say once that the killed daemon is gone.
    logging.getLogger("despina.remote").setLevel(logging.ERROR)
    attrs = {"fake_sleep": compile_ms / 1e3} if fake else {}
    workdir = tempfile.mkdtemp(prefix="despina-cluster-")
    redis = RedisServer.start(workdir)
    if redis is None:
        raise SystemExit("benchmarks/cluster.py needs redis-server on PATH (apt-get install -y redis-server)")
    nodes: list[DaemonProcess] = []
    threads: list[Client] = []
    try:
        # Every client thread connects from 127.0.0.1, which a daemon takes for one client: let it have
        # as many kernels waiting for their IR check as there are client threads.
        extra = ("--max-checks-per-client", str(max(32, clients)))
        nodes = start_daemons(daemons, redis.url, 1, FAKE_COMPILER if fake else None, workdir, extra)
        plan = Plan(",".join(d.grpc for d in nodes), [], warmup, rate, clients, fresh, attrs)
        plan.shared = [encode(vector_add(f"{plan.run}-shared-{k}", **attrs)) for k in range(shared)]
        plan.warm = threading.Barrier(clients + 1)
        threads = [Client(i, plan) for i in range(clients)]
        for t in threads:
            t.start()
        marks = {"warm-up": (time.perf_counter(), redis_commands(redis))}
        plan.go.set()
        plan.warm.wait(300)
        plan.phase = "steady"
        marks["steady"] = (time.perf_counter(), redis_commands(redis))
        plan.steady.set()
        time.sleep(seconds / 2)
        plan.phase = "kill"
        marks["kill"] = (time.perf_counter(), redis_commands(redis))
        victim, victim_compiles, killed_at = None, 0, float("inf")
        if kill:
            time.sleep(seconds / 8)
            firsts = [t.servers.order[0] for t in threads]
            victim = max(nodes, key=lambda d: firsts.count(d.grpc))
            victim_compiles = int(victim.stats()["compiles"])
            victim.proc.kill()
            killed_at = time.perf_counter()
            victim.proc.wait()
        time.sleep(max(0.0, marks["kill"][0] + seconds / 2 - time.perf_counter()))
        plan.stop.set()
        for t in threads:
            t.join(120)
        end = (time.perf_counter(), redis_commands(redis))
        survivors = [d for d in nodes if d is not victim]
        stats = {d.grpc: d.stats() for d in survivors}
        records = [r for t in threads for r in t.records]
        figures = summarize(plan, threads, records, marks, end, stats, victim, victim_compiles, killed_at)
        figures["setup"] = {"daemons": daemons, "clients": clients, "shared_kernels": shared, "warmup_per_client": warmup,
                            "seconds": seconds, "rate": rate, "fresh": fresh, "backend": backend,
                            "compile_ms": compile_ms if fake else None, "cpus": os.cpu_count()}
        stored = {r.key for r in records if not r.error and r.start + r.seconds < killed_at}
        figures["kill"]["stored_before"] = len(stored)
        figures["kill"]["retrievable_after"] = retrievable(stored, survivors) if kill else len(stored)
        figures["kill"]["in_redis_after"] = sum(redis.client().exists(redis_name("kernel", k)) for k in stored)
        return figures
    finally:
        if threads:
            threads[0].plan.stop.set()
        remote.set_server(None)
        for d in nodes:
            d.stop()
        redis.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def summarize(plan: Plan, threads: list[Client], records: list[Record], marks: dict[str, tuple[float, int]],
              end: tuple[float, int], stats: dict[str, dict[str, Any]], victim: DaemonProcess | None,
              victim_compiles: int, killed_at: float) -> dict[str, Any]:
    bounds = [*marks.values(), end]
    phases = {}
    for name, (t0, c0), (t1, c1) in zip(PHASES, bounds, bounds[1:]):
        phases[name] = phase_figures([r for r in records if r.phase == name], c1 - c0, t1 - t0)
    phases["whole run"] = phase_figures(records, end[1] - bounds[0][1], end[0] - bounds[0][0])
    keys = {r.key for r in records if not r.error}
    compiled_by: dict[str, set[str]] = {}
    for r in records:
        if r.tier == "compiled":
            compiled_by.setdefault(r.key, set()).add(r.server)
    compiles = sum(int(s["compiles"]) for s in stats.values()) + victim_compiles
    after = [r for r in records if r.phase != "warm-up"]
    failed_over = [r for r in records if len(r.tried) > 1 and not r.error]
    kill: dict[str, Any] = {"daemon": victim.grpc if victim else None}
    if victim is not None:
        mine = [t for t in threads if t.servers.order[0] == victim.grpc]
        firsts = [min((r.start + r.seconds for r in t.records if r.start + r.seconds > killed_at and not r.error),
                      default=float("inf")) - killed_at for t in mine]
        kill.update(clients=len(mine), in_flight=sum(r.start < killed_at for r in failed_over),
                    failed_over=len(failed_over),
                    failover_request_p50_ms=1e3 * percentile([r.seconds for r in failed_over], 0.5),
                    failover_request_max_ms=1e3 * max((r.seconds for r in failed_over), default=float("nan")),
                    first_answer_after_kill_max_ms=1e3 * max(firsts, default=float("nan")))
    kill["requests_failed"] = sum(bool(r.error) for r in records)
    kill["errors"] = sorted({r.error for r in records if r.error})[:5]
    return {
        "unique_keys": len(keys), "compiles": compiles, "compiles_per_unique_key": compiles / max(1, len(keys)),
        "compiles_by_daemon": {**{a: int(s["compiles"]) for a, s in stats.items()},
                               **({victim.grpc: victim_compiles} if victim else {})},
        "keys_compiled_by_several_daemons": sum(len(s) > 1 for s in compiled_by.values()),
        "redis_errors_by_daemon": {a: int(s["redis_errors"]) for a, s in stats.items()},
        "hit_ratio_after_warmup": sum(r.tier != "compiled" and not r.error for r in after) / max(1, len(after)),
        "fresh_kernels": sum(r.tier == "compiled" for r in after),
        "phases": phases, "kill": kill,
    }


def table(f: dict[str, Any]) -> str:
    s, k, p = f["setup"], f["kill"], f["phases"]
    backend = (f"fake (tests/server/fake_backend.py, {s['compile_ms']:g} ms per compile)" if s["backend"] == "fake"
               else "real (NVPTX: LLVM and nvJitLink)")
    rows = [
        ("setup", f"{s['daemons']} daemons x {s['clients']} clients (threads, gRPC), one Redis, {s['cpus']} CPUs; "
                  f"backend {backend}", ""),
        ("kernels", f"{f['unique_keys']} unique keys: {s['shared_kernels']} shared, one per client, "
                    f"{f['fresh_kernels']} fresh after warm-up", ""),
        ("compiles per unique key, cluster-wide", f"{f['compiles_per_unique_key']:.3f} ({f['compiles']} compiles)", "exactly 1"),
        ("keys compiled by more than one daemon", str(f["keys_compiled_by_several_daemons"]), "0"),
        ("hit ratio after warm-up", f"{100 * f['hit_ratio_after_warmup']:.2f}%", ">= 99%"),
    ]
    for name, ph in p.items():
        t = ph["tiers"]
        rows.append((f"{name}: requests, tiers m/d/r/c", f"{ph['requests']} at {ph['requests_per_s']:.0f}/s; "
                     f"{t['memory']}/{t['disk']}/{t['redis']}/{t['compiled']}", ""))
        goal = {"steady": "<= 2 (all hits)", "whole run": "<= 2"}.get(name, "(compiles, waits on leases)")
        rows.append((f"{name}: Redis round trips per request", f"{ph['redis_round_trips_per_request']:.3f} "
                     f"({ph['redis_round_trips']} commands)", goal))
    rows.append(("hit latency p50 / p99 (steady)", f"{p['steady']['hit_p50_ms']:.2f} / {p['steady']['hit_p99_ms']:.2f} ms", ""))
    if k["daemon"]:
        rows += [
            ("daemon killed (SIGKILL)", f"{k['daemon']}, first choice of {k['clients']} clients", ""),
            ("requests failed", str(k["requests_failed"]), "0"),
            ("requests failed over (in flight at the kill)", f"{k['failed_over']} ({k['in_flight']})", ""),
            ("failover request latency p50 / max", f"{k['failover_request_p50_ms']:.1f} / {k['failover_request_max_ms']:.1f} ms", ""),
            ("its clients' first answer after the kill, latest", f"{k['first_answer_after_kill_max_ms']:.0f} ms", ""),
            ("entries answered before the kill, served after", f"{k['retrievable_after']} of {k['stored_before']} "
                                                               f"({k['in_redis_after']} in Redis)", "all"),
        ]
    lines = ["| figure | value | goal |", "|---|---|---|", *(f"| {a} | {b} | {c} |" for a, b, c in rows)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--daemons", type=int, default=8)
    parser.add_argument("--clients", type=int, default=256)
    parser.add_argument("--shared", type=int, default=64, help="kernels every client asks for (default: 64)")
    parser.add_argument("--warmup", type=int, default=8, help="kernels of the pool each client asks for first (default: 8)")
    parser.add_argument("--seconds", type=float, default=12.0, help="steady and kill phases together (default: 12)")
    parser.add_argument("--rate", type=float, default=600.0, help="requests per second, all clients (default: 600)")
    parser.add_argument("--fresh", type=float, default=0.002, help="share of fresh kernels in the kill phase (default: 0.002)")
    parser.add_argument("--backend", choices=("fake", "real"), default="fake")
    parser.add_argument("--compile-ms", type=float, default=50.0, help="the fake backend's compile time (default: 50)")
    parser.add_argument("--no-kill", action="store_true", help="kill no daemon")
    parser.add_argument("--out", help="write the figures as JSON to this file")
    args = parser.parse_args()
    figures = simulate(args.daemons, args.clients, args.shared, args.warmup, args.seconds, args.rate, args.fresh,
                       args.backend, args.compile_ms, not args.no_kill)
    print(table(figures))
    if args.out:
        with open(args.out, "w") as out:
            json.dump(figures, out, indent=2)


if __name__ == "__main__":
    main()
