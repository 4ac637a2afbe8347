"""Shared-memory buffers: `local_alloc` makes one (holding a tile, or empty), `local_store` writes a
tile into one made empty, `local_load` reads one.

A buffer's one register is its address in shared memory. `local_alloc` takes a buffer of its own for
the rest of the kernel (`Lowering.shared`, which reuses no byte of it) and stores the tile in the
buffer type's swizzled layout; a barrier makes the stores visible before any read (and a proxy fence
before it, to wgmma's reads of a buffer in swizzle atoms). `local_store` does the same into an empty
buffer, after a barrier: every thread has finished with what it held (the dots that read it wait for
their group before their warps go on). `local_load` into a tensor-core operand produces no
instruction: its dots read the buffer with `ldmatrix` a K step at a time (`lower/mma.py`) or through
wgmma's descriptors (`lower/wgmma.py`), so the operand takes no registers across a loop
(`gpuir.hoist`).
"""

from __future__ import annotations

import llvmlite.ir as ir

from ....ir.core import Op
from ....ir.types import BufferType
from ...gpuir.mma import MmaOperand
from ...gpuir.ops import LOCAL_ALLOC, LOCAL_LOAD, LOCAL_STORE
from ...gpuir.shared import SwizzledShared
from . import ldmatrix
from .context import Lowering
from .registry import Regs, lowering
from .smem import elem_bytes, numel
from .types import const, i8, i32, void
from .wgmma import align_smem


@lowering(LOCAL_ALLOC)
def local_alloc(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    buf = op.result.type
    assert isinstance(buf, BufferType) and isinstance(buf.encoding, SwizzledShared)
    elem = ctx.elem(op.result)
    atoms = bool(buf.encoding.block)  # read by wgmma: 1024-byte aligned, the pattern a function of the address
    if atoms:
        align_smem(ctx)
    placed = ctx.shared.alloc(numel(buf.shape) * elem_bytes(elem), *((1024,) if atoms else ()))
    if placed.barrier:
        ctx.barrier()
    ctx.buffers[op.result] = placed.offset
    if not op.operands:  # empty until a local_store
        return [[ctx.b.gep(ctx.smem_base(), [const(i32, placed.offset)], source_etype=i8)]]
    base = ldmatrix.store_swizzled(ctx, elem, args[0], ctx.layout(op.operands[0]), buf.encoding, placed.offset)
    _publish(ctx, atoms)
    return [[base]]


@lowering(LOCAL_STORE)
def local_store(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    buf, tile = op.operands
    assert isinstance(buf.type, BufferType) and isinstance(buf.type.encoding, SwizzledShared)
    ctx.barrier()  # what the buffer held is read by every thread (and every wgmma group) that reads it
    ldmatrix.store_swizzled(ctx, ctx.elem(tile), args[1], ctx.layout(tile), buf.type.encoding, ctx.buffers[buf])
    _publish(ctx, bool(buf.type.encoding.block))
    return []


def _publish(ctx: Lowering, atoms: bool) -> None:
    """Make a buffer's stores visible to every thread, and to wgmma's reads (the async proxy) when in atoms."""
    if atoms:
        ctx.call("llvm.nvvm.fence.proxy.async.shared_cta", void, [])
    ctx.barrier()


@lowering(LOCAL_LOAD)
def local_load(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    buf, enc, elem = op.operands[0].type, ctx.gpu.encoding(op.result), ctx.elem(op.result)
    assert isinstance(buf, BufferType) and isinstance(buf.encoding, SwizzledShared)
    wgmma = isinstance(enc, MmaOperand) and enc.parent.version == 3 and bool(buf.encoding.block)
    if not (wgmma or ldmatrix.fits(enc, elem)):
        raise ValueError(f"a shared-memory buffer is read only into a tensor-core operand (a 16-bit one by "
                         f"ldmatrix, a wgmma one from swizzle atoms), not into {enc}")
    assert isinstance(enc, MmaOperand)
    dst = ctx.layout(op.result)
    ctx.shared_operands[op.result] = ldmatrix.SharedOperand(elem, dst, buf.encoding, args[0][0], enc.op_idx)
    return [[ir.Constant(ctx.ltype(op.result), None)] * dst.num_regs]
