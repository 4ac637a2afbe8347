"""The shared tier: entries in Redis, read by every daemon, with a lease per key for single-flight.

Keys (`<key>` is the 64-hex-digit cache key, `name(kind, key)`):
    despina:v2:kernel:{<key>}   the packed entry (entry.py), written with one SET ... PX ttl
    despina:v2:lease:{<key>}    the daemon compiling <key> now: SET NX PX, renewed while it runs
    despina:v2:error:{<key>}    why <key> failed to compile (status code and message), for the daemons
                                waiting on the lease; MAC'd with the cluster secret, and trusted only then

The braces are a Redis Cluster hash tag: the three keys of one kernel live in one slot, so that the
waiters' MGET of all three and the leases' Lua scripts (one key each) run on one node, while the
kernels spread over every slot. The tier is the same on one Redis, a cluster or a sentinel-named
master (redis_url.py); a sentinel failover is an outage like any other, and the tier comes back after.

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

from redis.exceptions import (
    AskError,
    ClusterDownError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    ResponseError,
    TryAgainError,
)

from ..metrics import Metrics
from . import redis_url
from .entry import CorruptEntry, Entry, pack, unpack

log = logging.getLogger("despina.server.redis")
T = TypeVar("T")
PREFIX = "despina:v2:"

# Renew or delete the lease only while it is still ours: after an expiry another daemon may hold it.
_RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
# The lease only where no entry is stored: a daemon that missed before another stored the kernel and let
# its lease go would compile it again (1: leased, 0: held or stored). Both keys share a hash tag.
_ACQUIRE = ("if redis.call('exists', KEYS[1]) == 1 then return 0 end "
            "if redis.call('set', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end return 0")
# A lease no daemon set (no expiry, or a longer one than ARGV[1] ms) goes: it would hold its key forever.
_PLANTED = ("local t = redis.call('pttl', KEYS[1]) if t == -1 or t > tonumber(ARGV[1]) then "
            "return redis.call('del', KEYS[1]) end return 0")
ERROR_MAGIC = b"DSPNE1"
# Answers of a Redis that cannot serve now (a cluster missing a master, resharding, a replica or a demoted
# master written to) rather than of a command of ours gone wrong: failures of Redis, like a lost connection.
UNAVAILABLE = (ClusterDownError, TryAgainError, AskError, ReadOnlyError)
HINTS = {AskError: " (a Redis Cluster node: start the daemon with --redis-cluster)",
         ReadOnlyError: " (a replica: give the master, or its sentinels as redis+sentinel://HOST:PORT/SERVICE)"}


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


def name(kind: str, key: str) -> str:
    """The Redis key of `key`'s record of this kind ("kernel", "lease", "error", "tuning", ...)."""
    return f"{PREFIX}{kind}:{{{key}}}"


class WrongType(Exception):
    """A key holds a value of another Redis type than the daemons write: planted, not a failure of Redis."""


