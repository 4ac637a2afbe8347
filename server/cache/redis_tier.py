"""The shared tier: entries in Redis, read by every daemon, with a lease per key for single-flight.

Keys (`<key>` is the 64-hex-digit cache key):
    despina:v1:kernel:<key>   the packed entry (entry.py), written with one SET ... PX ttl
    despina:v1:lease:<key>    the daemon compiling <key> now: SET NX PX, renewed while it runs
    despina:v1:error:<key>    why <key> failed to compile, for the daemons waiting on the lease

Every call has a time-out and fails open: a Redis that is down, slow or flushed makes the daemon
compile on its own (a log line on each change of state, `despina_redis_errors` per failed call),
and the next call after `retry_s` tries it again, over a fresh connection.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from ..metrics import Metrics
from .entry import CorruptEntry, Entry, pack, unpack

log = logging.getLogger("despina.server.redis")
T = TypeVar("T")
PREFIX = "despina:v1:"

# Renew or delete the lease only while it is still ours: after an expiry another daemon may hold it.
_RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


class _Failed:
    """What `_call` returns when Redis could not answer."""


FAILED = _Failed()


class RedisTier:
    def __init__(self, url: str, metrics: Metrics, ttl_s: int, timeout_s: float, retry_s: float, lease_ms: int) -> None:
        self.url = url
        self.metrics = metrics
        self.ttl_ms = ttl_s * 1000
        self.timeout_s = timeout_s
        self.retry_s = retry_s
        self.lease_ms = lease_ms
        self.client = aioredis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s, retry=Retry(NoBackoff(), 0)
        )
        self.up = True
        self._skip_until = 0.0

    async def close(self) -> None:
        await self.client.aclose()

    @property
    def connected(self) -> bool:
        return self.up

    async def _call(self, op: str, fn: Callable[[], Awaitable[T]]) -> T | _Failed:
        if not self.up and time.monotonic() < self._skip_until:
            return FAILED
        try:
            result = await asyncio.wait_for(fn(), self.timeout_s * 2)
        except (RedisError, OSError, asyncio.TimeoutError) as e:
            self.metrics.redis_errors.labels(op).inc()
            self.metrics.redis_up.set(0)
            if self.up:
                log.warning("Redis at %s failed (%s: %s); serving without it, retrying every %.1fs",
                            self.url, type(e).__name__, e, self.retry_s)
            self.up = False
            self._skip_until = time.monotonic() + self.retry_s
            return FAILED
        if not self.up:
            log.warning("Redis at %s is back", self.url)
        self.up = True
        self.metrics.redis_up.set(1)
        return result

    async def ping(self) -> bool:
        return await self._call("ping", self.client.ping) is True

    # ---- entries ------------------------------------------------------------------------------

    async def get(self, key: str) -> Entry | None:
        blob = await self._call("get", lambda: self.client.get(PREFIX + "kernel:" + key))
        return self._decode(key, blob)

    def _decode(self, key: str, blob: Any) -> Entry | None:
        if not isinstance(blob, bytes):
            return None
        try:
            return unpack(blob, key)
        except CorruptEntry as e:
            log.error("dropping corrupt Redis entry %s: %s", key, e)
            self.metrics.corrupt.labels("redis").inc()
            asyncio.ensure_future(self._call("delete", lambda: self.client.delete(PREFIX + "kernel:" + key)))
            return None

    async def put(self, entry: Entry) -> None:
        blob = pack(entry)
        await self._call("set", lambda: self.client.set(PREFIX + "kernel:" + entry.key, blob, px=self.ttl_ms))

    async def delete(self, key: str) -> bool:
        """Delete `key`'s entry (an operator's request); whether Redis held one."""
        got = await self._call("delete", lambda: self.client.delete(PREFIX + "kernel:" + key))
        return not isinstance(got, _Failed) and bool(got)

    # ---- single-flight ------------------------------------------------------------------------

    async def acquire(self, key: str, owner: str) -> bool | None:
        """True: this daemon compiles `key`; False: another does; None: Redis did not answer."""
        got = await self._call("lease", lambda: self.client.set(PREFIX + "lease:" + key, owner, nx=True, px=self.lease_ms))
        return None if got is FAILED else bool(got)

    async def renew(self, key: str, owner: str) -> None:
        await self._call("lease", lambda: self.client.eval(_RENEW, 1, PREFIX + "lease:" + key, owner, self.lease_ms))

    async def release(self, key: str, owner: str) -> None:
        await self._call("lease", lambda: self.client.eval(_RELEASE, 1, PREFIX + "lease:" + key, owner))

    async def put_error(self, key: str, message: str) -> None:
        await self._call("set", lambda: self.client.set(PREFIX + "error:" + key, message.encode(), px=self.lease_ms))

    async def wait(self, key: str, poll_s: float) -> Entry | str | None:
        """Wait while another daemon holds the lease: its entry, its error message, or None when
        the lease is gone without either (it crashed or Redis failed) and the caller should try again."""
        names = [PREFIX + s + key for s in ("kernel:", "error:", "lease:")]
        while True:
            got = await self._call("wait", lambda: self.client.mget(names))
            if isinstance(got, _Failed):
                return None
            blob, error, lease = got
            if blob is not None:
                return self._decode(key, blob)
            if error is not None:
                return error.decode(errors="replace") if isinstance(error, bytes) else str(error)
            if lease is None:
                return None
            await asyncio.sleep(poll_s)
