"""A software-pipelined `for` loop (planned by `gpuir.pipeline`): cp.async into a ring of shared
buffers, `num_stages - 1` iterations ahead of the tensor-core dots that read them.

    prologue:  for s in 0 .. S-2: copies of iteration s into slot s; commit
    loop i:    wait until iteration i's copies have landed (cp.async.wait_group S-2); barrier
               the body, its dots reading slot i % S with ldmatrix
               copies of iteration i + S-1 into the slot iteration i-1 read; commit
    after:     cp.async.wait_group 0 (copies of iterations past the end still write zeros)

The barrier at the top of each iteration is the only one: it makes every thread's copies of
iteration i visible, and it is also after every thread's reads of slot i-1, which the new copies
overwrite. Copies of iterations past the end of the loop have their size set to 0 (nothing is
read; the slot is zero-filled), as are masked elements.

The copies come after the body, as in Triton's loop: an iteration starts with its ldmatrix reads
and mma, and the copies are issued while the tensor cores work through them. Issued first, the
copies and their address arithmetic stood between the barrier and the first mma in every iteration
(the LDGSTS ahead of the LDSM in the memory pipeline), and the tutorial matmul ran at 0.92x
Triton's mma.sync path on an H100 (128x128x64 and 128x256x64, 8 warps, 3 stages).

wgmma dots read the slots in place (`wgmma.py`), after the same wait and barrier and no proxy fence,
as in Triton's loop (its fence insertion fences operands stored from registers, not cp.async
copies): `fence.proxy.async` is a MEMBAR.ALL.CTA in SASS, at the top of every iteration, and the
tutorial matmul ran at 0.90-0.93x Triton's wgmma loop with it. An asynchronous dot's group of
iteration i-1 may still read its slot when iteration i's copies are issued: the ring either has a
spare slot (copies go to the slot of iteration i-2) or the copies follow a second barrier, after
every warpgroup's wait_group 1 (gpuir.pipeline chooses); the loop ends with wait_group 0.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ....ir.core import Op
from ....ir.types import ScalarType, elem_of
from ...gpuir.mma import MmaOperand
from ...gpuir.pipeline import AsyncLoad, LoopPipeline
from .context import Lowering
from .ldmatrix import SharedOperand, split_addresses, swizzled_offset
from .phis import close_phis, for_header, less
from .registry import Regs
from .types import const, i8, i32, llvm_type, void
from .wgmma import ZeroStart, align_smem, settle


def _copy(ctx: Lowering, a: AsyncLoad, slot_base: ir.Value, live: ir.Value) -> None:
    """The asynchronous copies of `a`'s tile (pointers and mask as currently lowered) into a slot."""
    b = ctx.b
    ptr = a.load.operands[0]
    mask = ctx.get(a.load.operands[1]) if len(a.load.operands) > 1 else None
    ptrs, ll = ctx.get(ptr), ctx.layout(ptr)
    contig, rows = a.shared.order
    kind = "cg" if a.copy_bytes == 16 else "ca"  # .cg (L2 only) exists for 16 bytes alone
    name = f"llvm.nvvm.cp.async.{kind}.shared.global.{a.copy_bytes}.s"
    elem = llvm_type(elem_of(a.load.result.type))
    for g in range(0, ll.num_regs, a.vec):
        idx = ctx.index(ll, g)
        dst = b.gep(slot_base, [swizzled_offset(ctx, a.shared, ll.shape, idx[rows], idx[contig])], source_etype=elem)
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
        self.split = [self._split(a) for a in plan.loads]

    def _split(self, a: AsyncLoad) -> bool:
        """Whether the ring reads of load `a` take split addresses (`ldmatrix.split_addresses`, from
        the dot it feeds)."""
        enc = self.ctx.gpu.encoding(a.convert.result)
        for op in self.body.ops:
            if op.name == "dot" and isinstance(enc, MmaOperand) and any(v is a.convert.result for v in op.operands[:2]):
                return split_addresses(self.ctx.layout(op.result), enc.parent.warps_per_cta)
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
            ctx.lower_op(op)
        live = less(ctx, self.signed, iv, hi)
        for i, a in enumerate(self.plan.loads):
            _copy(ctx, a, self.slot_base(i, slot), live)
        ctx.call("llvm.nvvm.cp.async.commit.group", void, [])
        yields = self.body.terminator
        assert yields is not None
        return {j: list(ctx.get(yields.operands[j - 1])) for j in self.plan.carried}

    def iteration(self, iv: ir.Value, carried: list[Regs], slot: ir.Value) -> list[Regs]:
        """The body for iteration `iv` with its loads' tiles in `slot`; the values it yields."""
        ctx, plan = self.ctx, self.plan
        skip = {a.load for a in plan.loads} | {a.convert for a in plan.loads}
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
        for op in self.body.ops:
            if op is yields or op in skip or (op in ahead and op not in plan.current):
                continue
            ctx.lower_op(op)
        out = []
        for v, phi in zip(yields.operands, carried):
            owner = v.owner
            stale = isinstance(owner, Op) and owner in ahead and owner not in plan.current
            out.append(phi if stale else ctx.get(v))
        return out


