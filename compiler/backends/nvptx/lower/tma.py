"""Descriptor loads and stores carried out by the tensor memory accelerator (TMA, sm_90): one
`cp.async.bulk.tensor` per swizzle atom of the block, issued by one thread through the access's
tensor map (a parameter of the kernel: `gpuir/tma.py`).

A load completes an mbarrier that expects the block's bytes:

    thread 0:  mbarrier.arrive.expect_tx [bar], bytes
               cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes
                   [atom j], [tensor map, {col + j * atom columns, row}], [bar]     for each atom j
    everyone:  wait for the barrier's phase

The coordinates are the block's offsets, innermost first; out of the tensor's bounds (negative
coordinates included) the copy writes the map's fill, zeros or NaN, as the expanded load reads.
In a pipelined loop the copies fill ring slots (`pipeline.py`), and so do a producer warp's copies of a
deferred loop's last B (read from the slot after the loop); anywhere else the block is copied into a
scratch buffer and read into registers.

A store writes the tile from registers into scratch shared memory in the layout the map's box reads
(the swizzled atoms a load lands), then hands it to the async proxy:

    everyone:  st.shared (16-byte vectors where the registers allow), fence.proxy.async.shared::cta
    barrier
    thread 0:  cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [tensor map, {x_j, row}], [atom j]
               cp.async.bulk.commit_group
               cp.async.bulk.wait_group.read 0     (the copies have read the buffer: it may be reused)

TMA writes no element of a box outside the tensor, as the expanded store's mask writes none; the
buffer's next writer waits at a barrier after thread 0's wait (the allocator's, `ctx.scratch`).
"""

from __future__ import annotations

import llvmlite.ir as ir

from ....ir.core import Op
from ....ir.types import ScalarType, elem_of, shape_of
from ...errors import op_error
from ...gpuir import LinearLayout
from ...gpuir.tma import MAX_BOX, atom_columns, shared_layout
from . import mbarrier
from .context import Lowering
from .ldmatrix import load_swizzled
from .registry import Regs, lowering
from .smem import store_elems, vector_groups
from .types import const, i1, i8, i32, i64, void
from .wgmma import align_smem

BARRIER_BYTES = 8


def block_bytes(op: Op) -> int:
    """The bytes of `op`'s block."""
    elem = elem_of(op.result.type)
    assert isinstance(elem, ScalarType)
    rows, cols = op.attrs["shape"]
    return int(rows * cols * elem.itemsize)


def expect(ctx: Lowering, bar: ir.Value, nbytes: int) -> None:
    """The calling thread's arrival on `bar`, whose phase then also waits for `nbytes` of copies."""
    ctx.call("llvm.nvvm.mbarrier.arrive.expect.tx.scope.cta.space.cta", i64, [bar, const(i32, nbytes)])