class RedisTier:
    def __init__(self, url: str, metrics: Metrics, ttl_s: int, timeout_s: float, retry_s: float, lease_ms: int,
                 secret: bytes | None = None, max_wait_s: float = 130.0, cluster: bool = False) -> None:
        self.url = redis_url.redacted(url)
        self.secret = secret
        self.max_wait_s = max_wait_s
        self.metrics = metrics
        self.ttl_ms = ttl_s * 1000
        self.timeout_s = timeout_s
        self.retry_s = retry_s
        self.lease_ms = lease_ms
        self.client, self._others = redis_url.connect(redis_url.parse(url, cluster), timeout_s)
        self.up = True
        self._skip_until = 0.0

    async def close(self) -> None:
        await self.client.aclose()
        for other in self._others:
            await other.aclose()

    @property
    def connected(self) -> bool:
        return self.up

    async def _call(self, op: str, fn: Callable[[], Awaitable[T]]) -> T | _Failed:
        if not self.up and time.monotonic() < self._skip_until:
            return FAILED
        try:
            result = await asyncio.wait_for(fn(), self.timeout_s * 2)
        except (RedisError, RedisClusterException, OSError, asyncio.TimeoutError) as e:
            if isinstance(e, ResponseError) and not isinstance(e, UNAVAILABLE):
                if str(e).startswith("WRONGTYPE"):
                    raise WrongType(str(e)) from None
                raise
            self.metrics.redis_errors.labels(op).inc()
            self.metrics.redis_up.set(0)
            if self.up:
                hint = next((h for cls, h in HINTS.items() if isinstance(e, cls)), "")
                log.warning("Redis at %s failed (%s: %s)%s; serving without it, retrying every %.1fs",
                            self.url, type(e).__name__, e, hint, self.retry_s)
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
            blob = await self._call("get", lambda: self.client.get(name("kernel", key)))
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
        asyncio.ensure_future(self._call("delete", lambda: self.client.delete(name("kernel", key))))

    async def put(self, entry: Entry) -> None:
        blob = pack(entry, self.secret)
        await self._call("set", lambda: self.client.set(name("kernel", entry.key), blob, px=self.ttl_ms))

    async def delete(self, key: str) -> bool:
        """Delete `key`'s entry (an operator's request); whether Redis held one."""
        got = await self._call("delete", lambda: self.client.delete(name("kernel", key)))
        return not isinstance(got, _Failed) and bool(got)

    # ---- single-flight ------------------------------------------------------------------------

    async def acquire(self, key: str, owner: str) -> bool | None:
        """True: this daemon compiles `key`; False: another does, or did (`wait` then finds its entry);
        None: Redis did not answer."""
        names = (name("kernel", key), name("lease", key))
        got = await self._call("lease", lambda: self.client.eval(_ACQUIRE, 2, *names, owner, self.lease_ms))
        return None if got is FAILED else got == 1

    async def renew(self, key: str, owner: str) -> None:
        await self._call("lease", lambda: self.client.eval(_RENEW, 1, name("lease", key), owner, self.lease_ms))

    async def release(self, key: str, owner: str) -> None:
        await self._call("lease", lambda: self.client.eval(_RELEASE, 1, name("lease", key), owner))

    def _mac(self, key: str, payload: bytes) -> bytes:
        assert self.secret is not None
        return hmac.new(self.secret, key.encode() + b"\0" + payload, hashlib.sha256).hexdigest().encode()

    async def put_error(self, key: str, code: str, message: str) -> None:
        """Tell the daemons waiting on `key` why it failed; only with a cluster secret, since without
        one they could not tell a daemon's record from one planted in Redis (they compile instead)."""
        record = self.seal("error", key, f"{code}\n{message}".encode())
        if record is not None:
            await self._call("set", lambda: self.client.set(name("error", key), record, px=self.lease_ms))

    def seal(self, kind: str, key: str, payload: bytes) -> bytes | None:
        """An error record of `kind` for `key` that only a daemon with this cluster secret can make;
        None without a secret (waiters could not tell it from one planted in Redis)."""
        if self.secret is None:
            return None
        return ERROR_MAGIC + self._mac(f"{kind}:{key}", payload) + payload

    def unseal(self, kind: str, key: str, record: bytes) -> bytes | None:
        """The payload of a record `seal` made, or None (logged) for one this daemon cannot authenticate."""
        head = len(ERROR_MAGIC) + 64
        payload = record[head:]
        if (self.secret is None or not record.startswith(ERROR_MAGIC)
                or not hmac.compare_digest(self._mac(f"{kind}:{key}", payload), record[len(ERROR_MAGIC):head])):
            log.warning("ignoring a %s record for %s that this daemon cannot authenticate", kind, key)
            return None
        return payload

    def _failure(self, key: str, record: bytes) -> Failure | None:
        payload = self.unseal("error", key, record)
        if payload is None:
            return None
        code, _, message = payload.decode(errors="replace").partition("\n")
        return Failure(code, message)

    async def wait(self, key: str, poll_s: float) -> Entry | Failure | str:
        """Wait while another daemon holds the lease: its entry, its `Failure`, `RETRY` when the lease
        is gone without either (it crashed, Redis failed, an error record this daemon cannot trust) and
        the caller should try again, or `ALONE` after `max_wait_s`: compile without the lease."""
        names = [name(kind, key) for kind in ("kernel", "error", "lease")]
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
