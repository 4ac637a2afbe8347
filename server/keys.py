"""The cache key: what a compiled kernel depends on, hashed.

    key = compile_key(codec.key_bytes(ir_bytes), target="sm_90", options=CompileOptions(num_warps=8),
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

from despina.compiler.options import CompileOptions

KEY_VERSION = 4  # 4: the options as CompileOptions.key(), every field
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
    options: CompileOptions,
    specialization: Mapping[str, str],
    toolchain: str,
) -> str:
    """64 hex digits naming one compiled kernel; `ir` is the request's IR as `codec.key_bytes` gives it;
    `options` count by every field (`CompileOptions.key`)."""
    header = {
        "v": KEY_VERSION,
        "target": target,
        "options": options.key(),
        "specialization": sorted(specialization.items()),
        "toolchain": toolchain,
    }
    h = hashlib.sha256(json.dumps(header, sort_keys=True).encode())
    h.update(b"\0")
    h.update(ir)
    return h.hexdigest()


def is_key(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)
