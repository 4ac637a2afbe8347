"""wgmma operands that nothing else put in shared memory are stored there in the GPU IR.

wgmma reads both operands from shared memory (A may come from registers instead: `operand_a`). A
pipelined loop's ring holds its loads' tiles (`pipeline`) and `hoist` keeps loop invariants in
buffers of their own; any other operand (a tile computed in the loop, one loaded without cp.async, a
lone `tl.dot(a, b)`) is stored into a buffer here, in the swizzle atoms the instruction's descriptors
read:

    %buf = local_alloc() {dtype = fp16, shape = [128, 64]} : shared<128x64xfp16> #L9      (at entry)
    ...
    local_store(%buf, %a)                  where the conversion to the operand was
    %x = local_load(%buf) : tile<128x64xfp16> #L10
    %y = dot(%x, ...)

so that the GPU-IR dump shows every shared-memory buffer the dot reads and every store into one. The
buffer lives for the kernel (`lower/buffers.py`): a loop stores into it every iteration, so the dot
that reads it is never left running into the next one (`pipeline` makes no such dot asynchronous).
"""

from __future__ import annotations

from ...ir.core import Op
from ...ir.types import BufferType, ScalarType, TileType
from ...passes.rewrite import Subst, rewrite_block
from .assign import GpuFunction
from .mma import Mma, MmaOperand
from .ops import CONVERT, LOCAL_ALLOC, LOCAL_LOAD, LOCAL_STORE
from .shared import operand_shared


def _staged(gpu: GpuFunction) -> list[Op]:
    """The conversions to each wgmma operand that no ring, buffer or register holds."""
    in_rings = {a.convert for plan in gpu.pipelines.values() for a in plan.loads}
    found = []
    for op in gpu.fn.walk():
        enc = gpu.encoding(op.result) if op.name == "dot" else None
        if not isinstance(enc, Mma) or enc.version != 3:
            continue
        for i in (0, 1):
            conv = op.operands[i].owner
            if i == 0 and op.attrs.get("operand_a") == "registers":
                continue
            if isinstance(conv, Op) and conv.name == CONVERT and conv not in in_rings:
                found.append(conv)
    return found


def stage_wgmma_operands(gpu: GpuFunction) -> None:
    """Store each wgmma operand that nothing holds in shared memory into a buffer of its own (in place):
    an empty `local_alloc` at the kernel's entry, and the operand's conversion replaced by a
    `local_store` of its source and a `local_load`."""
    staged = set(_staged(gpu))
    allocs: list[Op] = []

    def visit(conv: Op, subst: Subst) -> list[Op] | None:
        if conv not in staged:
            return None
        src, enc = conv.operands[0], gpu.encoding(conv.result)
        ty = src.type
        assert isinstance(ty, TileType) and isinstance(enc, MmaOperand) and isinstance(ty.element_ty, ScalarType)
        size = ty.element_ty.itemsize
        shared = operand_shared(gpu.layout(src), enc.op_idx, size, k_major=size == 1).atoms()
        alloc = Op(LOCAL_ALLOC, [], [BufferType(ty.shape, ty.element_ty, shared)],
                   {"dtype": ty.element_ty, "shape": list(ty.shape)}, (), conv.loc)
        allocs.append(alloc)
        store = Op(LOCAL_STORE, [alloc.result, src], [], {}, (), conv.loc)
        conv.name, conv.operands = LOCAL_LOAD, [alloc.result]
        return [store, conv]

    rewrite_block(gpu.fn.body, visit, {})
    gpu.fn.body.ops[:0] = allocs
