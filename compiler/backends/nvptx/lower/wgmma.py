"""`dot` on wgmma (sm_90a): one `wgmma.mma_async.m64nNk16` (`k32` for fp8) per warpgroup tile of the
result and K step, both operands read from shared memory through descriptors (`gpuir/wgmma.py`).

    wgmma.fence                        the accumulator's registers are ready
    per K step, per 64xN tile:         wgmma.mma_async {acc}, descA, descB, 1, 1, 1, tA, tB
                                       (fp8: no tA, tB; both operands are K-major)
    wgmma.commit_group
    wgmma.wait_group 0                 or 1 for an asynchronous dot of a pipelined loop, whose
                                       loop ends with wait_group 0 (`settle`); for a dot marked
                                       `wait = "at use"` (`gpuir.defer`), wait_group N where an op
                                       first reads its result (`Lowering.get`), N the groups
                                       committed since

An operand lies in shared memory in swizzle atoms, read in place: in a pipelined loop's ring, in a
buffer `gpuir.hoist` made of a loop invariant, or in one `gpuir.staging` stores it into (a buffer
that a loop writes again, so a dot reading one waits for its group before going on). A dot marked
`operand_a = "registers"` (A is another dot's result: attention's P) takes A from registers, four
32-bit pairs per thread and K step in the A fragment of mma.sync's m16n8k16 (`MmaOperand(0, Mma(3,
...))`, which an accumulator of the same warps already is: nothing moves). The
instruction is inline assembly (LLVM has no intrinsic for it); the waits are too, with the
accumulator's registers tied through them, so that nothing reads a register before the group
writing it has completed.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ....ir.core import Op, Value
from ....ir.types import ScalarType, elem_of
from ....passes.rewrite import constant_value
from ...gpuir import CONVERT
from ...gpuir.mma import Mma
from ...gpuir.pipeline import LoopPipeline
from ...gpuir.wgmma import INSTR_K, descriptor, instr_k, operand_strides, swizzle_bytes
from .context import Lowering
from .ldmatrix import SharedOperand, swizzled_offset
from .registry import Regs
from .smem import convert
from .types import const, f32, i32, i64, llvm_type, void

_TIE_CHUNK = 128  # accumulator registers tied through one wait


def align_smem(ctx: Lowering) -> None:
    """Align the dynamic shared memory to 1024 bytes: the swizzle atoms' pattern is a function of
    the address, so their buffers must lie at multiples of 1024 from an aligned base."""
    ctx.smem_base()
    smem = ctx.module.globals["global_smem"]
    assert isinstance(smem, ir.GlobalVariable)
    smem.align = 1024


def wait(ctx: Lowering, pending: int, regs: Regs) -> Regs:
    """`wgmma.wait_group pending`, with `regs` (accumulators) passed through it."""
    out: list[ir.Value] = []
    for start in range(0, max(len(regs), 1), _TIE_CHUNK):
        chunk = list(regs[start : start + _TIE_CHUNK])
        text = f"wgmma.wait_group.sync.aligned {pending};" if start == 0 else ""
        if not chunk:
            ctx.asm(ir.VoidType(), text, "", [], side_effect=True)
            break
        n = len(chunk)
        constraints = ",".join(["=f"] * n + [str(i) for i in range(n)])
        res = ctx.asm(ir.LiteralStructType([f32] * n), text, constraints, chunk, side_effect=True)
        out += [ctx.b.extract_value(res, i) for i in range(n)]
    return out


def is_accumulator(ctx: Lowering, value: Value) -> bool:
    """Whether `value` is laid out as a wgmma accumulator (its registers are ones wgmma writes)."""
    enc = ctx.gpu.encoding(value)
    return isinstance(enc, Mma) and enc.version == 3


def truncate_pairs(ctx: Lowering, regs: Regs, dst: ScalarType) -> Regs:
    """fp32 accumulator registers rounded to `dst` (fp16 or bf16) two at a time, by the packed
    `cvt.rn.{f16,bf16}x2.f32`: ptxas takes a scalar `cvt.rn.f16.f32` that reads a register some
    wgmma wrote for a reader inside the wgmma pipeline, even after `wait_group 0`, and serializes
    every wgmma of the kernel (C7514), where the packed form and arithmetic leave them alone."""
    assert len(regs) % 2 == 0, "an accumulator holds pairs of adjacent columns"
    b, to = ctx.b, llvm_type(dst)
    text = f"cvt.rn.{'bf16' if dst.is_bf16() else 'f16'}x2.f32 $0, $2, $1;"  # $1 into the low half
    out: list[ir.Value] = []
    for j in range(0, len(regs) - 1, 2):
        packed = b.bitcast(ctx.asm(i32, text, "=r,f,f", [regs[j], regs[j + 1]]), ir.VectorType(to, 2))
        out += [b.extract_element(packed, const(i32, 0)), b.extract_element(packed, const(i32, 1))]
    return out


class ZeroStart:
    """A loop's accumulators that start at a constant zero tile and that one wgmma dot of the body
    accumulates every iteration (`acc = tl.zeros(...)`; `acc = tl.dot(a, b, acc)`): they enter the
    loop undefined, with no register zeroed, and the dot's first K step of the first iteration
    ignores them (scale-d 0). A loop that may run no iteration gives zero where it ran none."""

    def __init__(self, ctx: Lowering, loop: Op) -> None:
        self.ctx = ctx
        self.rows: dict[int, Op] = {}  # carried value j (0 for the first after the bounds) -> its dot
        if not ctx.target.has("wgmma"):
            return
        body = loop.regions[0]
        yields = body.terminator
        assert yields is not None
        for j, init in enumerate(loop.operands[3:]):
            if constant_value(init) != 0:
                continue
            arg = body.args[1 + j]
            users = [(op, i) for op in body.walk() for i, v in enumerate(op.operands) if v is arg]
            if len(users) != 1:
                continue
            dot, i = users[0]
            if dot.name == "dot" and i == 2 and yields.operands[j] is dot.result and is_accumulator(ctx, dot.result) \
                    and any(op is dot for op in body.ops):
                self.rows[j] = dot

    def inits(self, inits: list[Regs]) -> list[Regs]:
        """The loop's initial carried values: undefined for the zero-started accumulators."""
        return [[ir.Constant(r.type, ir.Undefined) for r in regs] if j in self.rows else list(regs)
                for j, regs in enumerate(inits)]

    def enter(self, iv: ir.Value, lo: ir.Value) -> None:
        """In the body, where `iv` is the induction variable: scale-d for each dot, false on the
        first iteration."""
        if self.rows:
            later = self.ctx.b.icmp_unsigned("!=", iv, lo)
            self.ctx.scale_d.update({dot: later for dot in self.rows.values()})

    def leave(self, results: list[Regs], iv: ir.Value, lo: ir.Value, hi: ir.Value) -> list[Regs]:
        """The loop's results, given `iv` at its exit: zero where no iteration ran, unless the
        bounds are constants that say one did."""
        if not self.rows or (isinstance(lo, ir.Constant) and isinstance(hi, ir.Constant)
                             and int(lo.constant) < int(hi.constant)):
            return results
        b = self.ctx.b
        skipped = b.icmp_unsigned("==", iv, lo)
        return [[b.select(skipped, ir.Constant(r.type, 0.0), r) for r in regs] if j in self.rows else regs
                for j, regs in enumerate(results)]


