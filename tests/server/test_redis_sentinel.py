"""The Redis tier through Redis Sentinel (a master, its replica and a sentinel on loopback): daemons find
the master by asking the sentinels, and a failover is an outage they serve through, then recover from."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from despina.server.cache.redis_tier import name
from despina.server.core import CompileRequest

from .conftest import Daemon, unique
from .kernels import vector_add_ir
from .redis_nodes import SentinelSet, daemons


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[SentinelSet]:
    nodes = SentinelSet(tmp_path)
    try:
        nodes.start()
        yield nodes
    finally:
        nodes.stop()


def test_despina_serve_finds_the_master_through_the_sentinels(sentinels: SentinelSet, tmp_path: Path) -> None:
    url = sentinels.url(dead_first=True)  # the first sentinel listed is down: the daemons ask the next
    d = Daemon(tmp_path, url)
    try:
        req = CompileRequest(vector_add_ir(salt=unique(), fake_sleep=0.5))

        def over_http() -> dict[str, str]:
            answer = httpx.post(d.http + "/v1/compile", json={"ir": base64.b64encode(req.ir).decode()}, timeout=30)
            assert answer.status_code == 200, answer.text
            return dict(answer.json())

        async def main() -> tuple[list[str], str, int]:
            async with daemons(1, redis_url=url) as (b,):
                first, second = await asyncio.gather(asyncio.to_thread(over_http), b.compile(req))
                return sorted([first["tier"], second.tier]), second.key, b.stats()["compiles"]

        tiers, key, compiled_here = asyncio.run(main())
        assert tiers == ["compiled", "redis"]
        assert compiled_here + d.metric("despina_compiles_total") == 1
        assert sentinels.master.client().exists(name("kernel", key))
        assert d.metric("despina_redis_errors_total") == 0
        assert f"Redis {url}" in d.log.read_text()
    finally:
        d.stop()


def test_a_failover_is_an_outage_then_recovery(sentinels: SentinelSet) -> None:
    before = CompileRequest(vector_add_ir(salt=unique()))

    async def main() -> tuple[CompileRequest, list[str], int, bool]:
        async with daemons(1, redis_url=sentinels.url(), redis_retry_s=0.2) as (a,):
            key = (await a.compile(before)).key
            assert sentinels.master.client().execute_command("WAIT", 1, 5000) == 1  # on the replica too
            assert sentinels.replica.client().exists(name("kernel", key))
            failing = asyncio.ensure_future(asyncio.to_thread(sentinels.fail_over))
            tiers, deadline = [], time.monotonic() + 30
            while time.monotonic() < deadline:  # the daemon serves on while the sentinel promotes the replica
                req = CompileRequest(vector_add_ir(salt=unique()))
                answer = await a.compile(req)
                tiers.append(answer.tier)
                if failing.done() and sentinels.replica.client().exists(name("kernel", answer.key)):
                    break
                await asyncio.sleep(0.05)
            await failing
            return req, tiers, a.stats()["redis_errors"], a.stats()["redis_connected"]

    after, tiers, errors, connected = asyncio.run(main())
    assert set(tiers) == {"compiled"} and errors >= 1 and connected

    async def fresh_daemon() -> list[str]:
        async with daemons(1, redis_url=sentinels.url()) as (b,):
            return [(await b.compile(req)).tier for req in (before, after)]

    # Both entries are on the new master: the one written before the failover and the one after it.
    assert asyncio.run(fresh_daemon()) == ["redis", "redis"]
