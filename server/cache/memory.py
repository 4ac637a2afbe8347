"""The in-process tier: a least-recently-used map bounded in entries and in bytes."""

from __future__ import annotations

from collections import OrderedDict

from .entry import Entry


class MemoryCache:
    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._entries: OrderedDict[str, Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        """Whether `key` is held, without making it more recently used."""
        return key in self._entries

    def get(self, key: str) -> Entry | None:
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def put(self, entry: Entry) -> None:
        old = self._entries.pop(entry.key, None)
        if old is not None:
            self.nbytes -= old.nbytes
        if entry.nbytes > self.max_bytes:
            return
        self._entries[entry.key] = entry
        self.nbytes += entry.nbytes
        while len(self._entries) > self.max_entries or self.nbytes > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self.nbytes -= evicted.nbytes

    def remove(self, key: str) -> bool:
        """Drop `key`; whether it was held."""
        entry = self._entries.pop(key, None)
        if entry is None:
            return False
        self.nbytes -= entry.nbytes
        return True

    def recent(self, limit: int) -> list[Entry]:
        """The most recently used entries first."""
        out: list[Entry] = []
        for key in reversed(self._entries):
            if len(out) >= limit:
                break
            out.append(self._entries[key])
        return out
