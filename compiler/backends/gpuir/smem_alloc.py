"""Shared-memory allocation over the program order, with liveness-based reuse and the barriers
that reuse needs.

The lowering asks for buffers in program order. A buffer is *live* from `alloc` to `free`; after
`free` its bytes stay *pending* until the next barrier, because other threads may still be reading
them. A new buffer never overlaps a live one; it may take pending bytes only behind a barrier,
which ends every pending interval at once. So `alloc` places a buffer at the lowest offset that is
neither live nor pending, as long as that keeps the kernel within `max(total so far, SPARE_BYTES,
the buffer)`; otherwise it asks for a barrier and reuses pending bytes. A barrier is emitted only
where a buffer reuses bytes that may still be read: the first buffer of a kernel gets none, and two
small reductions in a row (softmax, layer norm) take two disjoint slots and no barrier between.

Structured control flow: an `if` lowers both branches from the same state and joins them (pending
in either branch is pending after it); a loop records the buffers its body places before its first
barrier, and if bytes pending at the end of the body overlap them, the next iteration would reuse
bytes still being read, so the body ends with a barrier. After a loop, everything the loop placed
counts as pending (a safe superset).

    alloc = SharedAllocator()
    a = alloc.alloc(512)        # Placement(offset=0, barrier=False)
    alloc.free(a.offset)        # bytes 0..511 pending
    b = alloc.alloc(512)        # Placement(offset=512, barrier=False): within SPARE_BYTES
"""

from __future__ import annotations

from dataclasses import dataclass, field

SPARE_BYTES = 2048
"""Bytes a kernel may use beyond its largest buffer to avoid barriers. 32 blocks (the most an SM
of sm_80 or later runs) of 2 KiB fit in any such SM's shared memory, so this never limits
occupancy on its own."""

ALIGN = 16
Range = tuple[int, int]


@dataclass(frozen=True)
class Placement:
    """Where a buffer goes, and whether a barrier must precede its first write."""

    offset: int
    barrier: bool


@dataclass
class _Loop:
    exposed: set[Range] = field(default_factory=set)  # placed before the body's first barrier
    placed: set[Range] = field(default_factory=set)  # placed anywhere in the body
    fenced: bool = False
    entry_pending: set[Range] = field(default_factory=set)  # for the path that skips the body
    entry_fenced: list[bool] = field(default_factory=list)  # the enclosing loops' `fenced` at entry


@dataclass
class State:
    """What a point of the program knows: pending ranges and, per enclosing loop, what its body
    placed. Branches copy it and `join` merges copies."""

    pending: set[Range] = field(default_factory=set)
    loops: list[_Loop] = field(default_factory=list)

    def copy(self) -> State:
        loops = [_Loop(set(lp.exposed), set(lp.placed), lp.fenced, lp.entry_pending, lp.entry_fenced)
                 for lp in self.loops]
        return State(set(self.pending), loops)


def _overlaps(lo: int, hi: int, ranges: set[Range] | list[Range]) -> bool:
    return any(lo < b and a < hi for a, b in ranges)


def _lowest_fit(size: int, avoid: list[Range], align: int = ALIGN) -> int:
    offset = 0
    for lo, hi in sorted(avoid):
        if offset + size <= lo:
            break
        offset = max(offset, -(-hi // align) * align)
    return offset


class SharedAllocator:
    """Offsets of shared-memory buffers in one kernel; `total` is the bytes the kernel needs."""

    def __init__(self) -> None:
        self.state = State()
        self.live: dict[int, int] = {}  # offset -> size
        self.total = 0
        self.barriers = 0
        self.placements: list[tuple[int, int, bool]] = []  # (offset, size, barrier) in program order

    def alloc(self, size: int, align: int = ALIGN) -> Placement:
        """Place a buffer of `size` bytes at a multiple of `align` (a power of two from 16; 1024 for
        the 128-byte swizzle atoms that wgmma reads); `barrier` says the caller must emit one before
        using it."""
        size = max(int(size), 1)
        live = [(o, o + n) for o, n in self.live.items()]
        offset = _lowest_fit(size, live + sorted(self.state.pending), align)
        reuse = _lowest_fit(size, live, align)
        barrier = reuse != offset and offset + size > max(self.total, SPARE_BYTES, size)
        if barrier:
            self.fence()
            offset = reuse
        span = (offset, offset + size)
        for loop in self.state.loops:
            loop.placed.add(span)
            if not loop.fenced:
                loop.exposed.add(span)
        self.live[offset] = size
        self.total = max(self.total, offset + size)
        self.placements.append((offset, size, barrier))
        return Placement(offset, barrier)

    def free(self, offset: int) -> None:
        """The buffer at `offset` is no longer needed; its bytes are pending until a barrier."""
        size = self.live.pop(offset)
        self.state.pending.add((offset, offset + size))

    def fence(self) -> None:
        """A barrier: every access before it is complete."""
        self.barriers += 1
        self.state.pending.clear()
        for loop in self.state.loops:
            loop.fenced = True

    # ---- structured control flow ----------------------------------------------------------------

    def branch(self) -> State:
        """The state to lower a branch from (restore it with `set_state` before the next branch)."""
        return self.state.copy()

    def set_state(self, state: State) -> None:
        self.state = state.copy()

    def join(self, states: list[State]) -> None:
        """The state after branches that ended in `states`."""
        first = states[0]
        merged = State(set().union(*(s.pending for s in states)), [])
        for i, loop in enumerate(first.loops):
            others = [s.loops[i] for s in states]
            merged.loops.append(
                _Loop(
                    set().union(*(lp.exposed for lp in others)),
                    set().union(*(lp.placed for lp in others)),
                    all(lp.fenced for lp in others),
                    loop.entry_pending,
                    loop.entry_fenced,
                )
            )
        self.state = merged

    def loop_begin(self) -> None:
        """Open a loop body (for a `while`, its condition region and its body together)."""
        entry = _Loop(entry_pending=set(self.state.pending), entry_fenced=[lp.fenced for lp in self.state.loops])
        self.state.loops.append(entry)

    def loop_end(self) -> bool:
        """Close the innermost loop body; True when the body must end with a barrier (the caller
        emits it), because bytes pending now are what the next iteration writes first."""
        loop = self.state.loops[-1]
        needs = any(_overlaps(lo, hi, loop.exposed) for lo, hi in self.state.pending)
        if needs:
            self.fence()
        self.state.loops.pop()
        # After the loop: whatever the body left pending, or what was pending before it when the
        # body did not run; the enclosing loops are fenced only as much as on that skipping path.
        self.state.pending |= loop.entry_pending | loop.placed
        for outer, fenced in zip(self.state.loops, loop.entry_fenced):
            outer.fenced = fenced
        return needs