def _shared(ctx: Lowering, op: Op, i: int) -> SharedOperand:
    found = ctx.shared_operands.get(op.operands[i])
    if found is None:
        raise ValueError(f"wgmma operand {i} lies in no shared-memory buffer or ring slot (gpuir.staging stores "
                         "such operands)")
    return found


def _descriptor(ctx: Lowering, operand: SharedOperand, origin: tuple[ir.Value, ir.Value],
                origins: list[tuple[int, int]], step: tuple[int, int]) -> ir.Value:
    """The descriptor of the operand's instruction tile whose first element is at `origin` (the warpgroup's,
    one of `origins`) plus `step` (constant): the descriptor of the tile at `origin`, plus the step's offset
    in 16-byte units where that offset is the same from every origin (the swizzle repeats: Triton's form,
    `UIADD3.64 desc, imm`), else the buffer's descriptor plus the whole offset. A shared address is below
    256 KiB, so the 14-bit start field takes such sums without carrying out; masking each tile's address into
    it cost 30 uniform instructions an iteration of the 128x128x64 matmul loop (127 SASS instructions against
    Triton's 97)."""
    b = ctx.b
    shape = (operand.layout.shape[0], operand.layout.shape[1])
    size = operand.elem.itemsize
    lead, stride, _ = operand_strides(operand.shared, shape, operand.op_idx, size)
    fixed = descriptor(0, lead, stride, swizzle_bytes(operand.shared, size))
    contig, rows = operand.shared.order
    inv = operand.shared.linear(shape).invert()

    def at(r: int, c: int) -> int:
        return inv.apply(dim0=r, dim1=c)[0] * size

    moved = at(*step)
    if moved % 16 == 0 and all(at(o[0] + step[0], o[1] + step[1]) == at(*o) + moved for o in origins):
        tile = b.gep(operand.base, [swizzled_offset(ctx, operand.shared, shape, origin[rows], origin[contig])],
                     source_etype=llvm_type(operand.elem))
        start = b.and_(b.lshr(b.ptrtoint(tile, i32), const(i32, 4)), const(i32, 0x3FFF))
        return b.add(b.or_(b.zext(start, i64), const(i64, fixed)), const(i64, moved >> 4))
    index = [b.add(v, const(i32, d)) if d else v for v, d in zip(origin, step)]
    offset = swizzled_offset(ctx, operand.shared, shape, index[rows], index[contig])
    start = b.and_(b.lshr(b.ptrtoint(operand.base, i32), const(i32, 4)), const(i32, 0x3FFF))
    base = b.or_(b.zext(start, i64), const(i64, fixed))
    return b.add(base, b.zext(b.lshr(b.mul(offset, const(i32, size)), const(i32, 4)), i64))


