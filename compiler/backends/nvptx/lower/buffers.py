"""Shared-memory buffers as values: `local_alloc` stores a tile once, `local_load` reads it back.

A buffer's one register is its address in shared memory. `local_alloc` takes a buffer of its own for
the rest of the kernel (`Lowering.shared`, which reuses no byte of it) and stores the tile in the
buffer type's swizzled layout; a barrier makes the stores visible before any read. `local_load` into a
16-bit tensor-core operand produces no instruction: its dots read the buffer with `ldmatrix` a K step
at a time (`lower/mma.py`), so the operand takes no registers across a loop (`gpuir.hoist`).
"""

from __future__ import annotations

import llvmlite.ir as ir

from ....ir.core import Op
from ....ir.types import BufferType
from ...gpuir.mma import MmaOperand
from ...gpuir.ops import LOCAL_ALLOC, LOCAL_LOAD
from ...gpuir.shared import SwizzledShared
from . import ldmatrix
from .context import Lowering
from .registry import Regs, lowering
from .smem import elem_bytes, numel


@lowering(LOCAL_ALLOC)
def local_alloc(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    buf = op.result.type
    assert isinstance(buf, BufferType) and isinstance(buf.encoding, SwizzledShared)
    elem = ctx.elem(op.result)
    placed = ctx.shared.alloc(numel(buf.shape) * elem_bytes(elem))
    if placed.barrier:
        ctx.barrier()
    base = ldmatrix.store_swizzled(ctx, elem, args[0], ctx.layout(op.operands[0]), buf.encoding, placed.offset)
    ctx.barrier()
    return [[base]]


@lowering(LOCAL_LOAD)
def local_load(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    buf, enc, elem = op.operands[0].type, ctx.gpu.encoding(op.result), ctx.elem(op.result)
    assert isinstance(buf, BufferType) and isinstance(buf.encoding, SwizzledShared)
    if not ldmatrix.fits(enc, elem):
        raise ValueError(f"a shared-memory buffer is read only into a 16-bit tensor-core operand (by ldmatrix), "
                         f"not into {enc}")
    assert isinstance(enc, MmaOperand)
    dst = ctx.layout(op.result)
    ctx.shared_operands[op.result] = ldmatrix.SharedOperand(elem, dst, buf.encoding, args[0][0], enc.op_idx)
    return [[ir.Constant(ctx.ltype(op.result), None)] * dst.num_regs]
