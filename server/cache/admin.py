"""The daemon's cache as an operator sees it: list the kernels of its memory and disk tiers with their
use, delete one kernel from every tier, or those not used since some time.

    admin.used(key, tier)                           # every answer of a compile or execute
    admin.listing(name="add_*", since=t, limit=50)  # memory and disk, the most recently used first
    await admin.delete(key)                         # memory, disk and Redis; the tiers it was in
    admin.delete_unused_since(t)                    # memory and disk (Redis entries expire by --redis-ttl)

Hits and last use are this daemon's own since it started (the disk's files carry their last use in
their modification time, which outlives a restart).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from despina.runtime.inventory import Item, compile_seconds, from_file, options_of, select

from .disk import DiskTier
from .entry import Entry
from .memory import MemoryCache
from .redis_tier import RedisTier

USAGE_KEYS = 1 << 16


@dataclass
class Usage:
    hits: int
    last_used: float
    origin: str


class CacheAdmin:
    def __init__(self, memory: MemoryCache, disk: DiskTier | None, redis: RedisTier | None) -> None:
        self.memory, self.disk, self.redis = memory, disk, redis
        self._usage: OrderedDict[str, Usage] = OrderedDict()

    def used(self, key: str, tier: str) -> None:
        """Count one answer for `key`, which `tier` gave (the first one's is the kernel's origin)."""
        usage = self._usage.pop(key, None) or Usage(0, 0.0, tier)
        usage.hits += 1
        usage.last_used = time.time()
        self._usage[key] = usage
        if len(self._usage) > USAGE_KEYS:
            self._usage.popitem(last=False)

    def item(self, entry: Entry) -> Item:
        m = entry.metadata
        usage = self._usage.get(entry.key)
        return Item(entry.key, str(m.get("name", "")), str(m.get("target", "")), entry.created,
                    usage.last_used if usage else entry.created, usage.hits if usage else 0, options_of(m),
                    {k: len(v) for k, v in entry.stages.items()}, ["memory"], compile_seconds(m),
                    usage.origin if usage else "")

    async def items(self) -> list[Item]:
        """Every kernel in the memory and disk tiers (the disk read in a thread)."""
        found = {e.key: self.item(e) for e in self.memory.recent(len(self.memory))}
        listed = await asyncio.to_thread(self.disk.files.listing) if self.disk is not None else []
        for file in listed:
            item = found.get(file.key)
            if item is not None:
                item.tiers.append("disk")
                item.last_used = max(item.last_used, file.mtime)
                continue
            item = found[file.key] = from_file(file)
            usage = self._usage.get(file.key)
            if usage is not None:
                item.hits, item.last_used, item.origin = usage.hits, max(usage.last_used, item.last_used), usage.origin
        return list(found.values())

    async def listing(self, name: str | None = None, target: str | None = None, since: float | None = None,
                      limit: int | None = 100) -> list[Item]:
        """The matching kernels, the most recently used first; `limit` of them (None: all)."""
        return select(await self.items(), name, target, since)[:limit]

    async def delete(self, key: str) -> list[str]:
        """Delete `key` from memory, disk and Redis; the tiers that held it."""
        tiers = []
        if self.memory.remove(key):
            tiers.append("memory")
        if self.disk is not None and await asyncio.to_thread(self.disk.remove, key):
            tiers.append("disk")
        if self.redis is not None and await self.redis.delete(key):
            tiers.append("redis")
        self._usage.pop(key, None)
        return tiers

    async def delete_unused_since(self, cutoff: float, name: str | None = None, target: str | None = None,
                                  allowed: Callable[[str], Awaitable[bool]] | None = None) -> list[str]:
        """Delete from memory and disk the kernels last used before `cutoff` (matching `name` and `target`,
        and `allowed`, the asking tenant's); their keys, the least recently used first."""
        keys = [i.key for i in reversed(select(await self.items(), name, target)) if i.last_used < cutoff]
        if allowed is not None:
            keys = [key for key in keys if await allowed(key)]
        for key in keys:
            self.memory.remove(key)
            self._usage.pop(key, None)
        if self.disk is not None:
            disk = self.disk
            await asyncio.to_thread(lambda: [disk.remove(key) for key in keys])
        return keys