def _origins(warp_bases: tuple[tuple[int, ...], ...]) -> list[tuple[int, int]]:
    """Every warpgroup's origin (`_warpgroup_origin`), as numbers."""
    found = [(0, 0)]
    for basis in warp_bases[2:]:
        found += [(m + basis[0], n + basis[1]) for m, n in found]
    return found


def _warpgroup_origin(ctx: Lowering, acc: Mma, warp_bases: tuple[tuple[int, ...], ...]) -> list[ir.Value]:
    """This warpgroup's first row and column of the result: warp bits 2 and up (bits 0 and 1 pick
    the warp inside the warpgroup, which the instruction places itself). The warp index is read
    from lane 0 (`shfl.sync.idx`) so that ptxas knows it uniform: the descriptors are then built in
    uniform registers, as the instruction takes them; from `tid.x` they were built per thread and
    moved over (R2UR) before every wgmma of the loop."""

    def make(p: ir.IRBuilder) -> list[ir.Value]:
        origin: list[ir.Value] = [const(i32, 0), const(i32, 0)]
        warp = ctx.call("llvm.nvvm.shfl.sync.idx.i32", i32, [const(i32, -1), ctx.warp, const(i32, 0), const(i32, 31)], p)
        for bit, basis in enumerate(warp_bases[2:], start=2):
            on = p.and_(p.lshr(warp, const(i32, bit)), const(i32, 1))
            for d in (0, 1):
                if basis[d]:
                    origin[d] = p.add(origin[d], p.mul(on, const(i32, basis[d])))
        return origin

    return ctx.at_entry(("wgmma", acc, warp_bases), make)


