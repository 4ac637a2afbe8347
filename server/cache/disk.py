"""The daemon's disk tier: one file per kernel under a folder, written and read by the client's own
disk cache (`despina.runtime.cache.FileCache`), so that both keep kernels the same way.

    disk = DiskTier("~/.cache/despina/daemon", max_bytes=10 << 30, metrics=metrics)
    disk.scan()              # the folder's size, once at start
    disk.put(entry)          # atomic: a temporary file renamed into place
    entry = disk.get(key)    # None on a miss, or for a file that fails its digest (deleted, counted)

Files are content-addressed by the daemon's cache key (`<dir>/<key[:2]>/<key>.cubin`). Each holds
the cubin, the metadata and every text stage behind one SHA-256 digest (HMAC-SHA-256 keyed by the
cluster secret, when the daemon has one), checked on every read: a
torn, altered or misfiled file is deleted, counted in `despina_cache_corrupt_total{tier="disk"}`,
and the kernel found in Redis or compiled again. No pickle. The folder is bounded in bytes: a read
touches the file's modification time, and a write that takes the folder past `max_bytes` deletes
the least recently used files down to 90% of it; kernels that `in_use` names (those in the memory
tier, whose hits never reach the disk) go last. Several daemons may share a folder.

The methods block on the file system: the service calls them in a thread.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from despina.runtime.cache import Binary, FileCache

# Entry.created travels in the stored metadata under this name and is taken out again on reading.
from despina.runtime.inventory import CREATED

from ..metrics import Metrics
from .entry import STAGES, Entry

log = logging.getLogger("despina.server.disk")
LOW_WATER = 0.9
STALE_TEMP_S = 3600.0


def to_binary(entry: Entry) -> Binary | None:
    """The client cache's form of `entry` (None when a text stage is not UTF-8, which the form cannot hold)."""
    try:
        asm = {s: data.decode() for s, data in entry.stages.items() if s != "cubin"}
    except UnicodeDecodeError:
        return None
    metadata = {k: v for k, v in entry.metadata.items() if k != "name"}
    metadata[CREATED] = entry.created
    return Binary(str(entry.metadata.get("name", "")), entry.cubin, metadata, asm)


def to_entry(key: str, binary: Binary) -> Entry:
    metadata = dict(binary.metadata)
    created = metadata.pop(CREATED, None)
    if binary.name:
        metadata["name"] = binary.name
    stages = {s: text.encode() for s, text in binary.asm.items() if s in STAGES}
    if binary.cubin:
        stages["cubin"] = binary.cubin
    return Entry(key, stages, metadata, float(created) if isinstance(created, (int, float)) else time.time())


class DiskTier:
    def __init__(self, directory: os.PathLike[str] | str, max_bytes: int, metrics: Metrics,
                 in_use: Callable[[str], bool] | None = None, secret: bytes | None = None) -> None:
        self.directory = Path(directory).expanduser()
        self.max_bytes = max_bytes
        self.metrics = metrics
        self.in_use = in_use or (lambda key: False)
        self.files = FileCache(self.directory, secret)
        self.entries = 0
        self.nbytes = 0
        # FileCache counts corrupt files in `stats`; the lock pairs each read with its count.
        self._lock = threading.Lock()

    def scan(self) -> None:
        """Count the folder's kernels and bytes (and trim it if it is over its bound)."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            log.warning("the disk cache %s cannot be created (%s); serving without it", self.directory, e)
            self.metrics.disk_errors.labels("scan").inc()
        self._measure(self._files())
        if self.nbytes > self.max_bytes:
            self._evict()

    def _files(self) -> list[tuple[float, int, Path]]:
        """(mtime, size, path) of every entry; temporary files a crashed writer left behind are deleted."""
        found = []
        now = time.time()
        try:
            folders = [d for d in self.directory.iterdir() if d.is_dir()]
        except OSError:
            return []
        for folder in folders:
            try:
                names = list(os.scandir(folder))
            except OSError:
                continue
            for f in names:
                try:
                    st = f.stat()
                    if f.name.endswith(".tmp"):
                        if now - st.st_mtime > STALE_TEMP_S:
                            os.unlink(f.path)
                        continue
                except OSError:
                    continue
                if f.name.endswith(".cubin"):
                    found.append((st.st_mtime, st.st_size, Path(f.path)))
        return found

    def _measure(self, files: list[tuple[float, int, Path]]) -> None:
        self.entries, self.nbytes = len(files), sum(size for _, size, _ in files)
        self.metrics.disk_entries.set(self.entries)
        self.metrics.disk_bytes.set(self.nbytes)

    def get(self, key: str) -> Entry | None:
        with self._lock:
            corrupt = self.files.stats["corrupt"]
            binary = self.files.get(key)
            discarded = self.files.stats["corrupt"] > corrupt
        if discarded:
            log.error("dropping corrupt disk cache entry %s (digest mismatch or torn file)", self.files.path(key))
            self.metrics.corrupt.labels("disk").inc()
            self._measure(self._files())
        if binary is None:
            return None
        try:
            os.utime(self.files.path(key))  # most recently used now
        except OSError:
            pass
        return to_entry(key, binary)

    def put(self, entry: Entry) -> None:
        binary = to_binary(entry)
        if binary is None:
            log.warning("kernel %s has a stage that is not UTF-8 text; not keeping it on disk", entry.key)
            return
        path = self.files.path(entry.key)
        try:
            old = path.stat().st_size
        except OSError:
            old = -1
        with self._lock:
            failed = self.files.stats["write_failed"]
            self.files.put(entry.key, binary)
            if self.files.stats["write_failed"] > failed:
                self.metrics.disk_errors.labels("write").inc()
                return
        try:
            size = path.stat().st_size
        except OSError:
            return
        if old < 0:
            self.entries += 1
        self.nbytes += size - max(old, 0)
        self.metrics.disk_entries.set(self.entries)
        self.metrics.disk_bytes.set(self.nbytes)
        if self.nbytes > self.max_bytes:
            self._evict()

    def remove(self, key: str) -> bool:
        """Delete `key`'s file (an operator's request); whether there was one."""
        path = self.files.path(key)
        try:
            size = path.stat().st_size
            removed = self.files.remove(key)
        except OSError as e:
            log.warning("cannot delete %s from the disk cache: %s", path, e)
            self.metrics.disk_errors.labels("delete").inc()
            return False
        if removed:
            self.entries -= 1
            self.nbytes -= size
            self.metrics.disk_entries.set(self.entries)
            self.metrics.disk_bytes.set(self.nbytes)
        return removed

    def _evict(self) -> None:
        """Delete the least recently used files until the folder holds at most 90% of its bound."""
        files = sorted(self._files(), key=lambda f: (self.in_use(f[2].stem), f[0]))
        total = sum(size for _, size, _ in files)
        target = self.max_bytes * LOW_WATER
        kept = len(files)
        for _, size, path in files:
            if total <= target:
                break
            try:
                path.unlink()
            except FileNotFoundError:
                pass  # another daemon sharing the folder was first
            except OSError as e:
                self.metrics.disk_errors.labels("evict").inc()
                log.warning("cannot evict %s from the disk cache: %s", path, e)
                continue
            total -= size
            kept -= 1
            self.metrics.disk_evictions.inc()
        self.entries, self.nbytes = kept, total
        self.metrics.disk_entries.set(kept)
        self.metrics.disk_bytes.set(total)
