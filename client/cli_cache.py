"""`despina cache ls|show|rm|clear|stats`: the kernels of a cache folder (this host's, by default) or of a
daemon (`--server http://HOST:8000`, its memory and disk tiers, over its REST API).

    despina cache ls --name 'add_*' --since 7d
    despina cache show 3f0c9a1b                  # a key, or a unique prefix of one (8 digits or more)
    despina cache rm 3f0c9a1b 77ab01c2
    despina cache clear --older-than 30d         # or --all
    despina cache stats --server http://gpu-host:8000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from abc import ABC, abstractmethod
from collections import Counter
from pathlib import Path
from typing import Any

HELP = "list, show, delete or count the kernels of a cache folder or of a daemon"
MIN_PREFIX = 8


class CacheError(Exception):
    """What the command could not do, said in one line."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    ls = sub.add_parser("ls", help="list kernels, the most recently used first")
    show = sub.add_parser("show", help="one kernel: its options, sizes, use and metadata")
    rm = sub.add_parser("rm", help="delete kernels by key (from a daemon: from memory, disk and Redis)")
    clear = sub.add_parser("clear", help="delete the kernels not used since a time, or all of them")
    stats = sub.add_parser("stats", help="how many kernels and bytes (a daemon: its counters)")
    for q in (ls, show, rm, clear, stats):
        where = q.add_mutually_exclusive_group()
        where.add_argument("--dir", metavar="DIR", help="a cache folder (default: $DESPINA_CACHE_DIR or ~/.cache/despina)")
        where.add_argument("--server", metavar="URL",
                           help="a daemon's HTTP address, http://HOST:8000 (default: none, the folder)")
        q.add_argument("--token", default=None,
                       help="the daemon's token (default: $DESPINA_TOKEN); rm and clear on a daemon need it")
        q.add_argument("--json", action="store_true", help="print JSON instead of a table (default: off)")
    for q in (ls, clear):
        q.add_argument("--name", metavar="GLOB", help="only kernels whose name matches, e.g. 'add_*' (default: all)")
        q.add_argument("--target", metavar="SM", help="only kernels for this target, e.g. sm_90 (default: all)")
    ls.add_argument("--since", metavar="WHEN",
                    help="only kernels used since WHEN: an age (30m, 12h, 7d) or an ISO 8601 time (default: any time)")
    ls.add_argument("--limit", type=int, default=100, help="at most this many, 1 to 10000 (default: 100)")
    show.add_argument("key", help="the key, or a unique prefix of 8 digits or more")
    rm.add_argument("keys", nargs="+", metavar="KEY", help="keys, or unique prefixes of 8 digits or more")
    older = clear.add_mutually_exclusive_group(required=True)
    older.add_argument("--older-than", metavar="WHEN",
                       help="delete the kernels not used since WHEN: an age (30m, 12h, 7d) or an ISO 8601 time")
    older.add_argument("--all", action="store_true", help="delete every kernel")


def run(args: argparse.Namespace) -> int:
    try:
        store: Store = Daemon(args.server, args.token) if args.server else Folder(args.dir)
        return ACTIONS[args.action](store, args)
    except CacheError as e:
        print(f"despina cache {args.action}: error: {e}", file=sys.stderr)
        return 1 if isinstance(e, Refused) else 2


class Refused(CacheError):
    """The daemon or the folder refused; exit code 1 (2 is for a bad command line)."""


# ---- where the kernels are ---------------------------------------------------------------------------------


class Store(ABC):
    @abstractmethod
    def items(self, name: str | None = None, target: str | None = None, since: str | None = None,
              limit: int = 10_000) -> list[dict[str, Any]]:
        raise NotImplementedError

    @abstractmethod
    def show(self, key: str) -> dict[str, Any]:
        raise NotImplementedError

    @abstractmethod
    def remove(self, key: str) -> list[str]:
        raise NotImplementedError

    @abstractmethod
    def clear(self, older_than: str, name: str | None, target: str | None) -> list[str]:
        raise NotImplementedError

    @abstractmethod
    def stats(self) -> dict[str, Any]:
        raise NotImplementedError

    def resolve(self, key: str) -> str:
        """A whole key from `key` or a unique prefix of it."""
        key = key.strip().lower()
        if not MIN_PREFIX <= len(key) <= 64 or any(c not in "0123456789abcdef" for c in key):
            raise CacheError(f"{key[:80]!r} is neither a key (64 hex digits) nor a prefix of {MIN_PREFIX} or more")
        if len(key) == 64:
            return key
        found = [i["key"] for i in self.items() if i["key"].startswith(key)]
        if len(found) != 1:
            raise Refused(f"{len(found)} kernels have a key starting with {key}" + (": give more digits" if found else ""))
        return found[0]


