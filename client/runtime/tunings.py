"""Autotuning results: one JSON record per tuning, kept on disk by the client and by the daemon.

    record = Tuning(key, "matmul_kernel", labels, timings_ms, errors, winner, device, driver)
    files = TuningFiles(cache_dir() / "tunings")
    files.put(record)            # atomic: a temporary file renamed into place
    files.get(key)               # None on a miss, or for a file that does not check out (deleted)

A record says which of the configs won for one tuning key and what every config measured (or why
it was dropped). Its key (`tuning_key`) covers what the choice depends on: the kernel and its
configs, the values of the autotuner's `key` arguments, the arguments' dtypes and alignment (all in
the client's part, `Autotuner.tuning_key`), the GPU's name, the CUDA driver and Despina's version.
Records are data only (JSON, no pickle) behind a SHA-256 of their canonical form.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

FORMAT = 1


def _version() -> str:
    from despina import __version__

    return __version__


def tuning_key(client_key: str, device: str, driver_version: int) -> str:
    """64 hex digits naming one tuning: the client's part, the GPU that measured it, its driver, Despina."""
    header = {"v": FORMAT, "client": client_key, "device": device, "driver": int(driver_version),
              "despina": _version()}
    return hashlib.sha256(json.dumps(header, sort_keys=True).encode()).hexdigest()


def is_key(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)


@dataclass(frozen=True)
class Tuning:
    """The outcome of one tuning: `labels[i]` is config i as the user wrote it; `timings_ms[i]` its time
    (None when it was dropped, `errors[i]` then says why); `winner` the index of the fastest.
    `compile_keys[i]` is the daemon's cache key of config i's kernel ("" when there is none)."""

    key: str
    kernel: str
    labels: list[str]
    timings_ms: list[float | None]
    errors: list[str | None]
    winner: int
    device: str
    driver_version: int
    measured_by: str = "client"
    compile_keys: list[str] = field(default_factory=list)
    seconds: float = 0.0
    created: float = field(default_factory=time.time)
    despina: str = field(default_factory=_version)

    @property
    def best_ms(self) -> float:
        best = self.timings_ms[self.winner]
        assert best is not None
        return best

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def dumps(self) -> bytes:
        body = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha256(body.encode()).hexdigest()
        return json.dumps({"format": FORMAT, "digest": digest, "tuning": json.loads(body)}, sort_keys=True).encode()

    def summary(self) -> dict[str, Any]:
        """What `GET /v1/tunings` and `despina tune ls` list."""
        return {"key": self.key, "kernel": self.kernel, "device": self.device, "configs": len(self.labels),
                "best": self.labels[self.winner], "best_ms": self.best_ms, "measured_by": self.measured_by,
                "created": self.created}


def from_json(data: Any, key: str | None = None) -> Tuning:
    """A Tuning from its JSON form; ValueError naming what does not check out."""
    if not isinstance(data, dict):
        raise ValueError("a tuning record is a JSON object")
    try:
        t = Tuning(str(data["key"]), str(data["kernel"]), [str(x) for x in data["labels"]],
                   [None if x is None else float(x) for x in data["timings_ms"]],
                   [None if x is None else str(x) for x in data["errors"]], int(data["winner"]), str(data["device"]),
                   int(data["driver_version"]), str(data.get("measured_by", "client")),
                   [str(x) for x in data.get("compile_keys", [])], float(data.get("seconds", 0.0)),
                   float(data.get("created", time.time())), str(data.get("despina", _version())))
    except (KeyError, TypeError) as e:
        raise ValueError(f"a tuning record lacks or garbles {e}") from None
    if not is_key(t.key) or (key is not None and t.key != key):
        raise ValueError(f"the record is for key {t.key[:16]!r}, not {str(key)[:16]!r}")
    n = len(t.labels)
    if not n or len(t.timings_ms) != n or len(t.errors) != n or not 0 <= t.winner < n:
        raise ValueError(f"a tuning record of {n} configs with {len(t.timings_ms)} timings and winner {t.winner}")
    if t.timings_ms[t.winner] is None:
        raise ValueError(f"the winner, config {t.winner}, has no timing")
    if t.compile_keys and len(t.compile_keys) != n:
        raise ValueError(f"{len(t.compile_keys)} compile keys for {n} configs")
    return t


def loads(blob: bytes, key: str | None = None) -> Tuning:
    """The Tuning `Tuning.dumps` wrote; ValueError for a torn, altered or misfiled record."""
    outer = json.loads(blob)
    if not isinstance(outer, dict) or outer.get("format") != FORMAT:
        raise ValueError("not a despina tuning record of this format")
    body = json.dumps(outer.get("tuning"), sort_keys=True, separators=(",", ":"))
    if hashlib.sha256(body.encode()).hexdigest() != outer.get("digest"):
        raise ValueError("SHA-256 digest mismatch")
    return from_json(outer["tuning"], key)


class TuningFiles:
    """Tuning records under `directory`, one `<key>.json` each, written atomically."""

    def __init__(self, directory: os.PathLike[str] | str) -> None:
        self.directory = Path(directory).expanduser()

    def path(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def get(self, key: str) -> Tuning | None:
        path = self.path(key)
        try:
            blob = path.read_bytes()
        except OSError:
            return None
        try:
            return loads(blob, key)
        except ValueError:  # torn or altered: measured again, and written whole
            try:
                path.unlink()
            except OSError:
                pass
            return None

    def put(self, tuning: Tuning) -> bool:
        """Store `tuning`; False when the folder cannot be written (the tuning is then kept in memory only)."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=f".{tuning.key[:16]}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(tuning.dumps())
                os.replace(tmp, self.path(tuning.key))
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            return False
        return True

    def __iter__(self) -> Iterator[Tuning]:
        """Every intact record, newest first."""
        try:
            paths = sorted(self.directory.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        except OSError:
            return
        for path in paths:
            found = self.get(path.stem) if is_key(path.stem) else None
            if found is not None:
                yield found

    def clear(self, key: str | None = None) -> int:
        """Delete one record (`key`) or all of them; how many were deleted."""
        paths = [self.path(key)] if key is not None else list(self.directory.glob("*.json"))
        deleted = 0
        for path in paths:
            try:
                path.unlink()
                deleted += 1
            except OSError:
                pass
        return deleted
