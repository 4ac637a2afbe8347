"""A software-pipelined `for` loop (planned by `gpuir.pipeline`): cp.async into a ring of shared
buffers, `num_stages - 1` iterations ahead of the tensor-core dots that read them.

    prologue:  for s in 0 .. S-2: copies of iteration s into slot s
    loop i:    take slot i % slots      (every thread's copies of iteration i have landed)
               the body, its dots reading the slot (ldmatrix, or wgmma in place)
               give back what the body has finished reading
               copies of iteration i + S-1 into the slot whose reads are done
    after:     every copy landed (copies of iterations past the end still write zeros)

How a slot is taken and given back is the plan's `handoff`:
- "mbarriers" (mma.sync dots): a full and an empty barrier per slot (`mbarrier.py`), set up by
  thread 0 before the prologue. Each thread's copies arrive on their slot's full barrier as they land
  (`cp.async.mbarrier.arrive.noinc`); a thread takes slot i by waiting for its full barrier, arrives
  on its empty barrier after the body, and waits for the empty barrier of the slot it writes next.
  No CTA barrier runs in the loop. After it, `cp.async.wait_all`, a barrier, and thread 0 returns
  the barriers' bytes.
- "barrier" (wgmma dots): `cp.async.wait_group S-2` and a CTA barrier at the top of each iteration.
  The barrier makes every thread's copies of iteration i visible and is after every thread's reads
  of slot i-1, which the new copies overwrite.
- "named" (every load copied by TMA, every reader a wgmma dot, the body a chain of dots): a thread takes
  slot i by waiting for its full mbarrier; slot s is given back on named barrier 1 + s, where every warp
  but the first arrives without waiting once its wait has retired the group that read it, and the first
  warp waits before thread 0 copies into a slot an iteration has read (`_Named`). No CTA barrier runs in
  the loop, and only the copying warp ever waits for the others.

A wait on an mbarrier names a phase by its parity: the n-th use of a slot (from 0) is its phase n;
a wait for the use before the first returns at once (parity 1 of a barrier in phase 0), which is
how a slot no iteration has used yet reads as empty. An asynchronous wgmma dot's group of iteration
i-1 is retired by iteration i's `wait_group 1`, so its slot is given back an iteration late: with a
spare slot (gpuir.pipeline chooses) iteration i's copies go to iteration i-2's slot, else to i-1's,
after a second barrier. Copies of iterations past the end of the loop have their size set to 0
(nothing is read; the slot is zero-filled), as are masked elements.

The copies come after the body, as in Triton's loop: an iteration starts with its ldmatrix reads
and mma, and the copies are issued while the tensor cores work through them. Issued first, the
copies and their address arithmetic stood between the wait and the first mma in every iteration
(the LDGSTS ahead of the LDSM in the memory pipeline), and the tutorial matmul ran at 0.92x
Triton's mma.sync path on an H100 (128x128x64 and 128x256x64, 8 warps, 3 stages). TMA's copies into
the spare slot of a wgmma loop do come first, right after the barrier (`LoopPipeline.copies_first`;
`gpuir.pipeline` has the figures): they are one thread's few instructions, and the iteration then
evaluates again, for itself, the part of their ahead slice it reads. The tutorial matmul's cp.async copies
issued there too moved its 8192^3 rows on an H200 within 2% either way (fp16 and bf16, 128x128x64 and
128x256x64, 3 and 4 stages, 8 warps: 128x256 s3 584.9 -> 596.5 TFLOP/s, 128x128 s3 512.0 -> 502.5).

Descriptor loads that TMA copies (`tma.py`) are issued by thread 0 alone, for an iteration of the loop
(none past its end), as one `mbarrier.arrive.expect_tx` of the stage's bytes on the slot's full
barrier and the copies that complete it; the ahead ops that only give them their coordinates run in
that thread's branch. Their loops take the "named" handoff where the body chains dots (the "barrier" one
where it feeds a single dot or cp.async copies some load too, each thread also waiting on the slot's full
barrier, the phase bit carried with the slot: `gpuir.pipeline` has the figures), the
full barriers set up before the prologue and returned after the loop. With a CTA barrier at the top of
every iteration instead, the descriptor attention (8 warps) ran 2-8% slower on an H100: named, (4,32,2048,64)
at 128x128 blocks and 3 stages 420.7 -> 444.2 TFLOP/s (causal 352.7 -> 364.0), at 128x64 391.1 -> 399.6
(319.6 -> 327.4); (4,32,4096,128) at 128x64 464.3 -> 498.4 (410.6 -> 444.5), at 128x128 and 2 stages 450
either way (397.0 -> 409.8). A body that takes shared scratch keeps the barrier (`gpuir.pipeline`):
tutorial 09's persistent matmul, whose epilogue's scratch then took a CTA barrier at the end of every
iteration besides the named ones, ran 1-2.4% slower named (0.953-0.992x Triton against 0.976-1.016x). A
warp-specialized loop's consumers end each iteration with that barrier (their iterations meet no other); ending
only the epilogue's branch with it moved the specialized persistent rows within 2.5% either way on an H200
(0.989-1.246x Triton against 0.994-1.249x), though ncu counted 42% of the consumers' stalls at it. The
barrier removed outright (unsafely: an upper bound) gave d64 about the same (429.7 -> 450.7 at 128x128).
Handing slots back through an empty mbarrier each (every thread or every warp's first lane arriving, thread
0 waiting for it) kept less of it: 107 -> 118 registers at d64 128x64 (0.96-0.98x the barrier's speed), and
the d64 causal loop at 128x128 no longer fit two CTAs an SM in 128 registers (0.81x). For a loop of one
dot, neither of two other orders did better on an H200 (tutorial 09's kernels, fp16, 8 warps, 3 stages,
TFLOP/s, each beside the barrier handoff in one run):
- no CTA barrier, three slots, the last warp to retire a slot's group (a shared counter, `atom.inc`)
  copying into it: 8192^3 descriptor matmul at 128x128x64 597.8 -> 533.3, persistent 501.3 -> 467.1;
- the copies issued right after the dot, before a flattened nest's epilogue: persistent 128x128x64 at
  4096^3 499.6 -> 502.5, at 8192^3 509.8 -> 513.7, the descriptor matmul within 2.1% either way.
A flattened loop
nest's asynchronous dots (`passes/flatten.py`) restart their accumulator on a tile's first K step through
scale-d, and its epilogue's branch waits for their group.

wgmma dots read the slots in place (`wgmma.py`) with no proxy fence, as in Triton's loop (its fence
insertion fences operands stored from registers, not cp.async copies): `fence.proxy.async` is a
MEMBAR.ALL.CTA in SASS, and the tutorial matmul ran at 0.90-0.93x Triton's wgmma loop with it at
the top of every iteration. The loop ends with wait_group 0.
"""