class Folder(Store):
    def __init__(self, directory: str | None) -> None:
        from despina.runtime.cache import FileCache, cache_dir

        self.files = FileCache(Path(directory).expanduser() if directory else cache_dir())
        if directory and not self.files.directory.is_dir():
            raise CacheError(f"--dir {directory}: no such folder")

    def _when(self, flag: str, text: str | None) -> float | None:
        from despina.runtime.inventory import parse_when

        try:
            return None if text is None else parse_when(text)
        except ValueError as e:
            raise CacheError(f"{flag}: {e}") from None

    def items(self, name: str | None = None, target: str | None = None, since: str | None = None,
              limit: int = 10_000) -> list[dict[str, Any]]:
        from despina.runtime.inventory import from_file, select

        chosen = select((from_file(e, "folder") for e in self.files.listing()), name, target, self._when("--since", since))
        return [i.to_json() for i in chosen[:limit]]

    def show(self, key: str) -> dict[str, Any]:
        key = self.resolve(key)
        item = next((i for i in self.items() if i["key"] == key), None)
        binary = self.files.get(key)
        if item is None or binary is None:
            raise Refused(f"no kernel {key} in {self.files.directory} (or its file failed its digest check)")
        return dict(item, metadata={"name": binary.name, **binary.metadata})

    def remove(self, key: str) -> list[str]:
        key = self.resolve(key)
        if not self.files.remove(key):
            raise Refused(f"no kernel {key} in {self.files.directory}")
        return ["folder"]

    def clear(self, older_than: str, name: str | None, target: str | None) -> list[str]:
        from despina.runtime.inventory import from_file, select

        cutoff = self._when("--older-than", older_than)
        assert cutoff is not None
        chosen = [i for i in select((from_file(e) for e in self.files.listing()), name, target) if i.last_used < cutoff]
        return [i.key for i in reversed(chosen) if self.files.remove(i.key)]

    def stats(self) -> dict[str, Any]:
        entries = self.files.listing()
        return {"folder": str(self.files.directory), "kernels": len(entries), "bytes": sum(e.nbytes for e in entries),
                "targets": dict(Counter(str(e.metadata.get("target", "")) for e in entries))}


class Daemon(Store):
    def __init__(self, url: str, token: str | None) -> None:
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise CacheError(f"--server {url!r}: give the daemon's HTTP address, http://HOST:8000 (not gRPC's)")
        self.url = url.rstrip("/")
        self.token = token or os.environ.get("DESPINA_TOKEN") or None

    def _call(self, method: str, path: str, **query: Any) -> Any:
        import urllib.error
        import urllib.request
        from urllib.parse import urlencode

        given = {k: v for k, v in query.items() if v is not None}
        request = urllib.request.Request(self.url + path + (f"?{urlencode(given)}" if given else ""), method=method)
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as e:
            body = e.read()
            try:
                error = json.loads(body)["error"]
                raise Refused(f"{error['code']}: {error['message']}") from None
            except (ValueError, KeyError, TypeError):
                raise Refused(f"{self.url} answered {e.code}: {body[:200]!r}") from None
        except (urllib.error.URLError, OSError) as e:
            raise Refused(f"cannot reach the daemon at {self.url}: {getattr(e, 'reason', e)}") from None

    def items(self, name: str | None = None, target: str | None = None, since: str | None = None,
              limit: int = 10_000) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self._call("GET", "/v1/kernels", name=name, target=target, since=since, limit=limit)
        return found

    def show(self, key: str) -> dict[str, Any]:
        found: dict[str, Any] = self._call("GET", f"/v1/kernels/{self.resolve(key)}")
        return found

    def remove(self, key: str) -> list[str]:
        tiers: list[str] = self._call("DELETE", f"/v1/kernels/{self.resolve(key)}")["tiers"]
        return tiers

    def clear(self, older_than: str, name: str | None, target: str | None) -> list[str]:
        keys: list[str] = self._call("DELETE", "/v1/kernels", older_than=older_than, name=name, target=target)["deleted"]
        return keys

    def stats(self) -> dict[str, Any]:
        found: dict[str, Any] = self._call("GET", "/v1/stats")
        return found


# ---- the actions -------------------------------------------------------------------------------------------


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    exponent = min(3, (n.bit_length() - 1) // 10)
    return f"{n / 1024**exponent:.1f} {('KiB', 'MiB', 'GiB')[exponent - 1]}"


def _print(data: Any, as_json: bool, table: list[list[str]] | None = None) -> None:
    if as_json or table is None:
        print(json.dumps(data, indent=2, sort_keys=True))
        return
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


def ls(store: Store, args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= 10_000:
        raise CacheError(f"--limit must be 1 to 10000, got {args.limit}")
    items = store.items(args.name, args.target, args.since, args.limit)
    rows = [["KEY", "NAME", "TARGET", "WARPS", "STAGES", "HITS", "SIZE", "LAST USED", "CREATED", "TIERS"]]
    for i in items:
        o = i["options"]
        rows.append([i["key"][:16], i["name"], i["target"], str(o.get("num_warps", "-")), str(o.get("num_stages", "-")),
                     str(i["hits"]), _size(sum(i["sizes"].values())), i["last_used"][:19] + "Z", i["created"][:19] + "Z",
                     ",".join(i["tiers"])])
    _print(items, args.json, rows)
    if not args.json and not items:
        print("(no kernels)", file=sys.stderr)
    return 0


def show(store: Store, args: argparse.Namespace) -> int:
    _print(store.show(args.key), True)
    return 0


def rm(store: Store, args: argparse.Namespace) -> int:
    keys = [store.resolve(k) for k in args.keys]  # every key checked before any is deleted
    done = {key: store.remove(key) for key in keys}
    if args.json:
        _print(done, True)
    else:
        for key, tiers in done.items():
            print(f"deleted {key} from {', '.join(tiers)}")
    return 0


def clear(store: Store, args: argparse.Namespace) -> int:
    keys = store.clear("0s" if args.all else args.older_than, args.name, args.target)
    if args.json:
        _print({"deleted": keys}, True)
    else:
        print(f"deleted {len(keys)} kernel{'s' * (len(keys) != 1)}"
              + ("" if args.all else f" not used since {args.older_than}"))
    return 0


def stats(store: Store, args: argparse.Namespace) -> int:
    data = store.stats()
    if args.json or "folder" not in data:
        _print(data, True)
    else:
        targets = ", ".join(f"{t or '?'}: {n}" for t, n in sorted(data["targets"].items())) or "none"
        print(f"{data['folder']}: {data['kernels']} kernels, {_size(data['bytes'])} (by target: {targets})")
    return 0


ACTIONS = {"ls": ls, "show": show, "rm": rm, "clear": clear, "stats": stats}
