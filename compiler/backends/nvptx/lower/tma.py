"""Descriptor loads copied by the tensor memory accelerator (TMA, sm_90): `cp.async.bulk.tensor`, one
per swizzle atom of the block, issued by one thread through the load's tensor map (a parameter of the
kernel: `gpuir/tma.py`), completing an mbarrier that expects the block's bytes.

    thread 0:  mbarrier.arrive.expect_tx [bar], bytes
               cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes
                   [atom j], [tensor map, {col + j * atom columns, row}], [bar]     for each atom j
    everyone:  wait for the barrier's phase

The coordinates are the block's offsets, innermost first; out of the tensor's bounds (negative
coordinates included) the copy writes the map's fill, zeros or NaN, as the expanded load reads.
In a pipelined loop the copies fill ring slots (`pipeline.py`); anywhere else the block is copied
into a scratch buffer and read into registers.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ....ir.core import Op
from ....ir.types import ScalarType, elem_of
from ...errors import op_error
from ...gpuir.tma import atom_columns, shared_layout
from . import mbarrier
from .context import Lowering
from .ldmatrix import load_swizzled
from .registry import RULES, Regs, lowering
from .types import const, i1, i8, i32, i64, void
from .wgmma import align_smem

BARRIER_BYTES = 8

RULES.unsupported("expanded to a masked store before layout assignment (passes/descriptors.py)", "descriptor_store")


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
