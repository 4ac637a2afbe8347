"""The daemon's disk tier: restarts answer from disk, corrupt files are dropped and recompiled,
Redis hits and compiles fill it, and it stays within its bound, least recently used first."""

from __future__ import annotations

import argparse
import base64
import os
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from despina.proto import service_pb2 as pb
from despina.runtime import cache
from despina.server import main
from despina.server.cache.disk import DiskTier
from despina.server.cache.entry import Entry
from despina.server.core import CompileRequest, CompileService
from despina.server.metrics import Metrics

from .conftest import Daemon, RedisProcess, unique, with_service
from .kernels import vector_add_ir
from .test_grpc import stub


def entry(key: str, size: int = 1000, **metadata: Any) -> Entry:
    stages = {"ir": b"module {}\n", "ptx": b".version 8.7\n" + b"//" * size, "cubin": os.urandom(size)}
    return Entry(key, stages, {"name": "k", "shared": 0, "target": "sm_90", **metadata}, created=1234.5)


def key(n: int) -> str:
    return f"{n:064x}"


def test_round_trip_through_the_client_cache_format(tmp_path: Path) -> None:
    disk = DiskTier(tmp_path, 1 << 30, Metrics())
    disk.scan()
    e = entry(key(7), num_warps=4, nested={"a": [1, 2]})
    assert disk.get(e.key) is None
    disk.put(e)
    got = disk.get(e.key)
    assert got == e  # stages, metadata and created alike
    path = tmp_path / e.key[:2] / f"{e.key}.cubin"
    data = path.read_bytes()
    assert cache.decode(e.key, data) is not None  # the client's own format, digest and all
    assert data.startswith(cache.MAGIC) and b"pickle" not in data and b"\x80\x04" not in data[:64]
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left
    assert (disk.entries, disk.nbytes) == (1, len(data))


