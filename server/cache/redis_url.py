"""Where the shared tier lives: one Redis, a Redis Cluster found from one seed node, or the master that
Redis Sentinel names, from `despina serve --redis-url URL [--redis-cluster]`.

    redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]     one Redis; rediss:// over TLS, unix:///PATH?db=N a socket
    redis://HOST:PORT  with --redis-cluster          a Redis Cluster: any one node, the client finds the rest
    redis+sentinel://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/SERVICE[/DB]
                                                     the master the sentinels name for SERVICE; the password
                                                     is the master's (sentinels are asked without one)

    target = parse(url, cluster=False)   # ValueError saying what is wrong; nothing is connected
    client, others = connect(target, timeout_s)
    redacted(url)                        # the URL with its password hidden, for logs and errors
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

SENTINEL_PORT = 26379
SENTINEL = "redis+sentinel"
FORMS = ("redis://HOST:PORT/DB, rediss://HOST:PORT/DB, unix://PATH or "
         "redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE[/DB]")
_PASSWORD = re.compile(r"(://[^:/@]*:)[^@]*@")


@dataclass(frozen=True)
class Target:
    """A checked `--redis-url`: `mode` is "single", "cluster" or "sentinel"; the sentinel fields are
    parsed here since redis-py reads no sentinel URL."""

    url: str
    mode: str
    sentinels: tuple[tuple[str, int], ...] = ()
    service: str = ""
    db: int = 0
    username: str | None = None
    password: str | None = None


def redacted(url: str) -> str:
    return _PASSWORD.sub(r"\1***@", url)


def parse(url: str, cluster: bool = False) -> Target:
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in ("redis", "rediss", "unix", SENTINEL):
        raise ValueError(f"unknown scheme {scheme + sep or url!r}; use {FORMS}")
    if scheme == SENTINEL:
        if cluster:
            raise ValueError("--redis-cluster takes one node of the cluster as redis://HOST:PORT, not a sentinel URL")
        return _sentinel(rest)
    try:  # parses only: no connection is made
        db = aioredis.ConnectionPool.from_url(url).connection_kwargs.get("db", 0)
    except (ValueError, TypeError) as e:
        raise ValueError(str(e)) from None
    if not cluster:
        return Target(url, "single")
    if scheme == "unix":
        raise ValueError("a Redis Cluster is reached over TCP: give one of its nodes as redis://HOST:PORT")
    if int(db) != 0:
        raise ValueError(f"a Redis Cluster has database 0 only, not {db}")
    return Target(url, "cluster")


def _sentinel(rest: str) -> Target:
    if "?" in rest or "#" in rest:
        raise ValueError("a sentinel URL takes no query or fragment")
    netloc, _, path = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = userinfo.partition(":")
        username, password = unquote(user) or None, unquote(secret) if colon else None
    sentinels = tuple(_address(part) for part in hosts.split(","))
    parts = path.split("/") if path else []
    if not parts or not parts[0] or len(parts) > 2:
        raise ValueError(f"name the service after the sentinels, as in {SENTINEL}://HOST:PORT/mymaster[/DB]")
    db = 0
    if len(parts) == 2:
        if not parts[1].isdigit():
            raise ValueError(f"the database after the service is a number, not {parts[1]!r}")
        db = int(parts[1])
    return Target(SENTINEL + "://" + rest, "sentinel", sentinels, unquote(parts[0]), db, username, password)


def _address(part: str) -> tuple[str, int]:
    host, port = part, ""
    if part.startswith("["):  # [IPv6]:PORT
        host, _, tail = part[1:].partition("]")
        if tail and not tail.startswith(":"):
            raise ValueError(f"sentinel address {part!r} is not [IPv6]:PORT")
        port = tail[1:]
    elif ":" in part:
        host, _, port = part.rpartition(":")
    if not host:
        raise ValueError(f"a sentinel address is empty in {part!r}; give HOST:PORT[,HOST:PORT...]")
    if not port:
        return host, SENTINEL_PORT
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"sentinel port {port!r} is not a number 1-65535")
    return host, int(port)


def connect(target: Target, timeout_s: float) -> tuple[Any, list[Any]]:
    """The asyncio client for `target` and the other clients to close with it (the sentinels).
    Nothing connects until the first command."""
    timeouts: dict[str, Any] = {"socket_timeout": timeout_s, "socket_connect_timeout": timeout_s}
    if target.mode == "cluster":
        from redis.asyncio.cluster import RedisCluster

        # One immediate retry: after a MOVED or a node's failure the client reloads the slot map first.
        return RedisCluster.from_url(target.url, retry=Retry(NoBackoff(), 1), **timeouts), []
    no_retry = Retry(NoBackoff(), 0)  # a failed call fails open at once (RedisTier._call)
    if target.mode == "sentinel":
        from redis.asyncio.sentinel import Sentinel

        sentinel = Sentinel(list(target.sentinels), sentinel_kwargs=dict(timeouts, retry=no_retry),
                            db=target.db, username=target.username, password=target.password, retry=no_retry,
                            **timeouts)
        # Every new connection asks the sentinels for the master, and one that answers READONLY (a
        # demoted master) is dropped: a failover is an outage of Redis like any other, then recovery.
        return sentinel.master_for(target.service), list(sentinel.sentinels)
    return aioredis.from_url(target.url, retry=no_retry, **timeouts), []