def copy(ctx: Lowering, op: Op, dst: ir.Value, bar: ir.Value) -> None:
    """The copies of `op`'s block (its offsets as lowered) to `dst` in shared memory, completing on `bar`."""
    elem = elem_of(op.result.type)
    assert isinstance(elem, ScalarType)
    rows, width = op.attrs["shape"]
    cols = atom_columns((rows, width), elem.itemsize)
    row, col = (ctx.get(v)[0] for v in op.operands[-2:])
    b = ctx.b
    for j in range(width // cols):
        at = b.gep(dst, [const(i32, j * rows * cols * elem.itemsize)], source_etype=i8) if j else dst
        x = b.add(col, const(i32, j * cols)) if j else col
        ctx.call("llvm.nvvm.cp.async.bulk.tensor.g2s.cta.tile.2d", void,
                 [at, bar, ctx.tensor_maps[op], x, row, const(i64, 0), const(i1, 0)])


def init_barriers(ctx: Lowering, barriers: list[ir.Value]) -> None:
    """Thread 0 sets up `barriers` for one arrival a phase (the thread that issues the copies); the
    setup is made visible to the copies (the async proxy), then to every thread."""
    b = ctx.b
    with b.if_then(b.icmp_unsigned("==", ctx.tid, const(i32, 0))):
        for bar in barriers:
            ctx.call("llvm.nvvm.mbarrier.init.shared", void, [bar, const(i32, 1)])
        ctx.call("llvm.nvvm.fence.proxy.async.shared_cta", void, [])
    ctx.barrier()


@lowering("descriptor_load")
def descriptor_load(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    """A block TMA copies outside a pipelined loop: into a scratch buffer, then into registers."""
    if op not in ctx.tensor_maps:
        raise op_error(op, "a descriptor load reaches the lowering only when TMA copies it (`tma` = its tensor "
                       "map's index); the others are expanded to masked loads first", ctx.kernel)
    if op in ctx.ring_tails:  # copied into a ring slot by a producer warp
        return [ctx.ring_tails.pop(op)()]
    elem = elem_of(op.result.type)
    assert isinstance(elem, ScalarType)
    nbytes = block_bytes(op)
    b = ctx.b
    align_smem(ctx)
    with ctx.scratch(nbytes + BARRIER_BYTES, 1024) as buffer:
        bar = mbarrier.at(ctx, buffer + nbytes)
        init_barriers(ctx, [bar])
        with b.if_then(b.icmp_unsigned("==", ctx.tid, const(i32, 0))):
            expect(ctx, bar, nbytes)
            copy(ctx, op, b.gep(ctx.smem_base(), [const(i32, buffer)], source_etype=i8), bar)
        mbarrier.wait(ctx, bar, const(i32, 0))
        regs = load_swizzled(ctx, elem, ctx.layout(op.result), shared_layout(tuple(op.attrs["shape"]), elem.itemsize),
                             buffer)
        ctx.barrier()
        mbarrier.invalidate(ctx, [bar])
    return [regs]


@lowering("descriptor_store")
def descriptor_store(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    """A block TMA stores: from registers into a scratch buffer in the layout of its map's boxes (a 2-D
    block's swizzled atoms, a 1-D block's elements in order), then one bulk copy per box from one thread,
    whose reads of the buffer it waits for."""
    if op not in ctx.tensor_maps:
        raise op_error(op, "a descriptor store reaches the lowering only when TMA stores it (`tma` = its tensor "
                       "map's index); the others are expanded to masked stores first", ctx.kernel)
    value = op.operands[-1]
    elem = elem_of(value.type)
    assert isinstance(elem, ScalarType)
    block = shape_of(value.type)
    rank = len(block)
    layout = ctx.layout(value)
    box = min(block[0], MAX_BOX) if rank == 1 else atom_columns(block, elem.itemsize)  # a box's columns
    box_bytes = box * elem.itemsize * (block[0] if rank == 2 else 1)
    coords = [ctx.get(v)[0] for v in reversed(op.operands[2 * rank : 3 * rank])]  # the offsets, innermost first
    b = ctx.b
    if rank == 2:
        align_smem(ctx)
    with ctx.scratch(box_bytes * (block[-1] // box), 1024 if rank == 2 else 128) as buffer:
        offsets = layout.compose(shared_layout(block, elem.itemsize).linear(block).invert()) if rank == 2 else layout
        _write(ctx, elem, args[-1], offsets, buffer)
        ctx.call("llvm.nvvm.fence.proxy.async.shared_cta", void, [])
        ctx.barrier()
        src = b.gep(ctx.smem_base(), [const(i32, buffer)], source_etype=i8)
        with b.if_then(b.icmp_unsigned("==", ctx.tid, const(i32, 0))):
            for j in range(block[-1] // box):
                at = b.gep(src, [const(i32, j * box_bytes)], source_etype=i8) if j else src
                x = b.add(coords[0], const(i32, j * box)) if j else coords[0]
                ctx.call(f"llvm.nvvm.cp.async.bulk.tensor.s2g.tile.{rank}d", void,
                         [at, ctx.tensor_maps[op], x, *coords[1:], const(i64, 0), const(i1, 0)])
            ctx.call("llvm.nvvm.cp.async.bulk.commit.group", void, [])
            ctx.call("llvm.nvvm.cp.async.bulk.wait.group.read", void, [const(i32, 0)])
    return []


def _write(ctx: Lowering, elem: ScalarType, regs: Regs, offsets: LinearLayout, buffer: int) -> None:
    """Store `regs` at byte `buffer` of shared memory, where `offsets` (a linear layout of the element offset
    over registers, lanes and warps) places them, a vector along the offset at a time.

    The swizzle is linear, so a register's offset is the thread's XOR the register's constant: its bits that
    no lane or warp sets are added (the store's immediate), the others XORed into the thread's offset, once for
    each value they take (a few), so that the store holds few addresses live at once."""
    b = ctx.b
    thread: ir.Value = const(i32, 0)
    lane_bits = 0
    for source, bases in ((ctx.lane, offsets.lane), (ctx.warp, offsets.warp)):
        for bit, basis in enumerate(bases):
            if basis[0]:
                lane_bits |= basis[0]
                on = b.and_(b.lshr(source, const(i32, bit)), const(i32, 1))
                thread = b.xor(thread, b.mul(on, const(i32, basis[0])))
    mixed: dict[int, ir.Value] = {0: thread}
    for group in vector_groups(offsets, elem, dim=0):
        static = offsets.reg_index(group[0])[0]
        key = static & lane_bits
        if key not in mixed:
            mixed[key] = b.xor(thread, const(i32, key))
        offset = b.add(mixed[key], const(i32, static & ~lane_bits)) if static & ~lane_bits else mixed[key]
        store_elems(ctx, elem, offset, [regs[r] for r in group], buffer)