from __future__ import annotations

from collections.abc import Callable

import llvmlite.ir as ir

from ....ir.core import Op
from ....ir.types import ScalarType, elem_of
from ...gpuir.linear import LinearLayout
from ...gpuir.mma import MmaOperand
from ...gpuir.pipeline import MBARRIER_BYTES, AsyncLoad, LoopPipeline
from . import mbarrier, specialize, tma
from .context import Lowering
from .ldmatrix import SharedOperand, lane_address, load_swizzled, split_addresses
from .phis import close_phis, for_header, less
from .registry import Regs
from .types import const, i8, i32, void
from .wgmma import ZeroStart, align_smem, settle


def _copy(ctx: Lowering, a: AsyncLoad, slot_base: ir.Value, live: ir.Value) -> None:
    """The asynchronous copies of `a`'s tile (pointers and mask as currently lowered) into a slot."""
    b = ctx.b
    ptr = a.load.operands[0]
    mask = ctx.get(a.load.operands[1]) if len(a.load.operands) > 1 else None
    ptrs, ll = ctx.get(ptr), ctx.layout(ptr)
    perm = tuple(a.trans.attrs["perm"]) if a.trans is not None else tuple(range(ll.rank))
    shape = tuple(ll.shape[p] for p in perm)  # of the tile as the dot reads it: the load's, or its transpose's
    kind = "cg" if a.copy_bytes == 16 else "ca"  # .cg (L2 only) exists for 16 bytes alone
    name = f"llvm.nvvm.cp.async.{kind}.shared.global.{a.copy_bytes}.s"
    # Each copy's slot offset over registers, lanes and warps: a lane's base, taken at entry, and the copy's
    # immediate, as ldmatrix's reads (the 128x128x64 wgmma loop computed 4 shared addresses a load, 1 now).
    framed = LinearLayout(shape, tuple((n, tuple(tuple(v[p] for p in perm) for v in bases)) for n, bases in ll.ins))
    offsets = framed.compose(a.shared.linear(shape).invert())
    for g in range(0, ll.num_regs, a.vec):
        dst = lane_address(ctx, slot_base, elem_of(a.load.result.type), offsets, g)
        on = live if mask is None else b.and_(live, mask[g])
        size = b.select(on, const(i32, a.copy_bytes), const(i32, 0))
        ctx.call(name, void, [dst, ptrs[g], size])


