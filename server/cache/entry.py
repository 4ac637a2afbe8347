"""A cached kernel and its wire form: a JSON header and the stages' raw bytes, under one SHA-256
(an HMAC-SHA-256 keyed by the cluster secret, when the daemons have one).

    blob = pack(entry)          # b"DSPNK1" + header length + header + stage bytes
    entry = unpack(blob, key)   # CorruptEntry when anything does not check out

No pickle: a blob is data only, so whoever can write the cache cannot run code on its readers,
and the digest covers the header and every stage together, so a reader never pairs one
compile's cubin with another's metadata. With a cluster secret (`despina serve --cluster-secret-file`),
write access to Redis or the folder is not enough to plant a kernel that every daemon serves.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import struct
import time
from dataclasses import dataclass, field
from typing import Any

STAGES = ("ir", "gpuir", "llir", "ptx", "sass", "cubin", "lines")
TEXT_STAGES = frozenset(STAGES) - {"cubin", "lines"}  # `lines` is JSON (server/lines.py)
MAGIC = b"DSPNK1"
_LEN = struct.Struct(">I")
MAX_HEADER = 1 << 20


class CorruptEntry(ValueError):
    """The blob is not an intact entry for the key asked for; the message says what is wrong."""


@dataclass(frozen=True)
class Entry:
    """One compiled kernel: every stage's output (text stages UTF-8 encoded) and its metadata."""

    key: str
    stages: dict[str, bytes]
    metadata: dict[str, Any]
    created: float = field(default_factory=time.time)

    @property
    def cubin(self) -> bytes:
        return self.stages.get("cubin", b"")

    @property
    def ptx(self) -> str:
        return self.stages.get("ptx", b"").decode()

    @functools.cached_property
    def digest(self) -> str:
        """SHA-256 of the cubin, which the client checks before it keeps the cubin: worked out once, not on
        every hit (55 us for a 100 KB cubin)."""
        return hashlib.sha256(self.cubin).hexdigest()

    @property
    def nbytes(self) -> int:
        return sum(len(v) for v in self.stages.values()) + 256



def _digest(header: bytes, payload: bytes, secret: bytes | None) -> str:
    h = hmac.new(secret, digestmod=hashlib.sha256) if secret else hashlib.sha256()
    h.update(_LEN.pack(len(header)) + header)
    h.update(payload)
    return h.hexdigest()


def pack(entry: Entry, secret: bytes | None = None) -> bytes:
    names = [s for s in STAGES if s in entry.stages]
    header = {
        "key": entry.key,
        "created": entry.created,
        "metadata": entry.metadata,
        "stages": [[s, len(entry.stages[s])] for s in names],
    }
    head = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    payload = b"".join(entry.stages[s] for s in names)
    digest = _digest(head, payload, secret).encode()
    return MAGIC + digest + _LEN.pack(len(head)) + head + payload


def unpack(blob: bytes, key: str, secret: bytes | None = None) -> Entry:
    """The entry `pack` wrote for `key` (with the same `secret`); `CorruptEntry` for a torn, altered,
    misfiled or forged blob."""
    fixed = len(MAGIC) + 64 + _LEN.size
    if len(blob) < fixed or not blob.startswith(MAGIC):
        raise CorruptEntry("not a despina cache entry (bad magic or too short)")
    digest = blob[len(MAGIC) : len(MAGIC) + 64]
    (size,) = _LEN.unpack_from(blob, len(MAGIC) + 64)
    if size > MAX_HEADER or fixed + size > len(blob):
        raise CorruptEntry(f"header length {size} does not fit the {len(blob)}-byte entry")
    head, payload = blob[fixed : fixed + size], blob[fixed + size :]
    if not hmac.compare_digest(_digest(head, payload, secret).encode(), digest):
        raise CorruptEntry("HMAC-SHA-256 mismatch (not written with this cluster secret)" if secret
                           else "SHA-256 digest mismatch")
    try:
        header = json.loads(head)
        stages: dict[str, bytes] = {}
        offset = 0
        for name, length in header["stages"]:
            if name not in STAGES or not isinstance(length, int):
                raise CorruptEntry(f"unknown stage {name!r}")
            stages[name] = payload[offset : offset + length]
            offset += length
        entry = Entry(header["key"], stages, dict(header["metadata"]), float(header["created"]))
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptEntry(f"malformed header: {e}") from None
    if offset != len(payload):
        raise CorruptEntry(f"stages hold {offset} bytes, the payload {len(payload)}")
    if entry.key != key:
        raise CorruptEntry(f"entry is for key {entry.key[:16]}..., not {key[:16]}...")
    return entry