def pipelined_for(ctx: Lowering, op: Op, args: list[Regs], plan: LoopPipeline) -> list[Regs]:
    """Lower `op` as `plan` says; the loop's results."""
    b = ctx.b
    stages = plan.stages
    lo, hi, step = args[0][0], args[1][0], args[2][0]
    with ctx.scratch(plan.ring_bytes(), plan.align) as ring:
        if plan.wgmma:
            align_smem(ctx)
        pipe = _Pipeline(ctx, op, plan, ring)
        ahead = {j: list(args[2 + j]) for j in plan.carried}
        for s in range(stages - 1):
            iv = b.add(lo, b.mul(step, const(lo.type, s))) if s else lo
            ahead = pipe.issue(iv, hi, ahead, const(i32, s))
        zero = ZeroStart(ctx, op)
        header, exit_, ((iv,), (slot,), *rows) = for_header(
            ctx, [[lo], [const(i32, 0)], *zero.inits(args[3:]), *ahead.values()], pipe.signed, hi)
        zero.enter(iv, lo)
        carried, ahead_phis = rows[: len(args) - 3], rows[len(args) - 3 :]
        ctx.shared.loop_begin()
        ctx.call("llvm.nvvm.cp.async.wait.group", void, [const(i32, stages - 2)])
        ctx.barrier()
        last = const(i32, plan.slots - 1)
        if plan.slots == stages:
            write = b.select(b.icmp_unsigned("==", slot, const(i32, 0)), last, b.sub(slot, const(i32, 1)))
        else:  # iteration i + stages - 1 goes to slot (i + stages - 1) % slots
            forward = b.add(slot, const(i32, stages - 1))
            wraps = b.icmp_unsigned(">=", forward, const(i32, plan.slots))
            write = b.select(wraps, b.sub(forward, const(i32, plan.slots)), forward)
        yields = pipe.iteration(iv, [list(r) for r in carried], slot)
        if plan.async_dots and not plan.spare_slot:  # every warpgroup's wait retired slot i-1's group
            ctx.barrier()
        iv_ahead = b.add(iv, b.mul(step, const(lo.type, stages - 1)))
        next_ahead = pipe.issue(iv_ahead, hi, dict(zip(plan.carried, map(list, ahead_phis))), write)
        ctx.loop_body_end()
        latch = b.block
        next_slot = b.select(b.icmp_unsigned("==", slot, last), const(i32, 0), b.add(slot, const(i32, 1)))
        close_phis([[iv], [slot], *carried, *ahead_phis],
                   [[b.add(iv, step)], [next_slot], *yields, *next_ahead.values()], latch)
        b.branch(header)
        b.position_at_end(exit_)
        ctx.call("llvm.nvvm.cp.async.wait.group", void, [const(i32, 0)])
        results = [list(row) for row in carried]
    return zero.leave(settle(ctx, op, plan, results) if plan.async_dots else results, iv, lo, hi)

