"""The daemon's tuning results, in the same tiers as its kernels: memory, its disk folder, Redis.

    store = TuningStore(redis_tier, disk_dir, metrics)
    found, tier = await store.get(key)          # (Tuning, "memory" | "disk" | "redis") or (None, "")
    await store.put(tuning)                     # every tier, Redis with one SET
    await store.acquire(key, owner)             # single-flight across daemons, as compiles have

Redis keys (`redis_tier.name`): `despina:v2:tuning:{<key>}` (the record, `Tuning.dumps`),
`despina:v2:tunelease:{<key>}` (the daemon tuning <key> now) and `despina:v2:tuneerror:{<key>}` (why it
failed, for the daemons waiting on it), one slot per key in a Redis Cluster, as a kernel's keys are. A
record is written whole or not at all: one SET, one atomic file rename.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from pathlib import Path
from typing import Any

from despina.runtime.tunings import Tuning, TuningFiles, loads

from ..metrics import Metrics
from .redis_tier import _RELEASE, _RENEW, PREFIX, RedisTier, _Failed, name

log = logging.getLogger("despina.server.tunings")
MEMORY_TUNINGS = 4096


class TuningStore:
    def __init__(self, redis: RedisTier | None, disk_dir: str | None, metrics: Metrics) -> None:
        self.redis = redis
        self.metrics = metrics
        self.files = TuningFiles(Path(disk_dir) / "tunings") if disk_dir else None
        self.memory: OrderedDict[str, Tuning] = OrderedDict()

    def _remember(self, tuning: Tuning) -> None:
        self.memory[tuning.key] = tuning
        self.memory.move_to_end(tuning.key)
        while len(self.memory) > MEMORY_TUNINGS:
            self.memory.popitem(last=False)

    async def get(self, key: str) -> tuple[Tuning | None, str]:
        found = self.memory.get(key)
        if found is not None:
            self.memory.move_to_end(key)
            return found, "memory"
        if self.files is not None:
            found = await asyncio.to_thread(self.files.get, key)
            if found is not None:
                self._remember(found)
                return found, "disk"
        if self.redis is not None:
            found = await self._redis_get(key)
            if found is not None:
                self._remember(found)
                await self._disk_put(found)
                return found, "redis"
        return None, ""

    async def _redis_get(self, key: str) -> Tuning | None:
        assert self.redis is not None
        redis = self.redis
        blob = await redis._call("get", lambda: redis.client.get(name("tuning", key)))
        return self._decode(key, blob)

    def _decode(self, key: str, blob: Any) -> Tuning | None:
        if not isinstance(blob, bytes):
            return None
        try:
            return loads(blob, key)
        except ValueError as e:
            log.error("dropping corrupt Redis tuning %s: %s", key, e)
            self.metrics.corrupt.labels("redis").inc()
            return None

    async def _disk_put(self, tuning: Tuning) -> None:
        if self.files is not None and not await asyncio.to_thread(self.files.put, tuning):
            log.warning("tuning %s not written to %s", tuning.key, self.files.directory)
            self.metrics.disk_errors.labels("write").inc()

    async def put(self, tuning: Tuning) -> None:
        self._remember(tuning)
        if self.redis is not None:
            redis, blob = self.redis, tuning.dumps()
            await redis._call("set", lambda: redis.client.set(name("tuning", tuning.key), blob, px=redis.ttl_ms))
        await self._disk_put(tuning)

    async def recent(self, limit: int) -> list[Tuning]:
        """This daemon's tunings (memory and disk), newest first; Redis is read key by key only."""
        found: dict[str, Tuning] = {t.key: t for t in self.memory.values()}
        if self.files is not None:
            for t in await asyncio.to_thread(lambda: list(self.files or [])):
                found.setdefault(t.key, t)
        return sorted(found.values(), key=lambda t: t.created, reverse=True)[:limit]

    async def clear(self, key: str | None = None) -> int:
        """Forget one tuning or all of them, in every tier; how many records were deleted (in the largest tier)."""
        if key is None:
            counts = [len(self.memory)]
            self.memory.clear()
        else:
            counts = [1 if self.memory.pop(key, None) is not None else 0]
        if self.files is not None:
            counts.append(await asyncio.to_thread(self.files.clear, key))
        if self.redis is not None:
            counts.append(await self._redis_clear(key))
        return max(counts)

    async def _redis_clear(self, key: str | None) -> int:
        assert self.redis is not None
        redis = self.redis

        async def delete() -> int:
            if key is not None:
                return int(await redis.client.delete(name("tuning", key)))
            names = [found async for found in redis.client.scan_iter(match=PREFIX + "tuning:*", count=500)]
            return int(await redis.client.delete(*names)) if names else 0

        deleted = await redis._call("delete", delete)
        return 0 if isinstance(deleted, _Failed) else deleted

    # ---- single-flight across daemons -------------------------------------------------------------

    async def acquire(self, key: str, owner: str) -> bool | None:
        """True: this daemon tunes `key`; False: another does; None: no Redis, or it did not answer."""
        if self.redis is None:
            return None
        redis = self.redis
        got = await redis._call("lease", lambda: redis.client.set(name("tunelease", key), owner, nx=True,
                                                                  px=redis.lease_ms))
        return None if isinstance(got, _Failed) else bool(got)

    async def renew(self, key: str, owner: str) -> None:
        assert self.redis is not None
        redis = self.redis
        await redis._call("lease", lambda: redis.client.eval(_RENEW, 1, name("tunelease", key), owner,
                                                             redis.lease_ms))

    async def release(self, key: str, owner: str) -> None:
        assert self.redis is not None
        redis = self.redis
        await redis._call("lease", lambda: redis.client.eval(_RELEASE, 1, name("tunelease", key), owner))

    async def put_error(self, key: str, message: str) -> None:
        """Tell the daemons waiting on `key` why its tuning failed, in a record sealed with the cluster
        secret (none without one: the waiters then tune for themselves)."""
        assert self.redis is not None
        redis = self.redis
        record = redis.seal("tuneerror", key, message.encode())
        if record is not None:
            await redis._call("set", lambda: redis.client.set(name("tuneerror", key), record, px=redis.lease_ms))

    async def wait(self, key: str, poll_s: float) -> Tuning | str | None:
        """Wait while another daemon tunes `key`: its record, its error, or None when its lease went
        without either (it crashed, or Redis failed) and the caller should try again."""
        assert self.redis is not None
        redis = self.redis
        names = [name(kind, key) for kind in ("tuning", "tuneerror", "tunelease")]
        distrusted = b""
        while True:
            got = await redis._call("wait", lambda: redis.client.mget(names))
            if isinstance(got, _Failed):
                return None
            blob, error, lease = got
            if blob is not None:
                found = self._decode(key, blob)
                if found is not None:
                    self._remember(found)
                return found
            if isinstance(error, bytes) and error != distrusted:
                payload = redis.unseal("tuneerror", key, error)
                if payload is not None:
                    return payload.decode(errors="replace")
                distrusted = error  # not a daemon's: wait on the lease as if it were not there
            if lease is None:
                return None
            await asyncio.sleep(poll_s)
