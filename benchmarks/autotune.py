"""Autotuning, cold and for a second client, Despina against Triton on one GPU.

    python benchmarks/autotune.py [--out DIR] [--size 4096] [--workers N] [--second-client]

The kernel is `kernels.py`'s `matmul_tuned_kernel`: the tutorial matmul under `autotune` with 16
configs (`TUNING_CONFIGS`), written for Triton; Despina runs the same file with its imports changed.
Each figure comes from a fresh Python process with empty caches, timed from the first call of the
autotuned kernel (which compiles and measures every config) until its launch has finished. Imports
are done before the clock starts (the daemon's transport too), as a program pays them once at
start-up; each process's figure is also given with them ("with imports"):

1. Triton 3.x's autotuner (its configs compile one after another), fresh TRITON_CACHE_DIR.
2. Despina through a daemon (`despina serve`, fresh, on a fresh redis-server): the daemon compiles
   the configs at once across its workers and measures them on its GPU.
3. Despina without a daemon: configs compiled at once in worker processes, measured here.
4. A second client process against the same Redis, through a second daemon that never saw the
   kernel (another host of the cluster): the tuned kernel with no compile and no benchmark, which
   the second daemon's /v1/stats shows (the client launches the Tune reply's kernel untraced); and
   the same client against the first daemon.

Goals (issue 10): cold (2) <= 0.3x Triton (1); the second client 0 compiles, 0 benchmarks,
<= 20 ms to the first launch. redis-server comes from PATH or $DESPINA_REDIS_SERVER; without one the
second daemon shares nothing and (4) reports the cross-daemon row as missing.
"""

from __future__ import annotations

import argparse
import cProfile
import csv
import io
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def client(flavor: str, size: int) -> dict[str, Any]:
    """Run in a fresh process: the first call of the autotuned matmul, timed; its winner and check."""
    sys.path.insert(0, str(HERE))
    from gpu import load_kernels

    with tempfile.TemporaryDirectory(prefix=f"despina-tune-{flavor}-") as workdir:
        return _first_call(load_kernels(flavor, Path(workdir)), flavor, size)


