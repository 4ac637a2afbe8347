"""SASS on demand: a cached kernel's cubin disassembled by nvdisasm when a client first asks for it.

nvdisasm takes a second or two even for a small kernel, more than many compiles, so the compile
workers never run it: `GET /v1/kernels/{key}/sass` (gRPC GetArtifact) does, once per kernel however
many ask at the same time, in a thread (nvdisasm is a process of its own; the event loop only waits
for it), at most `slots` at once. The service then keeps the SASS with the kernel in every tier, and
with it the source line of each SASS line in the kernel's line maps (`lines.py`).

    disassembler = Disassembler(slots=4)
    entry = await disassembler.run(entry, keep)   # entry.stages["sass"]; `keep(that entry)` ran once
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

from despina.compiler.backends.nvptx import lines, sass, toolkit

from .cache import Entry
from .errors import FailedPrecondition, Internal, NotFound


class Disassembler:
    def __init__(self, slots: int) -> None:
        self._slots = asyncio.Semaphore(max(1, slots))
        self._flights: dict[str, asyncio.Future[Entry]] = {}

    async def run(self, entry: Entry, keep: Callable[[Entry], Awaitable[None]]) -> Entry:
        """`entry` with the SASS of its cubin (and its SASS line map, when it has line maps); `keep` gets
        it, once, before any caller returns."""
        flight = self._flights.get(entry.key)
        if flight is None:
            flight = self._flights[entry.key] = asyncio.ensure_future(self._disassemble(entry, keep))
            flight.add_done_callback(lambda done: self._landed(entry.key, done))
        return await asyncio.shield(flight)

    def _landed(self, key: str, flight: asyncio.Future[Entry]) -> None:
        if self._flights.get(key) is flight:
            del self._flights[key]
        if not flight.cancelled():
            flight.exception()  # retrieved: a flight whose callers all left must not log a warning

    async def _disassemble(self, entry: Entry, keep: Callable[[Entry], Awaitable[None]]) -> Entry:
        if not entry.cubin:
            raise NotFound(f"kernel {entry.key} has no cubin to disassemble")
        tool = toolkit.find_nvdisasm()
        if tool is None:
            raise FailedPrecondition(
                f"kernel {entry.key} has no SASS: this daemon has no nvdisasm to disassemble its cubin. On the "
                f"daemon's host, {toolkit.NVDISASM_HINT} (or set DESPINA_NVDISASM to its path) and restart the daemon")
        async with self._slots:
            try:
                text, annotated = await asyncio.to_thread(sass.disassemble_lines, entry.cubin)
            except sass.SassError as e:
                raise Internal(f"kernel {entry.key}: {e}") from None
        stages = dict(entry.stages, sass=text.encode())
        try:
            table = json.loads(stages["lines"]) if "lines" in stages else None
        except ValueError:
            table = None  # unreadable maps stay as they are: `lines.stored` says so to whoever asks for them
        if isinstance(table, dict):
            stages["lines"] = json.dumps(lines.with_sass(table, annotated)).encode()
        done = Entry(entry.key, stages, entry.metadata, entry.created)
        await keep(done)
        return done
