"""A warp-specialized loop (`gpuir.specialize`): the kernel's entry split between the producer warp and the
kernel's own warps (the consumers), and the producer's code.

    entry:      (thread 0) mbarrier.init of each slot's full barrier (1 arrival and the copies' bytes) and
                empty barrier (every consumer thread), fence.proxy.async; bar.sync 0 (every thread)
                tid < consumers ? consumers : producer
    producer:   one thread: the inputs (the loop's bounds, the conditions of the `if`s around it, what the
                coordinates read), then for each iteration i in slot s at phase p: wait(empty[s], p ^ 1);
                arrive.expect_tx(full[s], bytes); the ahead slice; TMA's copies; after a deferred loop, its
                last B the same way into the next slot. The warp's other lanes exit.
    consumers:  the kernel, whose loop waits for full[s] and arrives on the empty barrier of the slot wgmma
                has retired (`pipeline.py`); CTA barriers are named barrier 1 of the consumers alone
                (`Lowering.barrier`)

Where shared memory holds the SM to one block, the producer is a warpgroup whose first instruction gives
registers back (setmaxnreg.dec) and the consumers' first takes them (setmaxnreg.inc): `rebalance`.

The ring (slots and barriers) is placed at the kernel's entry and kept until the loop ends (or until the
consumers have read a deferred loop's last B from it, after the loop): the producer copies into it while
the consumers still run what comes before the loop. A wait for parity
p ^ 1 of an empty barrier returns at once for a slot's first use (the phase before the first counts as
completed), so the producer fills the ring without waiting first.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import llvmlite.ir as ir

from ....ir.core import Op, Value
from ..occupancy import REGISTER_STEP, REGISTERS_PER_SM, occupancy
from ..toolkit import PTXAS_HINT
from . import mbarrier
from .context import Lowering
from .phis import close_phis, for_header, less
from .registry import Regs
from .types import const, i1, i32, void
from .wgmma import align_smem

if TYPE_CHECKING:
    from .pipeline import _Pipeline, _Specialized


@dataclass(frozen=True)
class WarpGroups:
    """The entry's block that sets up the barriers (left open until the loop is lowered, then branching to
    `split`), the block that splits the warps, the producer's first block, and the byte offset of the
    loop's ring (slots, then the full and the empty barriers)."""

    setup: ir.Block
    split: ir.Block
    producer: ir.Block
    consumers: ir.Block
    ring: int


def split(ctx: Lowering) -> None:
    """At the kernel's entry: place the ring and branch the producer's warp away; lowering goes on in the
    consumers' block."""
    plan = ctx.specialized
    assert plan is not None and plan.producer is not None
    if plan.wgmma:
        align_smem(ctx)
    ring = ctx.shared.alloc(plan.ring_bytes(), plan.align).offset
    b = ctx.b
    setup, split, producer, consumers = (ctx.func.append_basic_block(name) for name in
                                         ("barriers", "split", "producer", "consumers"))
    b.branch(setup)
    b.position_at_end(split)
    b.cbranch(b.icmp_unsigned("<", ctx.tid, const(i32, ctx.num_threads)), consumers, producer)
    ctx.producer = WarpGroups(setup, split, producer, consumers, ring)
    b.position_at_end(consumers)


WARPGROUP = 128
PRODUCER_REGISTERS = 40  # the producer warpgroup's, after setmaxnreg.dec: one thread computes coordinates
CONSUMER_REGISTERS = 240  # the most the consumers take (FlashAttention-3's for two consumer warpgroups)


