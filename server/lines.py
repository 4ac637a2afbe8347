"""A cached kernel's line maps: which source line each line of its tile IR, GPU IR, LLVM IR, PTX and
SASS came from, and the source text the client sent, for a viewer that links them both ways.

    table = await service.get_lines(key)   # GET /v1/kernels/{key}/lines, GetArtifact stage "lines"
    table == {"source": {"file": "/home/me/k.py", "first_line": 5, "text": ["@despina.jit", ...]},
              "stages": {"ir": {"12": 9, ...}, "gpuir": {...}, "llir": {...}, "ptx": {...}, "sass": {...}}}

The backend writes every map but SASS's at compile time (`despina.compiler.backends.nvptx.lines`),
into the entry's `lines` stage. The SASS map comes with the SASS: the first request for either runs
nvdisasm once and keeps both in every tier. A stage without a map is absent: on a daemon without
nvdisasm, SASS's; for a kernel whose client sent no source text (older clients), SASS's, and
`source` is null.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from despina.compiler.backends.nvptx import toolkit

from .cache import Entry
from .disassembly import Disassembler
from .errors import Internal, ServiceError

log = logging.getLogger("despina.server")
EMPTY: dict[str, Any] = {"source": None, "stages": {}}


def stored(entry: Entry) -> dict[str, Any]:
    """The line maps `entry` holds (none for a backend that writes none)."""
    data = entry.stages.get("lines")
    if data is None:
        return dict(EMPTY)
    try:
        table = json.loads(data)
    except ValueError as e:
        raise Internal(f"kernel {entry.key}: its line maps are not JSON ({e})") from None
    if not isinstance(table, dict) or not isinstance(table.get("stages"), dict) or "source" not in table:
        raise Internal(f"kernel {entry.key}: its line maps are not an object with 'source' and 'stages'")
    return table


async def lines_of(entry: Entry, disassembler: Disassembler, keep: Callable[[Entry], Awaitable[None]]
                   ) -> dict[str, Any]:
    """`entry`'s line maps, the SASS's included when this daemon can disassemble the cubin."""
    table = stored(entry)
    if "sass" in table["stages"] or table["source"] is None or not entry.cubin or toolkit.find_nvdisasm() is None:
        return table
    try:
        return stored(await disassembler.run(entry, keep))
    except ServiceError as e:  # nvdisasm failed on this cubin: every other map still stands
        log.warning("no SASS line map for %s: %s", entry.key, e.message)
        return table
