"""What a kernel cache holds, as `despina cache` and the daemon's `/v1/kernels` show it: one `Item` per
kernel, the filters both take (`name`, `target`, `since`), and their time forms.

    items = [from_file(e) for e in FileCache(folder).listing()]
    since = parse_when("2h")                   # two hours ago; or "2026-11-24T10:00:00Z"
    [i.to_json() for i in select(items, name="add_*", since=since)]
"""

from __future__ import annotations

import fnmatch
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from despina.compiler.options import CompileOptions

from .cache import Listed

# The daemon's disk tier keeps Entry.created in the file's metadata under this name.
CREATED = "despina.created"
OPTIONS = CompileOptions.NAMES
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
# A filter's bound: no cache is older than this (100 years), and larger numbers are typos.
MAX_AGE_S = 100 * 365 * 86400


@dataclass
class Item:
    """One cached kernel: times are seconds since the epoch (ISO 8601 in `to_json`), `sizes` bytes per stage."""

    key: str
    name: str
    target: str
    created: float
    last_used: float
    hits: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    tiers: list[str] = field(default_factory=list)
    compile_seconds: float | None = None
    # The tier that answered the first request for it since the daemon started (compiled, redis, disk,
    # memory); empty when none was answered.
    origin: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "name": self.name, "target": self.target, "created": iso(self.created),
                "last_used": iso(self.last_used), "hits": self.hits, "options": self.options, "sizes": self.sizes,
                "tiers": self.tiers, "compile_seconds": self.compile_seconds, "origin": self.origin}


def options_of(metadata: dict[str, Any]) -> dict[str, Any]:
    return {k: metadata[k] for k in OPTIONS if k in metadata}


def compile_seconds(metadata: dict[str, Any]) -> float | None:
    seconds = metadata.get("compile_seconds")
    return float(seconds) if isinstance(seconds, (int, float)) else None


def from_file(entry: Listed, tier: str = "disk") -> Item:
    """An entry of a cache folder: its last use is the file's modification time (a read touches it)."""
    m = entry.metadata
    created = m.get(CREATED)
    return Item(entry.key, str(m.get("name", "")), str(m.get("target", "")),
                float(created) if isinstance(created, (int, float)) else entry.mtime, entry.mtime, 0,
                options_of(m), entry.sizes, [tier], compile_seconds(m))


def iso(t: float) -> str:
    """`t` (seconds since the epoch) as ISO 8601 in UTC, to the millisecond: 2026-11-24T23:59:01.123Z."""
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_when(text: str, now: float | None = None) -> float:
    """A moment as seconds since the epoch: an age (`90s`, `30m`, `12h`, `7d`, `2w`: that long before
    `now`) or an ISO 8601 time (`2026-11-24`, `2026-11-24T10:00:00Z`; UTC when it names no zone).
    ValueError saying which forms it takes."""
    now = time.time() if now is None else now
    text = text.strip()
    duration = DURATION.fullmatch(text)
    if duration:
        seconds = float(duration.group(1)) * UNITS[duration.group(2)]
        if seconds > MAX_AGE_S:
            raise ValueError(f"{text!r} is more than 100 years")
        return now - seconds
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text[:40]!r} is neither an age like 30m, 12h or 7d nor an ISO 8601 time like "
                         "2026-11-24T10:00:00Z") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def select(items: Iterable[Item], name: str | None = None, target: str | None = None,
           since: float | None = None) -> list[Item]:
    """The items whose name matches `name` (a glob: `add_*`), whose target is `target`, and that were
    used at or after `since`; the most recently used first."""
    chosen = [i for i in items if (name is None or fnmatch.fnmatchcase(i.name, name))
              and (target is None or i.target == target) and (since is None or i.last_used >= since)]
    return sorted(chosen, key=lambda i: i.last_used, reverse=True)
