"""`dot` on tensor cores: one `mma.sync` per 16x8 tile of the result and K step.

The operands arrive in their `MmaOperand` layouts and the accumulator in its `Mma` layout
(layout assignment anchors them), so the registers of one instruction are found by index: the
first register bases of each layout are the instruction's fragment (gpuir/mma.py), the others
repeat it. fp16 and bf16 take m16n8k16 (fp32 or, for fp16, fp16 accumulators); int8 m16n8k32
into int32; fp32 m16n8k8 on tf32 inputs rounded to nearest (`cvt.rna.tf32.f32`, what the
interpreter emulates), or, for "tf32x3", three products of the inputs split into a tf32 high
part and a tf32 remainder (big*small + small*big + big*big), about fp32's accuracy.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ....ir.core import Op
from ....ir.types import ScalarType, elem_of
from ...gpuir.mma import MmaOperand
from .context import Lowering
from .ldmatrix import SharedOperand, read_group
from .registry import Regs
from .types import const, f16, f32, i32


def _pack(ctx: Lowering, values: list[ir.Value]) -> ir.Value:
    """Consecutive narrow elements as one 32-bit register."""
    b = ctx.b
    whole = _unpacked(values)
    if whole is not None:
        return whole if values[0].type == f16 else b.bitcast(whole, i32)
    vec: ir.Value = ir.Constant(ir.VectorType(values[0].type, len(values)), None)
    for i, v in enumerate(values):
        vec = b.insert_element(vec, v, const(i32, i))
    return vec if values[0].type == f16 else b.bitcast(vec, i32)


def _unpacked(values: list[ir.Value]) -> ir.Value | None:
    """The vector `values` were extracted from, element by element in order (an `ldmatrix` register
    taken apart), or None: packing them again would rebuild it."""
    first = values[0]
    if not isinstance(first, ir.ExtractElement):
        return None
    vec = first.operands[0]
    if not isinstance(vec.type, ir.VectorType) or vec.type.count != len(values):
        return None
    for i, v in enumerate(values):
        if not (isinstance(v, ir.ExtractElement) and v.operands[0] is vec and isinstance(v.operands[1], ir.Constant)
                and v.operands[1].constant == i):
            return None
    return vec


def _tf32(ctx: Lowering, x: ir.Value) -> ir.Value:
    return ctx.call("llvm.nvvm.f2tf32.rna", i32, [x])


def _tf32_split(ctx: Lowering, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    big = _tf32(ctx, x)
    small = _tf32(ctx, ctx.b.fsub(x, ctx.b.bitcast(big, f32)))
    return big, small


class _Operand:
    """The registers of one dot operand, by register index: lowered values, or `ldmatrix` reads of
    a pipelined load's ring slot issued when the K step that needs them comes (so that only one
    K step of the operand is live at a time)."""

    def __init__(self, ctx: Lowering, regs: Regs, shared: SharedOperand | None) -> None:
        self.ctx, self.regs, self.shared = ctx, regs, shared
        self.read: dict[int, ir.Value] = {}

    def __getitem__(self, r: int) -> ir.Value:
        if self.shared is None:
            return self.regs[r]
        if r not in self.read:
            self.read.update(read_group(self.ctx, self.shared, r))
        return self.read[r]


def mma_dot(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    a_ll, b_ll, c_ll = (ctx.layout(v) for v in op.operands)
    enc = ctx.gpu.encoding(op.operands[0])
    assert isinstance(enc, MmaOperand)
    a_elem, c_elem = elem_of(op.operands[0].type), elem_of(op.operands[2].type)
    assert isinstance(a_elem, ScalarType) and isinstance(c_elem, ScalarType)
    kw, instr_k = enc.k_width, enc.instr_k
    a_frag = [a_ll.reg_index(i) for i in range(4 * kw)]
    b_frag = [b_ll.reg_index(i) for i in range(2 * kw)]
    precision = op.attrs.get("input_precision")
    a, bv = (_Operand(ctx, args[i], ctx.shared_operands.get(op.operands[i])) for i in (0, 1))
    out = list(args[2])

    packed: dict[tuple[object, ...], list[ir.Value]] = {}  # an operand's fragment, packed once for every tile it meets

    def regs(operand: _Operand, ll_regs: list[int]) -> list[ir.Value]:
        vals = [operand[r] for r in ll_regs]
        if kw == 1:
            return vals
        key = (operand, *ll_regs)
        if key not in packed:
            packed[key] = [_pack(ctx, vals[i : i + kw]) for i in range(0, len(vals), kw)]
        return packed[key]

    # K steps outermost: each step's operand registers die before the next step's are read.
    for k0 in range(0, a_ll.shape[1], instr_k):
        for r in range(0, c_ll.num_regs, 4):
            m0, n0 = c_ll.reg_index(r)
            acc = [out[r | i] for i in range(4)]
            ar = [a_ll.reg_of_index[(m0 + dm, k0 + dk)] for dm, dk in a_frag]
            br = [b_ll.reg_of_index[(k0 + dk, n0 + dn)] for dk, dn in b_frag]
            if a_elem.is_fp32():
                acc = _tf32_mma(ctx, [a[i] for i in ar], [bv[i] for i in br], acc, precision == "tf32x3")
            else:
                acc = _mma(ctx, a_elem, c_elem, regs(a, ar), regs(bv, br), acc)
            for i in range(4):
                out[r | i] = acc[i]
    return [out]


def _call_mma(ctx: Lowering, name: str, acc_ty: ir.Type, operands: list[ir.Value], n_out: int) -> list[ir.Value]:
    res = ctx.call(name, ir.LiteralStructType([acc_ty] * n_out), operands)
    return [ctx.b.extract_value(res, i) for i in range(n_out)]


def _mma(ctx: Lowering, a_elem: ScalarType, c_elem: ScalarType, a: list[ir.Value], bv: list[ir.Value], acc: list[ir.Value]) -> list[ir.Value]:
    b = ctx.b
    if c_elem.is_fp16():
        pairs = [_pack(ctx, acc[0:2]), _pack(ctx, acc[2:4])]
        got = _call_mma(ctx, "llvm.nvvm.mma.m16n8k16.row.col.f16.f16", ir.VectorType(f16, 2), a + bv + pairs, 2)
        return [b.extract_element(got[i // 2], const(i32, i % 2)) for i in range(4)]
    if a_elem.is_fp16():
        return _call_mma(ctx, "llvm.nvvm.mma.m16n8k16.row.col.f32.f32", f32, a + bv + acc, 4)
    if a_elem.is_bf16():
        return _call_mma(ctx, "llvm.nvvm.mma.m16n8k16.row.col.bf16", f32, a + bv + acc, 4)
    sign = "s8" if a_elem.is_int_signed() else "u8"
    return _call_mma(ctx, f"llvm.nvvm.mma.m16n8k32.row.col.{sign}", i32, a + bv + acc, 4)


def _tf32_mma(ctx: Lowering, a: list[ir.Value], bv: list[ir.Value], acc: list[ir.Value], split: bool) -> list[ir.Value]:
    name = "llvm.nvvm.mma.m16n8k8.row.col.tf32"
    if not split:
        return _call_mma(ctx, name, f32, [_tf32(ctx, x) for x in a] + [_tf32(ctx, x) for x in bv] + acc, 4)
    a_big, a_small = zip(*(_tf32_split(ctx, x) for x in a))
    b_big, b_small = zip(*(_tf32_split(ctx, x) for x in bv))
    acc = _call_mma(ctx, name, f32, list(a_big) + list(b_small) + acc, 4)
    acc = _call_mma(ctx, name, f32, list(a_small) + list(b_big) + acc, 4)
    return _call_mma(ctx, name, f32, list(a_big) + list(b_big) + acc, 4)