class _Pipeline:
    def __init__(self, ctx: Lowering, op: Op, plan: LoopPipeline, ring: int) -> None:
        self.ctx, self.op, self.plan = ctx, op, plan
        self.body = op.regions[0]
        bound = elem_of(op.operands[0].type)
        self.signed = isinstance(bound, ScalarType) and bound.is_int_signed()
        self.bases: list[int] = []
        for a in plan.loads:
            self.bases.append(ring)
            ring += plan.slots * a.slot_bytes
        self.barriers = ring
        """The byte offset of the slots' barriers, after the slots."""
        self.split = [self._split(a) for a in plan.loads]
        self.copier_only = self._copier_only()

    def _copier_only(self) -> set[Op]:
        """The ahead ops whose values only TMA's coordinates take (the descriptor loads' offsets): the one
        thread that issues the copies computes them, inside its branch, and no other thread does."""
        users: dict[object, list[Op]] = {}
        for op in self.body.walk():
            for v in op.operands:
                users.setdefault(v, []).append(op)
        found: set[Op] = set()
        copies = {a.load for a in self.plan.loads if a.tma is not None}
        for op in reversed(self.plan.ahead):
            if op not in self.plan.current and all(u in copies or u in found for r in op.results
                                                   for u in users.get(r, [None])):
                found.add(op)
        return found

    def _split(self, a: AsyncLoad) -> bool:
        """Whether the ring reads of load `a` take split addresses (`ldmatrix.split_addresses`, from
        the dot it feeds)."""
        enc = self.ctx.gpu.encoding(a.convert.result)
        for op in self.body.ops:
            if op.name == "dot" and isinstance(enc, MmaOperand) and any(v is a.convert.result for v in op.operands[:2]):
                return split_addresses(self.ctx.layout(op.result))
        return False

    def slot_base(self, i: int, slot: ir.Value) -> ir.Value:
        b = self.ctx.b
        offset = b.add(const(i32, self.bases[i]), b.mul(slot, const(i32, self.plan.loads[i].slot_bytes)))
        return b.gep(self.ctx.smem_base(), [offset], source_etype=i8)

    def bind(self, iv: ir.Value, carried: dict[int, Regs]) -> None:
        values = self.ctx.values
        values[self.body.args[0]] = [iv]
        for j, regs in carried.items():
            values[self.body.args[j]] = regs

    def issue(self, iv: ir.Value, hi: ir.Value, carried: dict[int, Regs], slot: ir.Value) -> dict[int, Regs]:
        """Evaluate the ahead slice for iteration `iv` and copy its loads into `slot`; the values it
        carries to the next iteration."""
        ctx = self.ctx
        self.bind(iv, carried)
        for op in self.plan.ahead:
            if op not in self.copier_only:
                ctx.lower_op(op)
        live = less(ctx, self.signed, iv, hi)
        for i, a in enumerate(self.plan.loads):
            if a.tma is None:
                _copy(ctx, a, self.slot_base(i, slot), live)
        by_tma = [(i, a) for i, a in enumerate(self.plan.loads) if a.tma is not None]
        if by_tma:  # thread 0, for an iteration of the loop (past its end nothing waits for the slot)
            b = ctx.b
            with b.if_then(b.and_(b.icmp_unsigned("==", ctx.tid, const(i32, 0)), live)):
                for op in self.plan.ahead:
                    if op in self.copier_only:
                        ctx.lower_op(op)
                full = mbarrier.in_ring(ctx, self.barriers, slot)
                tma.expect(ctx, full, sum(a.copy_bytes for _, a in by_tma))
                for i, a in by_tma:
                    tma.copy(ctx, a.load, self.slot_base(i, slot), full)
        yields = self.body.terminator
        assert yields is not None
        return {j: list(ctx.get(yields.operands[j - 1])) for j in self.plan.carried}

    def produce(self, iv: ir.Value, carried: dict[int, Regs], slot: ir.Value, only: int | None = None
                ) -> dict[int, Regs]:
        """A producer's iteration `iv` (`specialize.py`, one thread): the ahead slice, then TMA's copies of
        every load (or load `only`) into `slot`, which complete its full barrier; the values it carries to the
        next."""
        ctx = self.ctx
        self.bind(iv, carried)
        for op in self.plan.ahead:
            ctx.lower_op(op)
        full = mbarrier.in_ring(ctx, self.barriers, slot)
        loads = [(i, a) for i, a in enumerate(self.plan.loads) if only is None or i == only]
        tma.expect(ctx, full, sum(a.copy_bytes for _, a in loads))
        for i, a in loads:
            tma.copy(ctx, a.load, self.slot_base(i, slot), full)
        yields = self.body.terminator
        assert yields is not None
        return {j: list(ctx.get(yields.operands[j - 1])) for j in self.plan.carried}

    def tail(self, op: Op, i: int, full: ir.Value, phase: ir.Value, slot: ir.Value) -> Callable[[], Regs]:
        """How the consumers read `op`, the copy of load `i` that the producer makes into `slot` after the loop's
        last iteration (a deferred loop's last B: `gpuir.specialize`): wait for the slot's `full` barrier at
        `phase`, then read the slot into registers of `op`'s layout."""
        a = self.plan.loads[i]

        def read() -> Regs:
            ctx = self.ctx
            mbarrier.wait(ctx, full, phase)
            elem = elem_of(op.result.type)
            assert isinstance(elem, ScalarType)
            skip = ctx.b.mul(slot, const(i32, a.slot_bytes // elem.itemsize))
            return load_swizzled(ctx, elem, ctx.layout(op.result), a.shared, self.bases[i], skip)

        return read

    def iteration(self, iv: ir.Value, carried: list[Regs], slot: ir.Value) -> list[Regs]:
        """The body for iteration `iv` with its loads' tiles in `slot`; the values it yields."""
        ctx, plan = self.ctx, self.plan
        skip = {a.load for a in plan.loads} | {a.convert for a in plan.loads} | {a.trans for a in plan.loads if a.trans}
        for i, a in enumerate(plan.loads):
            layout = ctx.layout(a.convert.result)
            ctx.shared_operands[a.convert.result] = SharedOperand(
                elem_of(a.load.result.type), layout, a.shared, self.slot_base(i, slot), a.op_idx, self.split[i]
            )
            ctx.values[a.convert.result] = []
        self.bind(iv, dict(enumerate(carried, start=1)))
        ahead = {op for op in plan.ahead}
        yields = self.body.terminator
        assert yields is not None
        resets = {select: dot for dot, select in plan.resets}
        ctx.settle_in.update(plan.settles)
        for op in self.body.ops:
            if op is yields or op in skip or (op in ahead and op not in plan.current):
                continue
            dot = resets.get(op)
            if dot is not None:  # the accumulator as carried (in flight); a tile's first K step ignores it
                first = op.operands[0].owner
                assert isinstance(first, Op)
                ctx.values[op.result] = ctx.get(op.operands[2])
                ctx.scale_d[dot] = ctx.b.not_(ctx.get(first.operands[0])[0])
                continue
            ctx.lower_op(op)
        ctx.retire_late()
        for branch, _ in plan.settles:
            del ctx.settle_in[branch]
        out = []
        for v, phi in zip(yields.operands, carried):
            owner = v.owner
            stale = isinstance(owner, Op) and owner in ahead and owner not in plan.current
            out.append(phi if stale else ctx.get(v))
        return out


class _Turn:
    """Iteration `iv` of a pipelined loop over [lo, hi) by `step` (compared `signed` or not), as a handoff sees it
    after the body; `ahead` is the iteration S-1 on, whose copies it issues."""

    def __init__(self, ctx: Lowering, iv: ir.Value, lo: ir.Value, hi: ir.Value, step: ir.Value, signed: bool,
                 stages: int) -> None:
        self.ctx, self.iv, self.lo, self.hi, self.step, self.signed = ctx, iv, lo, hi, step, signed
        b = ctx.b
        self.first = b.icmp_unsigned("==", iv, lo)
        self.ahead = b.add(iv, b.mul(step, const(lo.type, stages - 1)))

    def runs(self, iv: ir.Value) -> ir.Value:
        """Whether the loop runs iteration `iv`."""
        return less(self.ctx, self.signed, iv, self.hi)

    def from_the(self, k: int) -> ir.Value:
        """Whether this is the loop's k-th iteration (from 0) or a later one."""
        b = self.ctx.b
        return b.not_(less(self.ctx, self.signed, self.iv, b.add(self.lo, b.mul(self.step, const(self.lo.type, k)))))


class _Handoff:
    """Slots taken and given back with `cp.async.wait_group` and CTA barriers (the "barrier" handoff); TMA's
    copies complete the full mbarrier of their slot (one per slot, from byte `offset`), which a thread
    waits for before it reads the slot."""

    def __init__(self, ctx: Lowering, plan: LoopPipeline, offset: int) -> None:
        self.ctx, self.plan, self.offset = ctx, plan, offset

    def _tma_barriers(self) -> list[ir.Value]:
        return [mbarrier.at(self.ctx, self.offset + MBARRIER_BYTES * k) for k in range(self.plan.slots)]

    def start(self) -> None:
        """Before the prologue."""
        if self.plan.tma:
            tma.init_barriers(self.ctx, self._tma_barriers())

    def landing(self, slot: ir.Value) -> None:
        """After the copies into `slot` are issued."""
        if self.plan.cp_async:
            self.ctx.call("llvm.nvvm.cp.async.commit.group", void, [])

    def take(self, slot: ir.Value, phase: ir.Value) -> None:
        """At the top of an iteration, whose tiles are in `slot`, at its `phase` of use (0 or 1)."""
        if self.plan.cp_async:
            self.ctx.call("llvm.nvvm.cp.async.wait.group", void, [const(i32, self.plan.stages - 2)])
        if self.plan.tma:
            mbarrier.wait(self.ctx, mbarrier.in_ring(self.ctx, self.offset, slot), phase)
        self.ctx.barrier()

    def give_back(self, slot: ir.Value, phase: ir.Value, write: ir.Value, turn: _Turn) -> None:
        """After the body of iteration `turn`, before the copies of the iteration S-1 ahead into `write`."""
        if self.plan.async_dots and not self.plan.spare_slot:  # every warpgroup's wait retired slot i-1's group
            self.ctx.barrier()

    def finish(self) -> None:
        """After the loop (every TMA copy issued was for an iteration, which waited for it)."""
        if self.plan.cp_async:
            self.ctx.call("llvm.nvvm.cp.async.wait.group", void, [const(i32, 0)])
        if self.plan.tma:
            self.ctx.barrier()
            mbarrier.invalidate(self.ctx, self._tma_barriers())


class _Named(_Handoff):
    """TMA copies into the ring and every reader a wgmma dot (the "named" handoff): a thread takes a slot by
    waiting for its full mbarrier, and no CTA barrier runs in the loop. Slot s is given back on named barrier
    1 + s: each warp but the first arrives on it (`bar.arrive`, which does not wait) once its wait has retired
    the group that read the slot and the slot is to be copied into again; the first warp, whose thread 0
    issues the copies, waits on it (`bar.sync`) before the copies into a slot that an iteration has read. So
    only the copying warp ever waits for the others. A warp gives slot s back again only after reading the
    copies made into it after that wait: no barrier sees two arrivals of a warp in one phase."""

    def take(self, slot: ir.Value, phase: ir.Value) -> None:
        mbarrier.wait(self.ctx, mbarrier.in_ring(self.ctx, self.offset, slot), phase)

    def _named(self, op: str, slot: ir.Value) -> None:
        ctx = self.ctx
        ctx.asm(void, f"barrier.cta.{op}.aligned $0, $1;", "r,r",
                [ctx.b.add(slot, const(i32, 1)), const(i32, ctx.num_threads)], side_effect=True)

    def give_back(self, slot: ir.Value, phase: ir.Value, write: ir.Value, turn: _Turn) -> None:
        """Every warp but the first arrives for the slot its wait retired (this iteration's, or where a group
        outlives its iteration the previous one's: none in the first iteration) if it is copied into again: in
        this iteration (a group in flight, no spare slot) or the next. Then the first warp waits until every
        other warp has given back slot `write`, where an iteration has read it (from the (slots - S + 1)-th
        iteration on) and copies go into it now."""
        b, plan = self.ctx.b, self.plan
        others = b.icmp_unsigned(">=", self.ctx.tid, const(i32, 32))
        refilled = turn.runs(turn.ahead if plan.async_dots and plan.slots == plan.stages
                             else b.add(turn.ahead, turn.step))
        if plan.async_dots:
            with b.if_then(b.and_(b.and_(others, b.not_(turn.first)), refilled)):
                self._named("arrive", _previous_slot(self.ctx, plan, slot))
        else:
            with b.if_then(b.and_(others, refilled)):
                self._named("arrive", slot)
        read_before = b.and_(turn.from_the(plan.slots - plan.stages + 1), turn.runs(turn.ahead))
        with b.if_then(b.and_(b.icmp_unsigned("<", self.ctx.tid, const(i32, 32)), read_before)):
            self._named("sync", write)


class _FullAndEmpty(_Handoff):
    """Slots handed over by a full and an empty mbarrier each, after the slots in the ring's buffer (the full
    ones, then the empty ones); a reader takes a slot by waiting for its full barrier."""

    def barriers(self) -> list[ir.Value]:
        return [mbarrier.at(self.ctx, self.offset + MBARRIER_BYTES * k) for k in range(2 * self.plan.slots)]

    def at(self, slot: ir.Value, empty: bool) -> ir.Value:
        return mbarrier.in_ring(self.ctx, self.offset + (MBARRIER_BYTES * self.plan.slots if empty else 0), slot)

    def take(self, slot: ir.Value, phase: ir.Value) -> None:
        mbarrier.wait(self.ctx, self.at(slot, empty=False), phase)


class _Mbarriers(_FullAndEmpty):
    """Every thread's copies arrive on their slot's full barrier as they land. After its body an iteration
    arrives on the empty barrier of the slot it read; the copies of iteration i + S-1 go to the slot
    iteration i-1 read, and wait for that arrival of every thread. (Dots whose group outlives the body,
    wgmma's asynchronous ones, keep the "barrier" handoff: gpuir.pipeline.)"""

    def __init__(self, ctx: Lowering, plan: LoopPipeline, offset: int) -> None:
        super().__init__(ctx, plan, offset)
        assert not plan.async_dots and not plan.tma and plan.slots == plan.stages

    def start(self) -> None:
        mbarrier.init(self.ctx, self.barriers(), self.ctx.num_threads)

    def landing(self, slot: ir.Value) -> None:
        mbarrier.arrive_on_copies(self.ctx, self.at(slot, empty=False))

    def give_back(self, slot: ir.Value, phase: ir.Value, write: ir.Value, turn: _Turn) -> None:
        b = self.ctx.b
        mbarrier.arrive(self.ctx, self.at(slot, empty=True))
        # `write` is the previous iteration's slot: its phase is this one's, or the one before where the
        # ring wrapped (before the first iteration, the last slot's phase 1, which reads as completed).
        wrapped = b.icmp_unsigned("==", write, const(i32, self.plan.slots - 1))
        mbarrier.wait(self.ctx, self.at(write, empty=True), b.xor(phase, b.zext(wrapped, i32)))

    def finish(self) -> None:
        ctx = self.ctx
        ctx.call("llvm.nvvm.cp.async.wait.all", void, [])
        ctx.barrier()
        mbarrier.invalidate(ctx, self.barriers())


class _Specialized(_FullAndEmpty):
    """Slots handed over to and from a producer warp (`specialize.py`), the barriers set up at the kernel's
    entry. The producer's copies complete a slot's full barrier, which the consumers wait for; they arrive on
    its empty barrier once wgmma has retired the group that read it (the iteration after, at its
    `wait_group 1`, or the iteration itself where no group outlives it: `gpuir.defer`), and the producer
    waits for that before it copies into it again."""

    def start(self) -> None:
        """The barriers are set up at the kernel's entry (`specialize.produce`)."""

    def landing(self, slot: ir.Value) -> None:
        """The producer issues every copy."""

    def give_back(self, slot: ir.Value, phase: ir.Value, write: ir.Value, turn: _Turn) -> None:
        b = self.ctx.b
        if not self.plan.async_dots:  # every group that read the slot is retired (a deferred loop's)
            mbarrier.arrive(self.ctx, self.at(slot, empty=True))
            return
        with b.if_then(b.not_(turn.first)):  # this iteration's wait retired the previous one's group
            mbarrier.arrive(self.ctx, self.at(_previous_slot(self.ctx, self.plan, slot), empty=True))

    def finish(self) -> None:
        self.ctx.barrier()
        mbarrier.invalidate(self.ctx, self.barriers())


def _previous_slot(ctx: Lowering, plan: LoopPipeline, slot: ir.Value) -> ir.Value:
    """The slot of iteration i-1, from iteration i's."""
    b = ctx.b
    return b.select(b.icmp_unsigned("==", slot, const(i32, 0)), const(i32, plan.slots - 1), b.sub(slot, const(i32, 1)))


def _write_slot(ctx: Lowering, plan: LoopPipeline, slot: ir.Value) -> ir.Value:
    """The slot of iteration i + S-1, from iteration i's."""
    b = ctx.b
    if plan.slots == plan.stages:
        return _previous_slot(ctx, plan, slot)
    forward = b.add(slot, const(i32, plan.stages - 1))
    return b.select(b.icmp_unsigned(">=", forward, const(i32, plan.slots)), b.sub(forward, const(i32, plan.slots)), forward)


def pipelined_for(ctx: Lowering, op: Op, args: list[Regs], plan: LoopPipeline) -> list[Regs]:
    """Lower `op` as `plan` says; the loop's results."""
    b = ctx.b
    stages, slots = plan.stages, plan.slots
    lo, hi, step = args[0][0], args[1][0], args[2][0]
    specialized = plan.producer is not None
    tail = plan.producer.tail if plan.producer is not None else None
    with specialize.ring(ctx, keep=tail is not None) if specialized else ctx.scratch(plan.ring_bytes(), plan.align) \
            as ring:
        if plan.wgmma:
            align_smem(ctx)
        pipe = _Pipeline(ctx, op, plan, ring)
        hand = (_Specialized if specialized else _Mbarriers if plan.handoff == "mbarriers"
                else _Named if plan.handoff == "named" else _Handoff)(ctx, plan, pipe.barriers)
        hand.start()
        ahead: dict[int, Regs] = {}
        if isinstance(hand, _Specialized):
            specialize.produce(ctx, op, pipe, hand)
        else:
            ahead = {j: list(args[2 + j]) for j in plan.carried}
            for s in range(stages - 1):
                iv = b.add(lo, b.mul(step, const(lo.type, s))) if s else lo
                ahead = pipe.issue(iv, hi, ahead, const(i32, s))
                hand.landing(const(i32, s))
        zero = ZeroStart(ctx, op)
        header, exit_, ((iv,), (slot,), (phase,), *rows) = for_header(
            ctx, [[lo], [const(i32, 0)], [const(i32, 0)], *zero.inits(args[3:]), *ahead.values()], pipe.signed, hi)
        zero.enter(iv, lo)
        carried, ahead_phis = rows[: len(args) - 3], rows[len(args) - 3 :]
        ctx.shared.loop_begin()
        hand.take(slot, phase)
        write = _write_slot(ctx, plan, slot)

        def copies(turn: _Turn) -> dict[int, Regs]:
            """The copies of iteration i + S-1 into `write`; the ahead values it carries to the next iteration."""
            ahead = pipe.issue(turn.ahead, hi, dict(zip(plan.carried, map(list, ahead_phis))), write)
            hand.landing(write)
            return ahead

        first = _Turn(ctx, iv, lo, hi, step, pipe.signed, stages) if plan.copies_first else None
        next_ahead = copies(first) if first is not None else {}
        yields = pipe.iteration(iv, [list(r) for r in carried], slot)
        turn = first or _Turn(ctx, iv, lo, hi, step, pipe.signed, stages)
        hand.give_back(slot, phase, write, turn)
        if not specialized and first is None:
            next_ahead = copies(turn)
        ctx.loop_body_end()
        latch = b.block
        wraps = b.icmp_unsigned("==", slot, const(i32, slots - 1))
        next_slot, next_phase = b.select(wraps, const(i32, 0), b.add(slot, const(i32, 1))), b.xor(phase, b.zext(wraps, i32))
        close_phis([[iv], [slot], [phase], *carried, *ahead_phis],
                   [[b.add(iv, step)], [next_slot], [next_phase], *yields, *next_ahead.values()], latch)
        b.branch(header)
        b.position_at_end(exit_)
        if tail is None:
            hand.finish()
        else:  # the ring and its barriers stay until the `if` reading the slot the producer fills after the loop
            assert isinstance(hand, _Specialized)
            branch, load, i = tail
            ctx.ring_tails[load] = pipe.tail(load, i, hand.at(slot, empty=False), phase, slot)

            def give_back() -> None:
                hand.finish()
                specialize.release(ctx)

            ctx.after_branch[branch] = give_back
        results = [list(row) for row in carried]
    return zero.leave(settle(ctx, op, plan, results) if plan.async_dots else results, iv, lo, hi)
