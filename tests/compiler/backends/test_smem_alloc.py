"""Shared-memory allocation: buffers placed over the program order, live ones never overlapping,
pending bytes reused only behind a barrier, and the barriers that loops and branches need."""

from __future__ import annotations

from despina.compiler.backends.gpuir.smem_alloc import SPARE_BYTES, Placement, SharedAllocator

KB = 1024


def scratch(alloc: SharedAllocator, size: int, internal_barrier: bool = True) -> Placement:
    """An op-local exchange: write, barrier, read, free (as a reduction or a layout conversion)."""
    placed = alloc.alloc(size)
    if internal_barrier:
        alloc.fence()
    alloc.free(placed.offset)
    return placed


def test_the_first_buffer_needs_no_barrier() -> None:
    alloc = SharedAllocator()
    assert alloc.alloc(100) == Placement(0, False)
    assert alloc.total == 100


def test_small_buffers_in_a_row_take_disjoint_slots_instead_of_a_barrier() -> None:
    alloc = SharedAllocator()
    assert scratch(alloc, 16) == Placement(0, False)
    assert scratch(alloc, 16) == Placement(16, False)  # the first is still being read
    assert scratch(alloc, 20) == Placement(32, False)  # [0, 20) would overlap the second, still being read
    assert scratch(alloc, 16) == Placement(0, False)  # the barrier inside the third ended the second
    assert alloc.total == 52 and alloc.barriers == 4  # only the exchanges' own barriers


def test_large_buffers_reuse_bytes_behind_a_barrier() -> None:
    alloc = SharedAllocator()
    assert scratch(alloc, 64 * KB) == Placement(0, False)
    assert scratch(alloc, 64 * KB) == Placement(0, True)
    assert alloc.total == 64 * KB


def test_slots_are_free_only_within_the_spare_bytes() -> None:
    alloc = SharedAllocator()
    placements = [scratch(alloc, 1024, internal_barrier=False) for _ in range(3)]
    assert placements == [Placement(0, False), Placement(1024, False), Placement(0, True)]
    assert alloc.total == SPARE_BYTES == 2048


def test_a_fence_makes_pending_bytes_free() -> None:
    alloc = SharedAllocator()
    scratch(alloc, 4 * KB, internal_barrier=False)
    alloc.fence()
    assert alloc.alloc(4 * KB) == Placement(0, False)


def test_live_buffers_never_overlap() -> None:
    alloc = SharedAllocator()
    a = alloc.alloc(8 * KB)
    b = alloc.alloc(8 * KB)
    assert (a.offset, b.offset) == (0, 8 * KB)
    alloc.free(a.offset)
    alloc.fence()
    c = alloc.alloc(16 * KB)  # cannot take [0, 8K) while b lives
    assert c.offset == 16 * KB and not c.barrier
    d = alloc.alloc(4 * KB)
    assert d == Placement(0, False)
    assert alloc.total == 32 * KB


def test_reuse_with_a_barrier_still_avoids_live_buffers() -> None:
    alloc = SharedAllocator()
    live = alloc.alloc(4 * KB)
    scratch(alloc, 8 * KB, internal_barrier=False)
    placed = alloc.alloc(8 * KB)
    assert placed == Placement(4 * KB, True) and live.offset == 0


def test_pending_in_either_branch_is_pending_after_the_if() -> None:
    alloc = SharedAllocator()
    entry = alloc.branch()
    scratch(alloc, 3 * KB)  # then: [0, 3K) left pending
    then = alloc.state
    alloc.set_state(entry)
    else_ = alloc.state  # else: nothing
    alloc.join([then, else_])
    assert alloc.state.pending == {(0, 3 * KB)}
    assert scratch(alloc, 3 * KB) == Placement(0, True)


def test_a_loop_with_one_exchange_ends_its_body_with_a_barrier() -> None:
    alloc = SharedAllocator()
    alloc.loop_begin()
    scratch(alloc, 16)
    assert alloc.loop_end() is True  # next iteration writes [0, 16) while it may still be read
    assert alloc.state.pending == {(0, 16)}  # after the loop: what the body placed


def test_a_loop_with_two_exchanges_needs_no_extra_barrier() -> None:
    alloc = SharedAllocator()
    alloc.loop_begin()
    assert scratch(alloc, 16) == Placement(0, False)
    assert scratch(alloc, 16) == Placement(16, False)
    assert alloc.loop_end() is False  # [16, 32) is pending, the next iteration first writes [0, 16)


def test_a_loop_body_sees_what_was_pending_before_it() -> None:
    alloc = SharedAllocator()
    scratch(alloc, 16)
    alloc.loop_begin()
    assert scratch(alloc, 16) == Placement(16, False)
    assert alloc.loop_end() is True
    assert alloc.state.pending == {(0, 16), (16, 32)}  # a loop that ran no iteration leaves [0, 16)


def test_a_barrier_on_one_branch_only_does_not_hide_the_loop_hazard() -> None:
    alloc = SharedAllocator()
    alloc.loop_begin()
    entry = alloc.branch()
    alloc.fence()
    fenced = alloc.state
    alloc.set_state(entry)
    alloc.join([fenced, alloc.state])
    scratch(alloc, 16)  # exposed: the else path reaches it with no barrier
    assert alloc.loop_end() is True


def test_nested_loops_restore_the_outer_fence_state() -> None:
    alloc = SharedAllocator()
    alloc.loop_begin()
    alloc.loop_begin()
    alloc.fence()
    alloc.loop_end()
    scratch(alloc, 16)  # the inner loop may run no iteration: still exposed to the outer loop
    assert alloc.loop_end() is True
