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
from typing import cast

from despina.compiler.ir import codec
from despina.compiler.ir.wire import top_records
from despina.compiler.options import CompileOptions
from despina.proto import ir_pb2

KEY_VERSION = 4  # 4: the options as CompileOptions.key(), every field
_TOOLS = ("despina", "llvmlite", "nvidia-nvjitlink", "nvidia-nvjitlink-cu12", "cuda-bindings")


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "-"


@cache
def toolchain(compiler: str) -> str:
    """The versions of despina, LLVM, nvJitLink and ptxas (which assembles kernels using setmaxnreg), and the
    compiler entry point, as one string."""
    from despina.compiler.backends.nvptx import ptxas

    return ";".join(f"{d}={_version(d)}" for d in _TOOLS) + f";ptxas={ptxas.identity()};compiler={compiler}"


# A module's top-level records that `codec.key_bytes` rewrites (the location table) or leaves out (the source).
_REWRITTEN = {ir_pb2.Module.DESCRIPTOR.fields_by_name[name].number for name in ("locations", "source")}


def key_pieces(ir: bytes | memoryview) -> list[bytes | memoryview]:
    """`codec.key_bytes(ir)` as the pieces it joins, the functions' records as views of `ir`: hashed piece by
    piece, a large IR is never copied (for an 8 MiB one, `key_bytes` made two copies holding the GIL, 2-5 ms
    each on a busy 2-core host, during which the event loop could not answer a cache hit). The records are
    independent: each is what `key_bytes` makes of it alone."""
    view = memoryview(ir)
    records = top_records(cast(bytes, view), codec._MAX_TOP_LEVEL, "functions and module attributes")  # it only indexes
    return [codec.key_bytes(bytes(view[start:end])) if tag >> 3 in _REWRITTEN else view[start:end]
            for tag, start, _, end in records]


def compile_key(
    ir: bytes | list[bytes | memoryview],
    target: str,
    options: CompileOptions,
    specialization: Mapping[str, str],
    toolchain: str,
) -> str:
    """64 hex digits naming one compiled kernel; `ir` is the request's IR as `codec.key_bytes` gives it (or
    `key_pieces`, in pieces); `options` count by every field (`CompileOptions.key`)."""
    header = {
        "v": KEY_VERSION,
        "target": target,
        "options": options.key(),
        "specialization": sorted(specialization.items()),
        "toolchain": toolchain,
    }
    h = hashlib.sha256(json.dumps(header, sort_keys=True).encode())
    h.update(b"\0")
    for piece in [ir] if isinstance(ir, bytes) else ir:
        h.update(piece)
    return h.hexdigest()


def is_key(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)
