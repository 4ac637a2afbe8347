"""The cache entry's wire form: round trip, and every kind of damage detected."""

from __future__ import annotations

import pytest

from despina.server.cache import CorruptEntry, Entry, MemoryCache
from despina.server.cache.entry import pack, unpack

KEY = "a" * 64


def entry(key: str = KEY, size: int = 100) -> Entry:
    return Entry(key, {"ir": b"module {}", "ptx": b"// ptx", "cubin": bytes(range(256)) * (size // 256 + 1)}, {"name": "k"})


def test_round_trip() -> None:
    e = entry()
    assert unpack(pack(e), KEY) == e


@pytest.mark.parametrize("damage", ["flip_payload", "flip_header", "truncate", "append", "magic", "empty"])
def test_damage_is_detected(damage: str) -> None:
    blob = bytearray(pack(entry()))
    if damage == "flip_payload":
        blob[-1] ^= 1
    elif damage == "flip_header":
        blob[80] ^= 1
    elif damage == "truncate":
        del blob[-5:]
    elif damage == "append":
        blob += b"x"
    elif damage == "magic":
        blob[0] = ord("X")
    else:
        blob = bytearray()
    with pytest.raises(CorruptEntry):
        unpack(bytes(blob), KEY)


def test_wrong_key_is_detected() -> None:
    with pytest.raises(CorruptEntry, match="not"):
        unpack(pack(entry()), "b" * 64)


def test_memory_lru_bounds() -> None:
    cache = MemoryCache(max_entries=2, max_bytes=10_000)
    a, b, c = entry("a" * 64), entry("b" * 64), entry("c" * 64)
    cache.put(a)
    cache.put(b)
    assert cache.get(a.key) is a
    cache.put(c)
    assert cache.get(b.key) is None and len(cache) == 2
    assert [e.key for e in cache.recent(10)] == [c.key, a.key]
    cache.put(entry("d" * 64, size=20_000))  # larger than the whole cache: not kept
    assert len(cache) == 2 and cache.nbytes <= 10_000


def test_cluster_secret_keys_the_digest() -> None:
    """With a cluster secret, an entry is accepted only when written with the same secret: one with a
    plain SHA-256 digest (what anyone can compute) or another secret is refused."""
    secret = b"0123456789abcdef-cluster"
    e = entry()
    assert unpack(pack(e, secret), KEY, secret) == e
    for forged in (pack(e), pack(e, b"another secret of 16+ bytes")):
        with pytest.raises(CorruptEntry, match="HMAC"):
            unpack(forged, KEY, secret)
    with pytest.raises(CorruptEntry, match="SHA-256"):
        unpack(pack(e, secret), KEY)