def _instruction(
    ctx: Lowering, kind: str, n: int, a: ir.Value | list[ir.Value], db: ir.Value, acc: list[ir.Value],
    tnsp: tuple[int, int], scale_d: ir.Value
) -> list[ir.Value]:
    """One wgmma: A a descriptor, or its four 32-bit registers (which take no transpose flag)."""
    count = n // 2
    regs = ", ".join(f"${j}" for j in range(count))
    fp8 = kind in ("e4m3", "e5m2")  # K-major operands only: the instruction has no transpose flags
    a_regs = a if isinstance(a, list) else [a]
    a_text = f"{{{', '.join(f'${count + j}' for j in range(len(a_regs)))}}}" if isinstance(a, list) else f"${count}"
    flags = "" if fp8 else f", {tnsp[1]}" if isinstance(a, list) else f", {tnsp[0]}, {tnsp[1]}"
    nb = count + len(a_regs)
    text = (
        f"{{\n.reg .pred p;\nsetp.ne.b32 p, ${nb + 1}, 0;\n"
        f"wgmma.mma_async.sync.aligned.m64n{n}k{32 if fp8 else 16}.f32.{kind}.{kind} {{{regs}}}, {a_text}, "
        f"${nb}, p, 1, 1{flags};\n}}"
    )
    a_constraints = ["r"] * len(a_regs) if isinstance(a, list) else ["l"]
    constraints = ",".join(["=f"] * count + a_constraints + ["l", "r"] + [str(j) for j in range(count)])
    res = ctx.asm(ir.LiteralStructType([f32] * count), text, constraints, [*a_regs, db, scale_d, *acc], side_effect=True)
    return [ctx.b.extract_value(res, j) for j in range(count)]


class RegisterA:
    """A wgmma dot's A operand in registers: its conversion's source, moved into the operand's layout
    where it is not there already, packed two elements to a 32-bit register."""

    def __init__(self, ctx: Lowering, op: Op) -> None:
        value = op.operands[0]
        source = value.owner.operands[0] if isinstance(value.owner, Op) and value.owner.name == CONVERT else value
        self.ctx, self.layout = ctx, ctx.layout(value)
        self.regs = convert(ctx, ctx.elem(value), ctx.get(source), ctx.layout(source), self.layout)
        self.vector = ir.VectorType(llvm_type(elem_of(value.type)), 2)

    def fragment(self, m0: int, k0: int) -> list[ir.Value]:
        """The registers of the 64x16 instruction tile whose first element (for lane 0 of the
        warpgroup's first warp) is (m0, k0): rows g and g + 8, columns 2t, 2t + 1 and 8 on."""
        b, where = self.ctx.b, self.layout.reg_of_index
        out = []
        for dm, dk in ((0, 0), (8, 0), (0, 8), (8, 8)):
            pair = ir.Constant(self.vector, None)
            for j in (0, 1):
                pair = b.insert_element(pair, self.regs[where[(m0 + dm, k0 + dk + j)]], const(i32, j))
            out.append(b.bitcast(pair, i32))
        return out


_KINDS = {"fp16": "f16", "bf16": "bf16", "fp8e4nv": "e4m3", "fp8e5": "e5m2"}  # the instruction's operand types


def is_async(ctx: Lowering, op: Op) -> bool:
    """Whether `op` leaves its group in flight: a pipelined loop's dot whose operands stay put while it runs
    (`gpuir.pipeline`: not A's registers, not a buffer that a local_store writes again)."""
    return any(op in plan.async_dots for plan in ctx.gpu.pipelines.values())


