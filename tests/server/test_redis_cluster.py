"""The Redis tier on a real Redis Cluster (three masters on loopback): daemons share entries spread over
every master, compile each kernel once between them, refuse forged or planted values, and share tunings."""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from redis.crc import key_slot

from despina.runtime.tunings import tuning_key
from despina.server.cache.redis_tier import name
from despina.server.core import CompileRequest, CompileService
from despina.server.errors import InvalidArgument

from .conftest import Daemon, free_port, unique
from .fake_gpu import NAME
from .faults.test_forged import FORGED, plant
from .kernels import vector_add_ir
from .redis_nodes import Cluster, daemons
from .test_tuning import FAKE_GPU, candidates, client_key, tune

SECRET = b"cluster-secret-for-the-cluster-tests"


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path_factory.mktemp("redis-cluster"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def spread(cluster: Cluster, service: CompileService, per_master: int, **attrs: object) -> list[CompileRequest]:
    """Requests for kernels no cache has seen: `per_master` whose entries fall on each master, in node order."""
    found: list[list[CompileRequest]] = [[] for _ in cluster.nodes]
    while any(len(reqs) < per_master for reqs in found):
        req = CompileRequest(vector_add_ir(salt=unique(), **attrs))
        reqs = found[cluster.master_of(name("kernel", service.key_of(req)))]
        if len(reqs) < per_master:
            reqs.append(req)
    return [req for reqs in found for req in reqs]


def test_entries_spread_over_the_masters_and_serve_every_daemon(redis_cluster: Cluster) -> None:
    async def main() -> tuple[list[str], list[str], list[str], int, int]:
        async with daemons(2, redis_url=redis_cluster.url, redis_cluster=True) as (a, b):
            reqs = spread(redis_cluster, a, 2)
            first = await asyncio.gather(*(a.compile(req) for req in reqs))
            second = await asyncio.gather(*(b.compile(req) for req in reqs))
            return ([r.key for r in first], [r.tier for r in first], [r.tier for r in second],
                    a.stats()["compiles"], b.stats()["compiles"])

    keys, first, second, compiled_a, compiled_b = asyncio.run(main())
    assert first == ["compiled"] * 6 and second == ["redis"] * 6
    assert (compiled_a, compiled_b) == (6, 0)
    for i, key in enumerate(keys):
        # A plain client of one node: it answers MOVED for a key of another node's slots.
        assert redis_cluster.nodes[i // 2].client().exists(name("kernel", key)), i
        assert len({key_slot(name(kind, key).encode()) for kind in ("kernel", "lease", "error")}) == 1


def test_each_kernel_compiles_once_between_two_daemons(redis_cluster: Cluster) -> None:
    async def main() -> tuple[list[str], int, list[str]]:
        async with daemons(2, redis_url=redis_cluster.url, redis_cluster=True) as (a, b):
            reqs = spread(redis_cluster, a, 1, fake_sleep=0.5)  # one kernel on each master, all at once
            results = await asyncio.gather(*(s.compile(req) for req in reqs for s in (a, b) * 4))
            assert a.stats()["redis_errors"] == b.stats()["redis_errors"] == 0
            return ([r.tier for r in results], a.stats()["compiles"] + b.stats()["compiles"],
                    [a.key_of(req) for req in reqs])

    tiers, compiles, keys = asyncio.run(main())
    assert compiles == 3
    assert sorted(set(tiers)) == ["compiled", "redis"]
    client = redis_cluster.client()
    assert not any(client.exists(name("lease", key)) for key in keys)  # every lease released


def test_forged_corrupt_and_planted_values_are_refused(redis_cluster: Cluster) -> None:
    cases = ("sha", "other", "corrupt", "wrongtype", "lease", "error")
    r = redis_cluster.client()

    async def main() -> tuple[dict[str, str], list[tuple[str, bytes]]]:
        async with daemons(2, redis_url=redis_cluster.url, redis_cluster=True, cluster_secret=SECRET) as (a, b):
            reqs = dict(zip(cases, spread(redis_cluster, a, 1) + spread(redis_cluster, a, 1)))
            keys = {case: a.key_of(req) for case, req in reqs.items()}
            await a.compile(reqs["corrupt"])
            blob = bytearray(r.get(name("kernel", keys["corrupt"])))
            blob[len(blob) // 2] ^= 0x40
            r.set(name("kernel", keys["corrupt"]), bytes(blob))
            plant(r, keys)
            answers = await asyncio.wait_for(asyncio.gather(*(b.compile(req) for req in reqs.values())), 20)
            assert b.metrics.value("despina_cache_corrupt_total", tier="redis") == 4  # sha, other, corrupt, wrongtype
            assert b.stats()["redis_connected"]
            return keys, [(answer.tier, answer.cubin) for answer in answers]

    keys, answers = asyncio.run(main())
    for case, (tier, cubin) in zip(cases, answers):
        assert tier == "compiled" and cubin != FORGED["cubin"], case
    assert r.type(name("kernel", keys["wrongtype"])) == b"string"  # repaired with a real entry
    assert r.get(name("lease", keys["lease"])) is None  # deleted, then taken and released by B


def test_a_failure_reaches_the_daemon_waiting_on_the_lease(redis_cluster: Cluster) -> None:
    async def main() -> None:
        async with daemons(2, redis_url=redis_cluster.url, redis_cluster=True, cluster_secret=SECRET) as (a, b):
            req = CompileRequest(vector_add_ir(salt=unique(), fake_sleep=0.5, fake_fail=True))
            lease = name("lease", a.key_of(req))
            first = asyncio.ensure_future(a.compile(req))
            while not redis_cluster.client().exists(lease):
                await asyncio.sleep(0.01)
            with pytest.raises(InvalidArgument, match="refuses"):
                await b.compile(req)  # from A's error record, MAC'd with the secret
            with pytest.raises(InvalidArgument, match="refuses"):
                await first
            assert b.stats()["compiles"] == 0

    asyncio.run(main())


def test_tunings_are_shared_once_and_cleared_on_every_master(redis_cluster: Cluster) -> None:
    keys: list[str] = []
    while len(keys) < 2 * len(redis_cluster.nodes):  # two tunings whose records fall on each master
        key = client_key()
        master = redis_cluster.master_of(name("tuning", tuning_key(key, NAME, 0)))
        if sum(redis_cluster.master_of(name("tuning", tuning_key(k, NAME, 0))) == master for k in keys) < 2:
            keys.append(key)

    async def main() -> tuple[list[str], int, int]:
        async with daemons(2, redis_url=redis_cluster.url, redis_cluster=True, executor=FAKE_GPU) as (a, b):
            requests = [tune(candidates(warps=(1, 2)), key) for key in keys]
            answers = await asyncio.gather(*(s.tuner.tune(req) for req in requests for s in (a, b)))
            benchmarks = a.stats()["benchmarks"] + b.stats()["benchmarks"]
            stored = [answer.key for answer in answers[::2]]
            assert stored == [tuning_key(key, NAME, 0) for key in keys]
            assert all(redis_cluster.client().exists(name("tuning", key)) for key in stored)
            assert await b.tuner.clear() >= len(keys)
            return [answer.tier for answer in answers], benchmarks, sum(
                redis_cluster.client().exists(name("tuning", key)) for key in stored)

    tiers, benchmarks, left = asyncio.run(main())
    assert benchmarks == 2 * len(keys)  # two configs per tuning, each tuning measured by one daemon
    assert set(tiers) <= {"tuned", "redis"} and "tuned" in tiers
    assert left == 0


def test_despina_serve_redis_cluster(redis_cluster: Cluster, tmp_path: Path) -> None:
    d = Daemon(tmp_path, redis_cluster.url, extra=("--redis-cluster",))
    try:
        async def keys() -> list[CompileRequest]:
            async with daemons(1) as (scout,):
                return spread(redis_cluster, scout, 1)

        reqs = asyncio.run(keys())
        for i, req in enumerate(reqs):
            answer = httpx.post(d.http + "/v1/compile", json={"ir": base64.b64encode(req.ir).decode()}, timeout=30)
            assert answer.status_code == 200, answer.text
            assert redis_cluster.nodes[i].client().exists(name("kernel", answer.json()["key"]))
        assert d.metric("despina_redis_errors_total") == 0
        assert "(cluster)" in d.log.read_text()
    finally:
        d.stop()


def test_a_cluster_node_without_the_flag_fails_open_naming_it(redis_cluster: Cluster,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> tuple[str, float]:
        async with daemons(1, redis_url=redis_cluster.nodes[0].url) as (s,):
            req = next(req for req in spread(redis_cluster, s, 1)
                       if redis_cluster.master_of(name("kernel", s.key_of(req))) != 0)
            tier = (await s.compile(req)).tier
            return tier, s.metrics.value("despina_redis_errors_total", op="get")

    with caplog.at_level(logging.WARNING, "despina.server.redis"):
        tier, errors = asyncio.run(main())
    assert tier == "compiled" and errors == 1
    assert "start the daemon with --redis-cluster" in caplog.text


def test_an_unreachable_seed_fails_open() -> None:
    async def main() -> tuple[str, dict[str, object]]:
        async with daemons(1, redis_url=f"redis://127.0.0.1:{free_port()}", redis_cluster=True) as (s,):
            return (await s.compile(CompileRequest(vector_add_ir(salt=unique())))).tier, s.stats()

    tier, stats = asyncio.run(main())
    assert tier == "compiled" and not stats["redis_connected"] and stats["redis_errors"] >= 1
