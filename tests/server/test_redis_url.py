"""`--redis-url` (with `--redis-cluster`): every form parsed without connecting, and each mistake one clear
ValueError; passwords hidden from logs."""

from __future__ import annotations

import pytest

from despina.server.cache.redis_url import SENTINEL_PORT, Target, connect, parse, redacted


def test_single_and_cluster_urls() -> None:
    assert parse("redis://cache:6379/2") == Target("redis://cache:6379/2", "single")
    assert parse("unix:///run/redis.sock?db=1").mode == "single"
    assert parse("rediss://:pw@cache:6380/0", cluster=True) == Target("rediss://:pw@cache:6380/0", "cluster")
    assert parse("redis://seed:7000", cluster=True).mode == "cluster"


def test_sentinel_urls() -> None:
    t = parse("redis+sentinel://:s%40cret@10.0.0.1:26380,sentinel-b,[::1]:26381/mymaster/3")
    assert t.mode == "sentinel" and t.service == "mymaster" and t.db == 3
    assert t.sentinels == (("10.0.0.1", 26380), ("sentinel-b", SENTINEL_PORT), ("::1", 26381))
    assert (t.username, t.password) == (None, "s@cret")
    t = parse("REDIS+SENTINEL://despina:pw@host:1/cache")
    assert (t.username, t.password, t.db, t.sentinels) == ("despina", "pw", 0, (("host", 1),))


BAD = [
    ("foo://x", False, "unknown scheme 'foo://'"),
    ("cache:6379", False, "unknown scheme"),
    ("redis://host:notaport/0", False, "Port"),
    ("redis+sentinel://host:26379", False, "name the service"),
    ("redis+sentinel://host:26379/", False, "name the service"),
    ("redis+sentinel://host:26379/svc/0/extra", False, "name the service"),
    ("redis+sentinel://host:26379/svc/zero", False, "is a number"),
    ("redis+sentinel://host:99999/svc", False, "1-65535"),
    ("redis+sentinel://host:26379,,other/svc", False, "is empty"),
    ("redis+sentinel://[::1]x/svc", False, "[IPv6]:PORT"),
    ("redis+sentinel://host/svc?db=1", False, "no query"),
    ("redis+sentinel://host/svc", True, "not a sentinel URL"),
    ("unix:///run/redis.sock", True, "over TCP"),
    ("redis://seed:7000/1", True, "database 0 only"),
]


@pytest.mark.parametrize("url,cluster,message", BAD, ids=[u + (" cluster" if c else "") for u, c, _ in BAD])
def test_mistakes_are_named(url: str, cluster: bool, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("?", r"\?")):
        parse(url, cluster)


def test_passwords_are_hidden() -> None:
    assert redacted("redis://:hunter2@cache:6379/0") == "redis://:***@cache:6379/0"
    assert redacted("rediss://user:hunter2@cache/0") == "rediss://user:***@cache/0"
    assert redacted("redis+sentinel://:pw@a:1,b:2/svc") == "redis+sentinel://:***@a:1,b:2/svc"
    assert redacted("redis://cache:6379/0") == "redis://cache:6379/0"


def test_sentinel_password_goes_to_the_master_only() -> None:
    client, sentinels = connect(parse("redis+sentinel://:pw@a:1,b:2/svc/4"), 0.5)
    kwargs = client.connection_pool.connection_kwargs
    assert (kwargs["password"], kwargs["db"], kwargs["socket_timeout"]) == ("pw", 4, 0.5)
    assert [s.connection_pool.connection_kwargs.get("password") for s in sentinels] == [None, None]
    assert [s.connection_pool.connection_kwargs["port"] for s in sentinels] == [1, 2]
