"""Moving tiles through shared memory: the general way to change which thread holds what.

`gather` writes source tiles row-major into scratch shared memory, then every thread reads,
for each of its destination registers, the element an index function names. Layout
conversions, transposes, reshapes, concatenations and the fallback of broadcasts use it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import llvmlite.ir as ir

from ....ir.types import ElemType, ScalarType
from ...gpuir import LinearLayout
from .context import Lowering
from .registry import Regs
from .types import const, i8, i32, llvm_type, mem_bits

Index = list[ir.Value]
AddressFn = Callable[[Index], ir.Value]


def row_major(ctx: Lowering, idx: Sequence[ir.Value], shape: Sequence[int]) -> ir.Value:
    b = ctx.b
    flat: ir.Value = const(i32, 0)
    stride = 1
    for d in reversed(range(len(shape))):
        if shape[d] > 1:
            term = b.mul(idx[d], const(i32, stride)) if stride > 1 else idx[d]
            flat = b.add(flat, term) if not (isinstance(flat, ir.Constant) and flat.constant == 0) else term
        stride *= shape[d]
    return flat


def numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def slot(ctx: Lowering, elem: ElemType, offset: ir.Value, byte_base: int = 0) -> ir.Value:
    """The shared-memory address of element `offset` of an array at `byte_base` of scratch."""
    ty = i8 if isinstance(elem, ScalarType) and elem.is_bool() else llvm_type(elem)
    base = ctx.smem_base()
    if byte_base:
        base = ctx.b.gep(base, [const(i32, byte_base)], source_etype=i8)
    return ctx.b.gep(base, [offset], source_etype=ty)


def store_elem(ctx: Lowering, elem: ElemType, offset: ir.Value, value: ir.Value, byte_base: int = 0) -> None:
    if isinstance(elem, ScalarType) and elem.is_bool():
        value = ctx.b.zext(value, i8)
    ctx.b.store(value, slot(ctx, elem, offset, byte_base))


def load_elem(ctx: Lowering, elem: ElemType, offset: ir.Value, byte_base: int = 0) -> ir.Value:
    ptr = slot(ctx, elem, offset, byte_base)
    if isinstance(elem, ScalarType) and elem.is_bool():
        return ctx.b.trunc(ctx.b.load(ptr, typ=i8), ir.IntType(1))
    return ctx.b.load(ptr, typ=llvm_type(elem))


def elem_bytes(elem: ElemType) -> int:
    return max(mem_bits(elem) // 8, 1)


def arrays(elems: Sequence[ElemType], count: int) -> tuple[list[int], int]:
    """One array of `count` elements per type, one after the other: their byte offsets in a
    buffer, and the buffer's size."""
    offsets, total = [], 0
    for e in elems:
        offsets.append(total)
        total += -(-count * elem_bytes(e) // 8) * 8
    return offsets, total


def gather(
    ctx: Lowering, elem: ElemType, sources: Sequence[tuple[Regs, LinearLayout]], dst: LinearLayout, address: AddressFn
) -> Regs:
    """Registers of `dst`: register `r` gets the source element at `address(index of r)`,
    where source `k` lies row-major after sources `0 .. k-1`."""
    total = sum(numel(ll.shape) for _, ll in sources)
    with ctx.scratch(total * elem_bytes(elem)) as buffer:
        base = 0
        for regs, ll in sources:
            for r, value in enumerate(regs):
                offset = row_major(ctx, ctx.index(ll, r), ll.shape)
                store_elem(ctx, elem, ctx.b.add(offset, const(i32, base)) if base else offset, value, buffer)
            base += numel(ll.shape)
        ctx.barrier()
        return [load_elem(ctx, elem, address(ctx.index(dst, r)), buffer) for r in range(dst.num_regs)]


def convert(ctx: Lowering, elem: ElemType, regs: Regs, src: LinearLayout, dst: LinearLayout) -> Regs:
    """`regs` held in layout `src`, rearranged into layout `dst` (same shape)."""
    if src == dst:
        return list(regs)
    if src.same_threads(dst) and all(dst.reg_index(r) in src.reg_of_index for r in range(dst.num_regs)):
        return [regs[src.reg_of_index[dst.reg_index(r)]] for r in range(dst.num_regs)]
    return gather(ctx, elem, [(regs, src)], dst, lambda idx: row_major(ctx, idx, src.shape))
