"""The cache key: what a compiled kernel depends on, hashed.

    key = compile_key(codec.key_bytes(ir_bytes), target="sm_90", num_warps=4, num_stages=3, debug=False,
                      specialization={}, toolchain=toolchain())

The IR's wire bytes are deterministic (`codec.encode`), so the same kernel gives the same key in
every process; `codec.key_bytes` leaves out its source locations, so the same kernel from two
checkouts gives the same key too. The toolchain string pins the versions of everything that turns
IR into a cubin.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import cache
from importlib import metadata

KEY_VERSION = 3
_TOOLS = ("despina", "llvmlite", "nvidia-nvjitlink", "nvidia-nvjitlink-cu12", "cuda-bindings")


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "-"


@cache
def toolchain(compiler: str) -> str:
    """The versions of despina, LLVM and nvJitLink, and the compiler entry point, as one string."""
    return ";".join(f"{d}={_version(d)}" for d in _TOOLS) + f";compiler={compiler}"


def compile_key(
    ir: bytes,
    target: str,
    num_warps: int,
    num_stages: int,
    debug: bool,
    specialization: Mapping[str, str],
    toolchain: str,
) -> str:
    """64 hex digits naming one compiled kernel; `ir` is the request's IR as `codec.key_bytes` gives it."""
    header = {
        "v": KEY_VERSION,
        "target": target,
        "num_warps": num_warps,
        "num_stages": num_stages,
        "debug": debug,
        "specialization": sorted(specialization.items()),
        "toolchain": toolchain,
    }
    h = hashlib.sha256(json.dumps(header, sort_keys=True).encode())
    h.update(b"\0")
    h.update(ir)
    return h.hexdigest()


def is_key(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)
