"""Moving tiles through shared memory: the general way to change which thread holds what.

`gather` writes source tiles row-major into scratch shared memory, then every thread reads,
for each of its destination registers, the element an index function names. Layout
conversions, transposes, reshapes, concatenations and the fallback of broadcasts use it.

Registers that hold consecutive elements of a row, aligned (`LinearLayout.contiguous_regs`),
move as one vector of up to 16 bytes (`ld.shared.v4.b32`): a dot operand's rows then take one
access where they took eight, which also shrinks the LLVM IR that LLVM must optimise.
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


def row_major(ctx: Lowering, idx: Sequence[ir.Value], shape: Sequence[int], pad: int = 0) -> ir.Value:
    """The offset of `idx` in a row-major array of `shape` whose rows (along the last dim) are
    `pad` elements longer than the shape says."""
    b = ctx.b
    flat: ir.Value = const(i32, 0)
    stride = 1
    for d in reversed(range(len(shape))):
        if shape[d] > 1:
            term = b.mul(idx[d], const(i32, stride)) if stride > 1 else idx[d]
            flat = b.add(flat, term) if not (isinstance(flat, ir.Constant) and flat.constant == 0) else term
        stride *= shape[d] + (pad if d == len(shape) - 1 else 0)
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


def store_elems(ctx: Lowering, elem: ElemType, offset: ir.Value, values: Sequence[ir.Value], byte_base: int = 0) -> None:
    """Store `values` at elements `offset`, `offset + 1`, ...: one access when there are several
    (the caller guarantees `offset` is a multiple of their count)."""
    if len(values) == 1:
        value = values[0]
        if isinstance(elem, ScalarType) and elem.is_bool():
            value = ctx.b.zext(value, i8)
        ctx.b.store(value, slot(ctx, elem, offset, byte_base))
        return
    vector: ir.Value = ir.Constant(ir.VectorType(llvm_type(elem), len(values)), ir.Undefined)
    for j, value in enumerate(values):
        vector = ctx.b.insert_element(vector, value, const(i32, j))
    ctx.b.store(vector, slot(ctx, elem, offset, byte_base), align=len(values) * elem_bytes(elem))


def load_elems(ctx: Lowering, elem: ElemType, offset: ir.Value, count: int = 1, byte_base: int = 0) -> list[ir.Value]:
    """The `count` elements from element `offset` on: one access when there are several (the
    caller guarantees `offset` is a multiple of `count`)."""
    ptr = slot(ctx, elem, offset, byte_base)
    if count > 1:
        vector = ctx.b.load(ptr, typ=ir.VectorType(llvm_type(elem), count), align=count * elem_bytes(elem))
        return [ctx.b.extract_element(vector, const(i32, j)) for j in range(count)]
    if isinstance(elem, ScalarType) and elem.is_bool():
        return [ctx.b.trunc(ctx.b.load(ptr, typ=i8), ir.IntType(1))]
    return [ctx.b.load(ptr, typ=llvm_type(elem))]


def store_elem(ctx: Lowering, elem: ElemType, offset: ir.Value, value: ir.Value, byte_base: int = 0) -> None:
    store_elems(ctx, elem, offset, [value], byte_base)


def load_elem(ctx: Lowering, elem: ElemType, offset: ir.Value, byte_base: int = 0) -> ir.Value:
    return load_elems(ctx, elem, offset, 1, byte_base)[0]


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


def vector_groups(ll: LinearLayout, elem: ElemType, base: int = 0, dim: int = -1) -> list[list[int]]:
    """`ll`'s registers in groups that move as one shared-memory access each, in a row-major
    array of `ll.shape` starting at element `base` of a 16-byte aligned buffer: register bits
    `p_0, p_1, ...` that step dimension `dim` (the last by default) by 1, 2, ... (wherever they
    are among the register bits) while every other basis steps it by a multiple of the group's
    size, so that a group is that many consecutive, aligned elements of one row (at most 16
    bytes)."""
    bits: list[int] = []
    if isinstance(elem, ScalarType) and not elem.is_bool() and ll.rank:
        last = dim % ll.rank
        while (1 << len(bits)) < 16 // elem_bytes(elem):
            unit = tuple((1 << len(bits)) if d == last else 0 for d in range(ll.rank))
            if unit not in ll.reg:
                break
            bits.append(ll.reg.index(unit))
        while bits:
            width = 1 << len(bits)
            others = [b for i, b in enumerate(ll.reg) if i not in bits] + list(ll.lane + ll.warp)
            if not (ll.shape[last] % width or base % width or any(b[last] % width for b in others)):
                break
            bits.pop()
    mask = sum(1 << p for p in bits)
    members = [sum(((t >> j) & 1) << p for j, p in enumerate(bits)) for t in range(1 << len(bits))]
    return [[r | m for m in members] for r in range(ll.num_regs) if not r & mask]


def gather(
    ctx: Lowering,
    elem: ElemType,
    sources: Sequence[tuple[Regs, LinearLayout]],
    dst: LinearLayout,
    address: AddressFn | None = None,
    pad: int = 0,
) -> Regs:
    """Registers of `dst`: register `r` gets the source element at `address(index of r)` (by
    default the row-major offset of that index in `dst.shape`, which lets reads be vectors),
    where source `k` lies row-major after sources `0 .. k-1`. With `pad` (one source, no
    `address`, a multiple of 16 bytes), rows are that many elements longer: rows that a warp
    writes at once then start in different banks."""
    assert not pad or (len(sources) == 1 and address is None and pad * elem_bytes(elem) % 16 == 0)
    total = sum(numel(ll.shape) + pad * numel(ll.shape[:-1]) for _, ll in sources)
    with ctx.scratch(total * elem_bytes(elem)) as buffer:
        base = 0
        for regs, ll in sources:
            for group in vector_groups(ll, elem, base):
                offset = row_major(ctx, ctx.index(ll, group[0]), ll.shape, pad)
                offset = ctx.b.add(offset, const(i32, base)) if base else offset
                store_elems(ctx, elem, offset, [regs[r] for r in group], buffer)
            base += numel(ll.shape)
        ctx.barrier()
        if address is not None:
            return [load_elem(ctx, elem, address(ctx.index(dst, r)), buffer) for r in range(dst.num_regs)]
        loaded: dict[int, ir.Value] = {}
        for group in vector_groups(dst, elem):
            values = load_elems(ctx, elem, row_major(ctx, ctx.index(dst, group[0]), dst.shape, pad), len(group), buffer)
            loaded.update(zip(group, values))
        return [loaded[r] for r in range(dst.num_regs)]


def convert(ctx: Lowering, elem: ElemType, regs: Regs, src: LinearLayout, dst: LinearLayout, pad: int = 0) -> Regs:
    """`regs` held in layout `src`, rearranged into layout `dst` (same shape), through rows
    `pad` elements longer where it moves them through shared memory (`gather`)."""
    if src == dst:
        return list(regs)
    if src.same_threads(dst) and all(dst.reg_index(r) in src.reg_of_index for r in range(dst.num_regs)):
        return [regs[src.reg_of_index[dst.reg_index(r)]] for r in range(dst.num_regs)]
    return gather(ctx, elem, [(regs, src)], dst, pad=pad)
