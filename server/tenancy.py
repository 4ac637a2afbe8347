"""Tenants: a daemon whose token file names several (server/auth.py) shows each tenant only the kernels
it has compiled or been answered with: listings, metadata, stages, sources and line maps. Cubins stay
shared by content: a Compile is answered from whatever tier holds the kernel, whoever compiled it first,
since its IR is the kernel; the answer makes the asker an owner too. A daemon without a token has no
tenants: everyone sees everything.

The transports set `TENANT` for each request (`acting_as`); `Owners` keeps who owns each key in memory,
in the disk tier's folder (`owners/<key>`, one tenant a line) and in Redis (a set per key, with the
entries' time to live), so that every daemon of a cluster, and a restarted one, agrees.

    with acting_as("team-a"):
        await service.kernels()            # team-a's kernels only
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING

from .cache.redis_tier import name

if TYPE_CHECKING:
    from .cache.redis_tier import RedisTier

TENANT: ContextVar[str | None] = ContextVar("despina_tenant", default=None)
MEMORY_KEYS = 65_536


@contextlib.contextmanager
def acting_as(tenant: str | None) -> Iterator[None]:
    token = TENANT.set(tenant)
    try:
        yield
    finally:
        TENANT.reset(token)


class Owners:
    def __init__(self, disk_dir: str | None, redis: RedisTier | None, ttl_s: int) -> None:
        self.folder = Path(disk_dir) / "owners" if disk_dir else None
        self.redis, self.ttl_s = redis, ttl_s
        self._known: OrderedDict[str, set[str]] = OrderedDict()

    def _remember(self, key: str, tenants: set[str]) -> set[str]:
        self._known[key] = tenants
        self._known.move_to_end(key)
        if len(self._known) > MEMORY_KEYS:
            self._known.popitem(last=False)
        return tenants

    async def add(self, key: str, tenant: str) -> None:
        """Make `tenant` an owner of `key` in every tier (once per daemon and key: memory says so)."""
        owners = await self.of(key)
        if tenant in owners:
            return
        self._remember(key, owners | {tenant})
        if self.folder is not None:
            await asyncio.to_thread(self._append, key, tenant)
        if self.redis is not None:
            redis, where = self.redis, name("owners", key)
            await redis._call("owners", lambda: redis.client.sadd(where, tenant))
            await redis._call("owners", lambda: redis.client.expire(where, self.ttl_s))

    async def of(self, key: str) -> set[str]:
        """The tenants that own `key`: memory, then the disk tier's file, then Redis."""
        known = self._known.get(key)
        if known is not None:
            return known
        found: set[str] = set()
        if self.folder is not None:
            found |= await asyncio.to_thread(self._read, key)
        if self.redis is not None:
            redis = self.redis
            got = await redis._call("owners", lambda: redis.client.smembers(name("owners", key)))
            if isinstance(got, set):
                found |= {t.decode(errors="replace") if isinstance(t, bytes) else str(t) for t in got}
        return self._remember(key, found) if found else found

    async def forget(self, key: str, in_redis: bool = True) -> None:
        """`key` was deleted (from Redis too, unless `in_redis` is False): so are its owners, there."""
        self._known.pop(key, None)
        if self.folder is not None:
            (self.folder / key).unlink(missing_ok=True)
        if in_redis and self.redis is not None:
            redis = self.redis
            await redis._call("owners", lambda: redis.client.delete(name("owners", key)))

    def _append(self, key: str, tenant: str) -> None:
        assert self.folder is not None
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / key, "a") as f:
            f.write(tenant + "\n")

    def _read(self, key: str) -> set[str]:
        assert self.folder is not None
        try:
            return set((self.folder / key).read_text().split())
        except OSError:
            return set()


async def visible(owners: Owners, key: str) -> bool:
    """Whether the request's tenant may see `key` (always, on a daemon without tenants)."""
    tenant = TENANT.get()
    return tenant is None or tenant in await owners.of(key)