def wgmma_dot(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    acc = ctx.gpu.encoding(op.result)
    assert isinstance(acc, Mma) and acc.version == 3
    a_elem = elem_of(op.operands[0].type)
    assert isinstance(a_elem, ScalarType)
    kind = _KINDS[a_elem.name]
    c_ll = ctx.layout(op.operands[2])
    n = acc.instr_shape[1]
    per_instr = n // 2
    if c_ll.warp[:2] != ((16, 0), (32, 0)):
        raise ValueError(f"wgmma needs whole warpgroups along M, the accumulator has warps {list(c_ll.warp)}")
    wg_m, wg_n = _warpgroup_origin(ctx, acc, c_ll.warp)
    align_smem(ctx)
    b = ctx.b
    out = list(args[2])
    register_a = RegisterA(ctx, op) if op.attrs.get("operand_a") == "registers" else None
    a, bv = (None if register_a is not None and i == 0 else _shared(ctx, op, i) for i in (0, 1))
    assert bv is not None
    tnsp = tuple(0 if s is None else int(operand_strides(s.shared, (s.layout.shape[0], s.layout.shape[1]), s.op_idx,
                                                         a_elem.itemsize)[2]) for s in (a, bv))
    if a_elem.is_fp8() and any(tnsp):
        raise ValueError(f"wgmma reads {a_elem} operands K-major only, and an operand is M- or N-major")
    first = ctx.scale_d.get(op)
    scale_first = const(i32, 1) if first is None else b.zext(first, i32)
    if first is None and constant_value(op.operands[2]) == 0:
        # `tl.dot(a, b)` or a zero accumulator outside a loop: the first K step ignores it (scale-d 0)
        # instead of 64 register moves a tile, which ptxas interleaved with the first tile's product
        # and then waited for (C7517, "wgmma.wait_group is injected").
        scale_first = const(i32, 0)
        out = [ir.Constant(r.type, ir.Undefined) for r in out]
    fragments = {(c_ll.reg_index(r0)[0], k0): register_a.fragment(c_ll.reg_index(r0)[0], k0)
                 for k0 in range(0, bv.layout.shape[0], INSTR_K)
                 for r0 in range(0, c_ll.num_regs, per_instr)} if register_a is not None else {}
    origins = _origins(c_ll.warp)
    zero = const(i32, 0)
    ctx.call("llvm.nvvm.wgmma.fence.sync.aligned", void, [])
    for k0 in range(0, bv.layout.shape[0], instr_k(a_elem.itemsize)):
        for r0 in range(0, c_ll.num_regs, per_instr):
            m_s, n_s = c_ll.reg_index(r0)
            da = fragments[(m_s, k0)] if a is None else _descriptor(ctx, a, (wg_m, zero),
                                                                     [(m, 0) for m, _ in origins], (m_s, k0))
            db = _descriptor(ctx, bv, (zero, wg_n), [(0, n_) for _, n_ in origins], (k0, n_s))
            out[r0 : r0 + per_instr] = _instruction(ctx, kind, n, da, db,
                                                    out[r0 : r0 + per_instr], (tnsp[0], tnsp[1]),
                                                    scale_first if k0 == 0 else const(i32, 1))
    ctx.call("llvm.nvvm.wgmma.commit_group.sync.aligned", void, [])
    if op.attrs.get("wait") == "at use":
        ctx.late.append(op.result)
        ctx.wait_group = lambda pending, regs: wait(ctx, pending, regs)
        return [out]
    out = wait(ctx, 1 if is_async(ctx, op) else 0, out)
    return [out]


def settle(ctx: Lowering, loop: Op, plan: LoopPipeline, results: list[Regs]) -> list[Regs]:
    """After a pipelined loop with asynchronous dots: wait for every group, the accumulators that
    the loop carries out passed through the wait."""
    yields = loop.regions[0].terminator
    assert yields is not None
    rows = [j for j, v in enumerate(yields.operands) if isinstance(v.owner, Op) and v.owner in plan.async_dots]
    settled = wait(ctx, 0, [r for j in rows for r in results[j]])
    out = list(results)
    for j in rows:
        out[j], settled = settled[: len(results[j])], settled[len(results[j]) :]
    return out
