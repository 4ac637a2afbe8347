"""The shared tier: entries in Redis, read by every daemon, with a lease per key for single-flight.

Keys (`<key>` is the 64-hex-digit cache key):
    despina:v1:kernel:<key>   the packed entry (entry.py), written with one SET ... PX ttl
    despina:v1:lease:<key>    the daemon compiling <key> now: SET NX PX, renewed while it runs
    despina:v1:error:<key>    why <key> failed to compile (status code and message), for the daemons
                              waiting on the lease; MAC'd with the cluster secret, and trusted only then

Every call has a time-out and fails open: a Redis that is down, slow or flushed makes the daemon
compile on its own (a log line on each change of state, `despina_redis_errors` per failed call),
and the next call after `retry_s` tries it again, over a fresh connection.

Whoever can write to Redis is not trusted: entries and error records carry an HMAC-SHA-256 keyed by
the cluster secret (when the daemons have one; entry.py); a lease without an expiry, or with a longer
one than daemons set, is not a daemon's and is deleted; a wait on a lease is bounded; a value of the
wrong type at a kernel's key is deleted like a corrupt entry.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError, ResponseError

from ..metrics import Metrics
from .entry import CorruptEntry, Entry, pack, unpack

log = logging.getLogger("despina.server.redis")
T = TypeVar("T")
PREFIX = "despina:v1:"

# Renew or delete the lease only while it is still ours: after an expiry another daemon may hold it.
_RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
# A lease no daemon set (no expiry, or a longer one than ARGV[1] ms) goes: it would hold its key forever.
_PLANTED = ("local t = redis.call('pttl', KEYS[1]) if t == -1 or t > tonumber(ARGV[1]) then "
            "return redis.call('del', KEYS[1]) end return 0")
ERROR_MAGIC = b"DSPNE1"


@dataclass(frozen=True)
class Failure:
    """Another daemon's compile of the key failed with this status code and message."""

    code: str
    message: str


RETRY = "retry"  # the lease is gone without an answer: try to take it
ALONE = "alone"  # the lease holder did not answer in time: compile without the lease


class _Failed:
    """What `_call` returns when Redis could not answer."""


FAILED = _Failed()


class WrongType(Exception):
    """A key holds a value of another Redis type than the daemons write: planted, not a failure of Redis."""


class RedisTier:
    def __init__(self, url: str, metrics: Metrics, ttl_s: int, timeout_s: float, retry_s: float, lease_ms: int,
                 secret: bytes | None = None, max_wait_s: float = 130.0) -> None:
        self.url = url
        self.secret = secret
        self.max_wait_s = max_wait_s
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
        except ResponseError as e:
            if not str(e).startswith("WRONGTYPE"):
                raise
            raise WrongType(str(e)) from None
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
        try:
            blob = await self._call("get", lambda: self.client.get(PREFIX + "kernel:" + key))
        except WrongType as e:  # not a daemon's: Redis itself is fine
            self._drop(key, str(e))
            return None
        return self._decode(key, blob)

    def _decode(self, key: str, blob: Any) -> Entry | None:
        if not isinstance(blob, bytes):
            return None
        try:
            return unpack(blob, key, self.secret)
        except CorruptEntry as e:
            self._drop(key, str(e))
            return None

    def _drop(self, key: str, why: str) -> None:
        log.error("dropping corrupt Redis entry %s: %s", key, why)
        self.metrics.corrupt.labels("redis").inc()
        asyncio.ensure_future(self._call("delete", lambda: self.client.delete(PREFIX + "kernel:" + key)))

    async def put(self, entry: Entry) -> None:
        blob = pack(entry, self.secret)
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

    def _mac(self, key: str, payload: bytes) -> bytes:
        assert self.secret is not None
        return hmac.new(self.secret, key.encode() + b"\0" + payload, hashlib.sha256).hexdigest().encode()

    async def put_error(self, key: str, code: str, message: str) -> None:
        """Tell the daemons waiting on `key` why it failed; only with a cluster secret, since without
        one they could not tell a daemon's record from one planted in Redis (they compile instead)."""
        if self.secret is None:
            return
        payload = f"{code}\n{message}".encode()
        record = ERROR_MAGIC + self._mac(key, payload) + payload
        await self._call("set", lambda: self.client.set(PREFIX + "error:" + key, record, px=self.lease_ms))

    def _failure(self, key: str, record: bytes) -> Failure | None:
        head = len(ERROR_MAGIC) + 64
        payload = record[head:]
        if (self.secret is None or not record.startswith(ERROR_MAGIC)
                or not hmac.compare_digest(self._mac(key, payload), record[len(ERROR_MAGIC):head])):
            log.warning("ignoring an error record for %s that this daemon cannot authenticate", key)
            return None
        code, _, message = payload.decode(errors="replace").partition("\n")
        return Failure(code, message)

    async def wait(self, key: str, poll_s: float) -> Entry | Failure | str:
        """Wait while another daemon holds the lease: its entry, its `Failure`, `RETRY` when the lease
        is gone without either (it crashed, Redis failed, an error record this daemon cannot trust) and
        the caller should try again, or `ALONE` after `max_wait_s`: compile without the lease."""
        names = [PREFIX + s + key for s in ("kernel:", "error:", "lease:")]
        now = time.monotonic()
        deadline, check, distrusted = now + self.max_wait_s, now, b""
        while time.monotonic() < deadline:
            got = await self._call("wait", lambda: self.client.mget(names))
            if isinstance(got, _Failed):
                return RETRY
            blob, error, lease = got
            if blob is not None:
                return self._decode(key, blob) or RETRY
            if isinstance(error, bytes) and error != distrusted:
                failure = self._failure(key, error)
                if failure is not None:
                    return failure
                distrusted = error  # not a daemon's: wait on the lease as if it were not there
            if lease is None:
                return RETRY
            if time.monotonic() >= check:
                check = time.monotonic() + 1.0
                planted = await self._call("lease", lambda: self.client.eval(_PLANTED, 1, names[2], self.lease_ms))
                if planted == 1:
                    log.warning("deleted a lease on %s that no daemon set (no expiry, or a longer one)", key)
                    return RETRY
            await asyncio.sleep(poll_s)
        log.warning("the daemon compiling %s did not answer within %gs; compiling it here", key, self.max_wait_s)
        return ALONE