def test_corrupt_and_torn_files_are_discarded(tmp_path: Path) -> None:
    metrics = Metrics()
    disk = DiskTier(tmp_path, 1 << 30, metrics)
    disk.scan()
    for n, damage in enumerate(("flip", "truncate", "misfile")):
        e = entry(key(n + 1))
        disk.put(e)
        path = disk.files.path(e.key)
        data = bytearray(path.read_bytes())
        if damage == "flip":
            data[-5] ^= 0x01
        elif damage == "truncate":
            del data[len(data) // 2:]
        else:  # another key's whole, valid entry under this key's name
            data = bytearray(cache.encode(key(99), disk.files.get(e.key) or cache.Binary("x", b"", {})))
        path.write_bytes(bytes(data))
        assert disk.get(e.key) is None, damage
        assert not path.exists(), damage
        assert metrics.value("despina_cache_corrupt_total", tier="disk") == n + 1
    assert disk.entries == 0


def test_bounded_least_recently_used_first(tmp_path: Path) -> None:
    metrics = Metrics()
    disk = DiskTier(tmp_path, 1 << 30, metrics)
    disk.scan()
    entries = [entry(key(n), size=2000) for n in range(5)]
    for n, e in enumerate(entries):
        disk.put(e)
        os.utime(disk.files.path(e.key), (1000 + n, 1000 + n))  # written in order, a second apart
    size = disk.files.path(entries[0].key).stat().st_size
    assert disk.get(entries[0].key) is not None  # the oldest, used again: now the most recent
    disk.max_bytes = int(size * 4.5)  # room for 4; a write past it trims to 90%: 4 files
    disk.put(entry(key(5), size=2000))
    present = [n for n in range(6) if disk.files.path(key(n)).exists()]
    assert present == [0, 3, 4, 5]  # 1 and 2 were the least recently used
    assert metrics.value("despina_disk_evictions_total") == 2
    assert (disk.entries, disk.nbytes) == (4, 4 * size)
    assert metrics.value("despina_disk_bytes") == 4 * size

    restarted = DiskTier(tmp_path, size * 2, Metrics(), in_use=lambda k: k == key(3))
    restarted.scan()  # a smaller bound at start trims at once; a kernel in memory goes last
    assert restarted.entries == 1 and restarted.files.path(key(3)).exists()


def test_stale_temporary_files_are_removed(tmp_path: Path) -> None:
    (tmp_path / "ab").mkdir()
    stale, fresh = tmp_path / "ab" / ".abcd.1.tmp", tmp_path / "ab" / ".abcd.2.tmp"
    stale.write_bytes(b"x")
    fresh.write_bytes(b"x")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    disk = DiskTier(tmp_path, 1 << 30, Metrics())
    disk.scan()
    assert not stale.exists() and fresh.exists() and disk.entries == 0


def test_restarted_service_answers_from_disk(tmp_path: Path) -> None:
    req = CompileRequest(vector_add_ir(salt=unique()))

    async def first(service: CompileService) -> list[str]:
        return [(await service.compile(req)).tier, (await service.compile(req)).tier]

    async def second(service: CompileService) -> tuple[list[str], dict[str, Any]]:
        a = await service.compile(req)
        b = await service.compile(req)
        assert a.cubin == b.cubin and a.metadata["name"] == "add_kernel"
        assert b"add_kernel" in await service.get_artifact(a.key, "ir")
        return [a.tier, b.tier], service.stats()

    assert with_service(first, disk_dir=str(tmp_path)) == ["compiled", "memory"]
    tiers, stats = with_service(second, disk_dir=str(tmp_path))
    assert tiers == ["disk", "memory"]
    assert stats["hits"]["disk"] == 1 and stats["compiles"] == 0
    assert stats["disk_entries"] == 1 and stats["disk_bytes"] > 0


def test_corrupt_disk_entry_is_recompiled(tmp_path: Path) -> None:
    req = CompileRequest(vector_add_ir(salt=unique()))
    key_ = with_service(lambda s: s.compile(req), disk_dir=str(tmp_path)).key
    path = tmp_path / key_[:2] / f"{key_}.cubin"
    good = path.read_bytes()
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0xFF
    path.write_bytes(bytes(bad))

    async def body(service: CompileService) -> tuple[str, float, float]:
        tier = (await service.compile(req)).tier
        m = service.metrics
        return tier, m.value("despina_cache_corrupt_total", tier="disk"), m.value("despina_compiles_total", outcome="ok")

    assert with_service(body, disk_dir=str(tmp_path)) == ("compiled", 1.0, 1.0)
    assert cache.decode(key_, path.read_bytes()) is not None  # replaced by the recompiled entry
    assert with_service(lambda s: s.compile(req), disk_dir=str(tmp_path)).tier == "disk"


def test_redis_hits_fill_the_disk(tmp_path: Path, shared_redis: RedisProcess) -> None:
    req = CompileRequest(vector_add_ir(salt=unique()))
    assert with_service(lambda s: s.compile(req), redis_url=shared_redis.url).tier == "compiled"
    assert with_service(lambda s: s.compile(req), redis_url=shared_redis.url, disk_dir=str(tmp_path)).tier == "redis"
    # Redis gone: the daemon runs on its memory and disk tiers alone.
    assert with_service(lambda s: s.compile(req), disk_dir=str(tmp_path)).tier == "disk"


def test_unwritable_disk_fails_open(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")

    async def body(service: CompileService) -> tuple[str, float]:
        tier = (await service.compile(CompileRequest(vector_add_ir(salt=unique())))).tier
        return tier, service.metrics.value("despina_disk_errors_total", op="write")

    assert with_service(body, disk_dir=str(blocker / "cache")) == ("compiled", 1.0)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    main.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_cache_dir_flags(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DESPINA_CACHE_DIR", str(tmp_path))
    assert main.config_from(parse()).disk_dir == str(tmp_path / "daemon")
    monkeypatch.delenv("DESPINA_CACHE_DIR")
    assert main.config_from(parse()).disk_dir == str(Path.home() / ".cache" / "despina" / "daemon")
    assert main.config_from(parse("--cache-dir", "/srv/k")).disk_dir == "/srv/k"
    assert main.config_from(parse("--cache-dir", "")).disk_dir is None
    assert main.config_from(parse("--no-disk-cache")).disk_dir is None
    assert main.config_from(parse("--cache-max-bytes", "4096")).disk_bytes == 4096


def test_daemon_restarted_on_the_same_folder(tmp_path: Path) -> None:
    """`despina serve` with no Redis: memory and disk alone; a restart answers from disk, over gRPC
    and HTTP, and a file corrupted while it was down is recompiled."""
    folder = tmp_path / "kernels"
    ir, other = vector_add_ir(salt=unique()), vector_add_ir(salt=unique())
    d = Daemon(tmp_path, cache_dir=folder)
    try:
        assert stub(d).Compile(pb.CompileRequest(ir=ir), timeout=30).tier == pb.COMPILED
        compiled = stub(d).Compile(pb.CompileRequest(ir=other), timeout=30)
    finally:
        d.stop()
    path = folder / compiled.key[:2] / f"{compiled.key}.cubin"
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x10
    path.write_bytes(bytes(data))

    d = Daemon(tmp_path, cache_dir=folder)
    try:
        r = stub(d).Compile(pb.CompileRequest(ir=ir), timeout=30)
        assert r.tier == pb.DISK
        stats = stub(d).Stats(pb.StatsRequest())
        assert stats.hits["disk"] == 1 and stats.disk_entries == 2 and stats.disk_bytes > 0
        reply = httpx.post(d.http + "/v1/compile", json={"ir": base64.b64encode(other).decode()}, timeout=30).json()
        assert reply["tier"] == "compiled" and base64.b64decode(reply["cubin"]) == compiled.cubin
        assert d.metric("despina_cache_corrupt_total", tier="disk") == 1
        assert d.metric("despina_cache_answers_total", tier="disk") == 1
        assert d.metric("despina_disk_entries") == 2
        assert httpx.get(d.http + "/v1/stats").json()["hits"]["disk"] == 1
    finally:
        d.stop()


def test_daemon_without_disk_cache(tmp_path: Path) -> None:
    ir = vector_add_ir(salt=unique())
    for flags in (("--no-disk-cache",), ("--cache-dir", "")):
        d = Daemon(tmp_path, extra=flags)
        try:
            assert stub(d).Compile(pb.CompileRequest(ir=ir), timeout=30).tier == pb.COMPILED
            assert stub(d).Stats(pb.StatsRequest()).disk_entries == 0
        finally:
            d.stop()
    assert not list(tmp_path.glob("disk-*"))  # no folder was made for a disk cache
