"""Shared-memory barriers (`mbarrier`, sm_80 and up): 8-byte counters in shared memory whose phases
complete when the expected number of arrivals has come. A pipelined loop hands its ring slots over
with them (`pipeline.py`): copies arrive on a slot's *full* barrier as they land, readers on its
*empty* barrier once done, and each thread waits only for the slot it needs, not for every other
thread at a CTA barrier.

A wait names the phase by its parity: it returns once the phase of that parity has completed. A
barrier starts in phase 0, so a wait for parity 1 returns at once (the phase before the first
counts as completed), which is how a slot that no iteration has used yet reads as empty.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ...gpuir.pipeline import MBARRIER_BYTES
from .context import Lowering
from .types import const, i1, i8, i32, i64, void


def at(ctx: Lowering, offset: int | ir.Value) -> ir.Value:
    """The barrier at byte `offset` of the dynamic shared memory."""
    index = const(i32, offset) if isinstance(offset, int) else offset
    return ctx.b.gep(ctx.smem_base(), [index], source_etype=i8)


def in_ring(ctx: Lowering, first: int, slot: ir.Value) -> ir.Value:
    """The barrier of ring slot `slot` among one per slot from byte `first` of shared memory."""
    b = ctx.b
    return at(ctx, b.add(const(i32, first), b.mul(slot, const(i32, MBARRIER_BYTES))))


def init(ctx: Lowering, barriers: list[ir.Value], count: int) -> None:
    """Thread 0 sets up `barriers`, each expecting `count` arrivals a phase; a CTA barrier then makes
    them visible to every thread."""
    b = ctx.b
    with b.if_then(b.icmp_unsigned("==", ctx.tid, const(i32, 0))):
        for bar in barriers:
            ctx.call("llvm.nvvm.mbarrier.init.shared", void, [bar, const(i32, count)])
    ctx.barrier()


def arrive(ctx: Lowering, bar: ir.Value) -> None:
    """This thread's arrival (its earlier shared-memory reads are done)."""
    ctx.call("llvm.nvvm.mbarrier.arrive.shared", i64, [bar])


def arrive_on_copies(ctx: Lowering, bar: ir.Value) -> None:
    """This thread's arrival once every cp.async it has issued so far has landed (counted among the
    expected arrivals: `.noinc`)."""
    ctx.call("llvm.nvvm.cp.async.mbarrier.arrive.noinc.shared", void, [bar])


def wait(ctx: Lowering, bar: ir.Value, parity: ir.Value) -> None:
    """Spin until the phase of `parity` (0 or 1, an i32) of `bar` has completed; what the arrivals of
    that phase made visible is visible after. sm_90's try_wait lets the thread sleep a while in each
    try; older targets poll with test_wait."""
    b = ctx.b
    name = ("llvm.nvvm.mbarrier.try.wait.parity.scope.cta.space.cta" if ctx.target.has("mbarrier try_wait")
            else "llvm.nvvm.mbarrier.test.wait.parity.scope.cta.space.cta")
    spin, done = ctx.func.append_basic_block("mbarrier.wait"), ctx.func.append_basic_block("mbarrier.ready")
    b.branch(spin)
    b.position_at_end(spin)
    b.cbranch(ctx.call(name, i1, [bar, parity]), done, spin)
    b.position_at_end(done)


def invalidate(ctx: Lowering, barriers: list[ir.Value]) -> None:
    """After a CTA barrier past every use: thread 0 returns the barriers' bytes to plain memory."""
    b = ctx.b
    with b.if_then(b.icmp_unsigned("==", ctx.tid, const(i32, 0))):
        for bar in barriers:
            ctx.call("llvm.nvvm.mbarrier.inval.shared", void, [bar])

