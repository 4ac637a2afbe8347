"""The daemon's counters over time, for the statistics page: a snapshot every few seconds in a ring of
bounded length (an hour at the defaults), read from the same counters /metrics exposes.

    sampler = Sampler(service)
    task = asyncio.ensure_future(sampler.run())   # the daemon runs it while it serves
    sampler.snapshots()                           # oldest first
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass

from ..core import CompileService
from ..metrics import TIERS

INTERVAL_S = 5.0
KEEP = 720


@dataclass(frozen=True)
class Snapshot:
    t: float
    answers: dict[str, int]  # compile answers so far, by the tier that gave them
    compiles: int
    compile_errors: int
    in_flight: int
    workers: int
    memory_entries: int
    disk_entries: int


class Sampler:
    def __init__(self, service: CompileService, interval_s: float = INTERVAL_S, keep: int = KEEP) -> None:
        self.service = service
        self.interval_s = interval_s
        self._ring: deque[Snapshot] = deque(maxlen=keep)

    def sample(self) -> Snapshot:
        """Take one snapshot now and keep it (the oldest goes when the ring is full)."""
        s = self.service.stats()
        snap = Snapshot(time.time(), {t: int(s["hits"].get(t, 0)) for t in TIERS}, int(s["compiles"]),
                        int(s["compile_errors"]), int(s["in_flight"]), int(s["workers"]), int(s["memory_entries"]),
                        int(s["disk_entries"]))
        self._ring.append(snap)
        return snap

    def snapshots(self) -> list[Snapshot]:
        return list(self._ring)

    async def run(self) -> None:
        """Sample every `interval_s` until cancelled."""
        while True:
            self.sample()
            await asyncio.sleep(self.interval_s)