def rebalance(ctx: Lowering, shared: int, whole_program: bool) -> str:
    """Where it pays and can be done, widen the producer to a warpgroup that gives its registers to the consumers
    (`setmaxnreg`), and say what was done or why not (the kernel's `setmaxnreg` metadata).

    Registers are allocated to a block's warps at launch, each of the SM's four sub-partitions holding a
    quarter of them: 8 consumer warps and one producer warp put 3 warps on a sub-partition, which caps every
    thread at 168 registers, as 12 warps do. A producer warpgroup then costs no registers, and with setmaxnreg
    it keeps 40 and the consumers take the rest (232 a thread for 8 warps). Attention's 128x128 blocks at d128
    keep S, P and the accumulator in registers, where ptxas spilled 160-192 bytes at 168 and serialized the
    wgmmas (C7512): on an H100 the specialized (4,32,4096,128) forward went from 416-425 to 577-580 TFLOP/s
    (full) and from 362-365 to 499-501 (causal), 1.29-1.34x Triton's on the same source and config; tutorial
    09's specialized persistent matmul, 128x128x64 with 3 stages, from 1.17-1.20x Triton to 1.19-1.25x, its
    other configurations within 2%. It is done where shared memory already holds the SM to one block, which
    a producer warpgroup would otherwise cost, and needs a whole-program ptxas (`ptxas.py`: nvJitLink ignores
    setmaxnreg)."""
    threads = ctx.num_threads + WARPGROUP
    entry = REGISTERS_PER_SM // threads // REGISTER_STEP * REGISTER_STEP
    if not ctx.target.has("setmaxnreg"):
        return f"no: {ctx.target.arch} has no setmaxnreg"
    if entry >= CONSUMER_REGISTERS:
        return f"no: the consumers' {ctx.num_threads // 32} warps have {CONSUMER_REGISTERS} registers a thread without it"
    if (blocks := occupancy(ctx.target.capability, 1, threads, shared).blocks) > 1:
        return (f"no: shared memory ({shared} bytes) leaves room for {blocks} blocks an SM, which a producer "
                f"warpgroup's registers would cost")
    if ctx.maxnreg is not None:
        return f"no: maxnreg={ctx.maxnreg} sets the registers of every thread"
    if not whole_program:
        return f"no: no ptxas to assemble the kernel as a whole program (nvJitLink ignores setmaxnreg): {PTXAS_HINT}"
    consumers = min(CONSUMER_REGISTERS, (threads * entry - WARPGROUP * PRODUCER_REGISTERS) // ctx.num_threads
                    // REGISTER_STEP * REGISTER_STEP)
    groups: WarpGroups = ctx.producer
    for block, text in ((groups.producer, f"setmaxnreg.dec.sync.aligned.u32 {PRODUCER_REGISTERS};"),
                        (groups.consumers, f"setmaxnreg.inc.sync.aligned.u32 {consumers};")):
        builder = ir.IRBuilder(block)
        builder.position_at_start(block)
        with _building(ctx, builder, ctx.values):
            ctx.asm(void, text, "", [], side_effect=True)
    ctx.launch_bounds(threads, entry)
    return f"yes: a producer warpgroup at {PRODUCER_REGISTERS} registers a thread, the consumers at {consumers}"


@contextmanager
def ring(ctx: Lowering, keep: bool = False) -> Iterator[int]:
    """The consumers' loop: the ring placed at the entry, free for other buffers after the loop unless `keep`
    (the producer fills a slot after the last iteration, which the consumers read after the loop: `release`)."""
    groups: WarpGroups = ctx.producer
    yield groups.ring
    if not keep:
        release(ctx)


def release(ctx: Lowering) -> None:
    """The ring, free for other buffers."""
    groups: WarpGroups = ctx.producer
    ctx.shared.free(groups.ring)


@contextmanager
def _building(ctx: Lowering, builder: ir.IRBuilder, values: dict[Value, Regs]) -> Iterator[None]:
    saved: tuple[Any, dict[Value, Regs]] = (ctx.b, ctx.values)
    ctx.b, ctx.values = builder, values
    try:
        yield
    finally:
        ctx.b, ctx.values = saved


def produce(ctx: Lowering, loop: Op, pipe: _Pipeline, hand: _Specialized) -> None:
    """Set up the ring's barriers (`hand`'s) at the entry and write the producer's code for `loop` (`pipe`)."""
    plan = pipe.plan
    producer = plan.producer
    assert producer is not None
    groups: WarpGroups = ctx.producer
    slots = plan.slots
    entry = ir.IRBuilder(groups.setup)
    with _building(ctx, entry, ctx.values):
        bars = hand.barriers()
        with entry.if_then(entry.icmp_unsigned("==", ctx.tid, const(i32, 0))):
            for k, bar in enumerate(bars):
                ctx.call("llvm.nvvm.mbarrier.init.shared", void, [bar, const(i32, 1 if k < slots else ctx.num_threads)])
            ctx.call("llvm.nvvm.fence.proxy.async.shared_cta", void, [])
        ctx.call("llvm.nvvm.barrier0", void, [])  # every thread's, the producer's too
        entry.branch(groups.split)
    b = ir.IRBuilder(groups.producer)
    with _building(ctx, b, {a: ctx.values[a] for a in ctx.gpu.fn.args}):
        issue, done = ctx.func.append_basic_block("producer.issue"), ctx.func.append_basic_block("producer.done")
        b.cbranch(b.icmp_unsigned("==", ctx.tid, const(i32, ctx.num_threads)), issue, done)
        b.position_at_end(issue)
        for op in producer.inputs:
            ctx.lower_op(op)
        runs: ir.Value = const(i1, 1)
        for cond, taken in producer.conditions:
            c = ctx.get(cond)[0]
            runs = b.and_(runs, c if taken else b.not_(c))
        with b.if_then(runs):
            lo, hi, step = (ctx.get(v)[0] for v in loop.operands[:3])
            carried = [list(ctx.get(loop.operands[2 + j])) for j in plan.carried]
            header, exit_, ((iv,), (slot,), (phase,), *rows) = for_header(
                ctx, [[lo], [const(i32, 0)], [const(i32, 0)], *carried], pipe.signed, hi)
            mbarrier.wait(ctx, hand.at(slot, empty=True), b.xor(phase, const(i32, 1)))
            after = pipe.produce(iv, dict(zip(plan.carried, map(list, rows))), slot)
            wraps = b.icmp_unsigned("==", slot, const(i32, slots - 1))
            close_phis([[iv], [slot], [phase], *rows],
                       [[b.add(iv, step)], [b.select(wraps, const(i32, 0), b.add(slot, const(i32, 1)))],
                        [b.xor(phase, b.zext(wraps, i32))], *after.values()], b.block)
            b.branch(header)
            b.position_at_end(exit_)
            if producer.tail is not None:  # a deferred loop's last B, into the slot after the last iteration's
                with b.if_then(less(ctx, pipe.signed, lo, hi)):
                    mbarrier.wait(ctx, hand.at(slot, empty=True), b.xor(phase, const(i32, 1)))
                    pipe.produce(iv, dict(zip(plan.carried, map(list, rows))), slot, only=producer.tail[2])
        b.branch(done)
        b.position_at_end(done)
        b.ret_void()
