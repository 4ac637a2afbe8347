"""`despina tune ls|show KEY|clear [KEY]`: the autotuning results kept on this machine's disk, or on the
daemon with `--server URL` (or DESPINA_SERVER set; `--local` reads the disk whatever it says).

    despina tune ls                      # newest first: key, kernel, GPU, configs, best config and its time
    despina tune show 3f2a...            # every config's time (or why it was dropped), as JSON with --json
    despina tune clear [KEY]             # forget one tuning or all (on a daemon: memory, disk and Redis)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

HELP = "list, show or clear autotuning results (local disk, or a daemon's)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("ls", "show", "clear"), help="ls: list; show KEY: one in full; clear [KEY]")
    p.add_argument("key", nargs="?", help="a tuning key (64 hex digits) for show and clear")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--server", metavar="URL", help="the daemon (grpc://HOST:50051 or http://HOST:8000); "
                       "default: DESPINA_SERVER")
    where.add_argument("--local", action="store_true", help="this machine's disk cache, even with DESPINA_SERVER set")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--limit", type=int, default=100, help="at most this many for ls (default: 100)")


def run(args: argparse.Namespace) -> int:
    from despina import remote
    from despina.runtime.tunings import is_key

    if args.action == "show" and not args.key:
        return _fail("despina tune show needs a tuning key (see despina tune ls)", 2)
    if args.key is not None and (args.action == "ls" or not is_key(args.key)):
        return _fail(f"{args.key[:80]!r} is not a tuning key (64 lowercase hex digits)" if args.action != "ls"
                     else "despina tune ls takes no key", 2)
    url = None if args.local else args.server or remote.server()
    try:
        if url is None:
            return _local(args)
        return _remote(args, url)
    except remote.RemoteError as e:
        return _fail(f"{url}: {e}", 1)


def _local(args: argparse.Namespace) -> int:
    from despina.runtime.cache import cache_dir
    from despina.runtime.tunings import TuningFiles

    files = TuningFiles(cache_dir() / "tunings")
    if args.action == "ls":
        _list([t.summary() for t, _ in zip(files, range(args.limit))], args.json, str(files.directory))
    elif args.action == "show":
        found = files.get(args.key)
        if found is None:
            return _fail(f"no tuning {args.key} in {files.directory}", 1)
        _show(found.to_json(), args.json)
    else:
        print(f"cleared {files.clear(args.key)} tuning(s) from {files.directory}")
    return 0


def _remote(args: argparse.Namespace, url: str) -> int:
    from despina import remote_tuning

    if args.action == "ls":
        _list(remote_tuning.listing(url, limit=args.limit), args.json, url)
    elif args.action == "show":
        _show(remote_tuning.listing(url, args.key)[0], args.json)
    else:
        print(f"cleared {remote_tuning.clear(url, args.key)} tuning(s) on {url}")
    return 0


def _list(rows: list[dict[str, Any]], as_json: bool, where: str) -> None:
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    if not rows:
        print(f"no tunings in {where}")
        return
    for r in rows:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r["created"]))
        print(f"{r['key']}  {r['kernel']}  {r['device']}  {r['configs']} configs  {when}  by {r['measured_by']}\n"
              f"    best {r['best_ms']:.4f} ms: {r['best']}")


def _show(t: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(t, indent=2))
        return
    print(f"tuning {t['key']}\n  kernel {t['kernel']} on {t['device']} (CUDA driver {t['driver_version']}), measured by "
          f"the {t['measured_by']} in {t['seconds']:.2f}s, despina {t['despina']}")
    for i, (label, ms, error) in enumerate(zip(t["labels"], t["timings_ms"], t["errors"])):
        mark = "*" if i == t["winner"] else " "
        shown = f"{ms:10.4f} ms" if ms is not None else f"dropped: {error}"
        print(f" {mark} {i:3d}  {label}  {shown}")


def _fail(message: str, code: int) -> int:
    print(f"despina tune: {message}", file=sys.stderr)
    return code
