"""Layout conversions of loop invariants run once, before their loop.

A tile loaded before a loop and used by a dot inside it (attention's Q, the first dot's A) is
converted to its operand layout where the dot is: in the loop, through shared memory in every
iteration. A conversion whose source is defined outside the loop gives the same registers in
every iteration, so it moves to just before the loop (out of each enclosing loop it does not
depend on), as Triton's loop-invariant code motion does. A 16-bit mma.sync operand is instead kept
in shared memory: `local_alloc` stores it once before the loop, swizzled for `ldmatrix`, and the
conversion becomes a `local_load` of that buffer, which its dots read a K step at a time, as
Triton's do, instead of holding the whole tile in registers across the loop (attention's Q: 32
registers a thread at 128x64 on 4 warps, the difference between spilling and not). A wgmma operand
is kept so too, in the swizzle atoms that the instruction's descriptors read in place: without it
the dot stored its source into shared memory, fenced and waited in every iteration. Another wgmma
operand conversion (of an accumulator) stays where it is: it produces nothing, the dot reads its
source itself.
"""

from __future__ import annotations

from ...ir.core import Block, Op, Value
from ...ir.types import BufferType, ScalarType, TileType, elem_of
from .assign import GpuFunction
from .mma import Mma, MmaOperand
from .ops import CONVERT, LOCAL_ALLOC, LOCAL_LOAD
from .shared import operand_shared


def _defined(block: Block) -> set[Value]:
    ids = set(block.args)
    for op in block.walk():
        ids.update(op.results)
        for region in op.regions:
            ids.update(region.args)
    return ids


def _movable(gpu: GpuFunction, op: Op, inner: set[Value]) -> bool:
    if op.name != CONVERT or op.operands[0] in inner:
        return False
    enc = gpu.encoding(op.result)
    return not (isinstance(enc, MmaOperand) and enc.parent.version == 3) or _resident(gpu, op)


def _resident(gpu: GpuFunction, op: Op) -> bool:
    """Whether the conversion `op` reads into an operand that its dots can read from shared memory:
    by ldmatrix (16-bit mma.sync operands) or by wgmma's descriptors."""
    enc, elem = gpu.encoding(op.result), elem_of(op.result.type)
    if not isinstance(enc, MmaOperand) or not isinstance(elem, ScalarType) or isinstance(gpu.encoding(op.operands[0]), Mma):
        return False
    return enc.parent.version == 3 or (enc.k_width == 2 and elem.itemsize == 2)


def _keep_in_shared(gpu: GpuFunction, conv: Op, stored: dict[tuple[Value, BufferType], Value]) -> list[Op]:
    """The `local_alloc` of `conv`'s source, swizzled as its dots read it (`ldmatrix`, or wgmma's
    swizzle atoms, K-major for 8-bit types), unless `stored` (the buffers allocated earlier in the
    same block, by source and type) has it already; `conv` becomes its `local_load`."""
    src = conv.operands[0]
    ty, enc = src.type, gpu.encoding(conv.result)
    assert isinstance(ty, TileType) and isinstance(enc, MmaOperand) and isinstance(ty.element_ty, ScalarType)
    size = ty.element_ty.itemsize
    wgmma = enc.parent.version == 3
    swizzled = operand_shared(gpu.layout(src), enc.op_idx, size, k_major=wgmma and size == 1)
    if wgmma:
        swizzled = swizzled.atoms()
    key = (src, BufferType(ty.shape, ty.element_ty, swizzled))
    new: list[Op] = []
    if key not in stored:
        new.append(Op(LOCAL_ALLOC, [src], [key[1]], {}, (), conv.loc))
        stored[key] = new[0].result
    conv.name, conv.operands = LOCAL_LOAD, [stored[key]]
    return new


def _hoist(gpu: GpuFunction, block: Block) -> None:
    """Hoist out of each loop of `block`. Loops one after another that read the same invariant in shared memory
    (tutorial 06's causal attention: Q, in the loop before the diagonal blocks and in the one over them) read one
    buffer, stored once: a buffer is never written after its `local_alloc`."""
    ops: list[Op] = []
    stored: dict[tuple[Value, BufferType], Value] = {}
    for op in block.ops:
        for region in op.regions:
            _hoist(gpu, region)
        if op.name == "for":
            body = op.regions[0]
            inner = _defined(body)
            invariant = [o for o in body.ops if _movable(gpu, o, inner)]
            kept = [o for o in invariant if _resident(gpu, o)]
            moved = [o for o in invariant if all(o is not k for k in kept)]
            body.ops = [o for o in body.ops if all(o is not m for m in moved)]
            for o in invariant:
                ops.extend(_keep_in_shared(gpu, o, stored) if any(o is k for k in kept) else [o])
        ops.append(op)
    block.ops = ops


def hoist_invariant_converts(gpu: GpuFunction) -> None:
    """Move the top-level conversions of each `for` body whose source the body does not define
    to just before the loop (in place, innermost loops first); keep 16-bit mma.sync operands in
    shared memory instead (`local_alloc` before the loop, `local_load` in it)."""
    _hoist(gpu, gpu.fn.body)