def _first_call(kernels: Any, flavor: str, size: int) -> dict[str, Any]:
    import torch

    start = time.perf_counter()
    if flavor == "despina" and os.environ.get("DESPINA_SERVER", "").startswith("grpc"):
        import grpc  # noqa: F401

        import despina.proto.service_pb2_grpc  # noqa: F401
        import despina.remote_tuning  # noqa: F401
    imports = time.perf_counter() - start
    a = torch.randn((size, size), device="cuda", dtype=torch.float16)
    b = torch.randn((size, size), device="cuda", dtype=torch.float16)
    c = torch.empty((size, size), device="cuda", dtype=torch.float16)
    kernel = kernels.matmul_tuned_kernel
    torch.cuda.synchronize()
    profile = cProfile.Profile() if os.environ.get("DESPINA_BENCH_PROFILE") else None
    if profile is not None:
        profile.enable()
    start = time.perf_counter()
    kernel[lambda m: (((size + m["BLOCK_M"] - 1) // m["BLOCK_M"]) * ((size + m["BLOCK_N"] - 1) // m["BLOCK_N"]),)](
        a, b, c, size, size, size, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    torch.cuda.synchronize()
    wall = time.perf_counter() - start
    if profile is not None:
        profile.disable()
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(40)
        Path(os.environ["DESPINA_BENCH_PROFILE"]).write_text(text.getvalue())
    torch.testing.assert_close(c, torch.matmul(a, b), rtol=2e-2, atol=0.25)
    return {"wall_s": round(wall, 4), "with_imports_s": round(wall + imports, 4), "winner": str(kernel.best_config)}


def fresh(flavor: str, size: int, env: dict[str, str]) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--client", flavor, "--size", str(size)], capture_output=True,
                         text=True, env=dict(os.environ, **env), timeout=900)
    if out.returncode:
        return {"error": (out.stderr or out.stdout).strip().splitlines()[-1][:300]}
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def times(result: dict[str, Any]) -> list[Any]:
    """The run's wall time and the same with its imports, or its error."""
    if "error" in result:
        return [result["error"], ""]
    return [result["wall_s"], result["with_imports_s"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if "OUT" in os.environ else None)
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="the daemon's compile workers (default: the CPU count, as despina serve's)")
    parser.add_argument("--second-client", action="store_true",
                        help="only the runs the second client's figure needs: the cold run through a daemon (which "
                             "tunes) and the second clients; no Triton and no in-process run")
    parser.add_argument("--client", choices=["despina", "triton"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        print(json.dumps(client(args.client, args.size)))
        return
    with tempfile.TemporaryDirectory(prefix="despina-tune-bench-") as work:
        run(args, Path(work))


def run(args: argparse.Namespace, work: Path) -> None:
    """Every run of the module docstring, their caches, Redis's and the daemons' files in `work`."""
    from loopback import RedisServer, start_daemons

    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)  # before the profiled client writes its profile there
    rows: list[list[Any]] = []
    triton: dict[str, Any] = {}
    if not args.second_client:
        triton = fresh("triton", args.size, {"TRITON_CACHE_DIR": str(work / "triton")})
        rows.append(["triton autotune, cold", *times(triton), "", "", triton.get("winner", "")])
    redis = RedisServer.start(work)
    redis_url = redis.url if redis is not None else None
    daemons = []
    try:
        first, = start_daemons(1, redis_url, args.workers, cache_root=work)
        daemons.append(first)
        env = {"DESPINA_SERVER": first.grpc, "DESPINA_SERVER_REQUIRED": "1",
               "DESPINA_CACHE_DIR": str(work / "client-1")}
        cold = fresh("despina", args.size, env)
        s = first.stats()
        rows.append(["despina through a daemon, cold", *times(cold), s.get("compiles"),
                     s.get("benchmarks"), cold.get("winner", "")])
        if not args.second_client:
            local = fresh("despina", args.size, {"DESPINA_CACHE_DIR": str(work / "client-local")})
            rows.append(["despina in-process, cold", *times(local), "", "", local.get("winner", "")])
        again = fresh("despina", args.size, dict(env, DESPINA_CACHE_DIR=str(work / "client-2")))
        s2 = first.stats()
        if args.out is not None:
            profile = args.out / "second_client_profile.txt"
            profiled = fresh("despina", args.size, dict(env, DESPINA_CACHE_DIR=str(work / "client-2b"),
                                                        DESPINA_BENCH_PROFILE=str(profile)))
            print(f"the second client's first launch, profiled: {profiled.get('error') or profile}")
        rows.append(["second client, same daemon", *times(again),
                     s2.get("compiles", 0) - s.get("compiles", 0), s2.get("benchmarks", 0) - s.get("benchmarks", 0),
                     again.get("winner", "")])
        if redis_url:
            second, = start_daemons(1, redis_url, args.workers, cache_root=work)
            daemons.append(second)
            other = fresh("despina", args.size, dict(env, DESPINA_SERVER=second.grpc,
                                                     DESPINA_CACHE_DIR=str(work / "client-3")))
            s3 = second.stats()
            rows.append(["second client, another daemon on the same Redis", *times(other),
                         s3.get("compiles"), s3.get("benchmarks"), other.get("winner", "")])
        else:
            rows.append(["second client, another daemon on the same Redis", "no redis-server", "", "", "", ""])
    finally:
        for d in daemons:
            d.stop()
        if redis is not None:
            redis.stop()
    header = ["run", "wall_s", "with imports", "daemon compiles", "daemon benchmarks", "winner"]
    print(f"\nautotune: tutorial matmul {args.size}^3 fp16, the 16 configs of kernels.TUNING_CONFIGS")
    for row in rows:
        print("  " + " | ".join(str(x) for x in row))
    if isinstance(triton.get("wall_s"), float) and isinstance(cold.get("wall_s"), float):
        print(f"  despina through a daemon / triton, cold: {cold['wall_s'] / triton['wall_s']:.3f}")
    if args.out is not None:
        with open(args.out / "autotune.csv", "w", newline="") as f:
            csv.writer(f).writerows([header, *rows])


if __name__ == "__main__":
    main()
