"""Inline assembly (`tl.inline_asm_elementwise`): one LLVM inline-asm call per `pack` registers.

A thread's registers are taken `pack` at a time (which elements share an instance is unspecified,
as in Triton); elements narrower than 32 bits are packed into 32-bit registers (`ops.asm_registers`).
Each operand and result takes the LLVM type its constraint letter names (`r`: i32, `l`: i64, `h`: i16,
`c`: i8, `f`: f32, `d`: f64), the values bit-cast or resized to it, so `=r` may carry an fp32 result.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ....ir.core import Op
from ....ir.ops_calls import asm_registers
from ....ir.types import ScalarType
from .context import Lowering
from .registry import Regs, lowering
from .types import f32, f64, i8, i16, i32, i64, llvm_type

_LETTERS: dict[str, ir.Type] = {"r": i32, "l": i64, "h": i16, "c": i8, "f": f32, "d": f64}


def _bits(t: ir.Type) -> int:
    if isinstance(t, ir.IntType):
        return t.width
    return {"half": 16, "bfloat": 16, "float": 32, "double": 64}[str(t)]


def _coerce(ctx: Lowering, value: ir.Value, to: ir.Type) -> ir.Value:
    """`value` as type `to`: bit-cast at equal widths, else through integers resized (zext / trunc)."""
    if value.type == to:
        return value
    src_bits, dst_bits = _bits(value.type), _bits(to)
    if src_bits == dst_bits:
        return ctx.b.bitcast(value, to)
    as_int = value if isinstance(value.type, ir.IntType) else ctx.b.bitcast(value, ir.IntType(src_bits))
    resized = ctx.b.zext(as_int, ir.IntType(dst_bits)) if dst_bits > src_bits else ctx.b.trunc(as_int, ir.IntType(dst_bits))
    return resized if isinstance(to, ir.IntType) else ctx.b.bitcast(resized, to)


def _packed(ctx: Lowering, values: list[ir.Value], elem: ScalarType, per: int) -> list[ir.Value]:
    """`values` grouped `per` to a register: a vector bit-cast to one integer."""
    if per == 1:
        return values
    out: list[ir.Value] = []
    ety = llvm_type(elem)
    for i in range(0, len(values), per):
        vector: ir.Value = ir.Constant(ir.VectorType(ety, per), ir.Undefined)
        for j, v in enumerate(values[i : i + per]):
            vector = ctx.b.insert_element(vector, v, ir.Constant(i32, j))
        out.append(ctx.b.bitcast(vector, ir.IntType(elem.primitive_bitwidth * per)))
    return out


def _unpacked(ctx: Lowering, registers: list[ir.Value], elem: ScalarType, per: int) -> list[ir.Value]:
    ety = llvm_type(elem)
    if per == 1:
        return [_coerce(ctx, r, ety) for r in registers]
    out: list[ir.Value] = []
    for r in registers:
        vector = ctx.b.bitcast(_coerce(ctx, r, ir.IntType(elem.primitive_bitwidth * per)), ir.VectorType(ety, per))
        out.extend(ctx.b.extract_element(vector, ir.Constant(i32, j)) for j in range(per))
    return out


def _letter(constraint: str) -> str:
    return constraint.lstrip("=&+")[:1]


@lowering("inline_asm")
def inline_asm(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    pack, results = op.attrs["pack"], op.attrs["results"]
    constraints = [c.strip() for c in op.attrs["constraints"].split(",") if c.strip() and not c.strip().startswith("~")]
    outs_c = [c for c in constraints if c.startswith("=")]
    ins_c = constraints[len(outs_c):]
    n = ctx.layout(op.results[0]).num_regs
    out: list[list[ir.Value]] = [[] for _ in results]
    for start in range(0, n, pack):
        count = min(pack, n - start)
        operands: list[ir.Value] = []
        for regs, v in zip(args, op.operands):
            elem = ctx.elem(v)
            assert isinstance(elem, ScalarType)
            values = list(regs[start : start + count]) + [ir.Constant(llvm_type(elem), ir.Undefined)] * (pack - count)
            operands.extend(_packed(ctx, values, elem, asm_registers(elem, pack)[1]))
        if len(operands) != len(ins_c):
            raise ctx.error(op, f"the constraints name {len(ins_c)} inputs, the arguments need {len(operands)}")
        operands = [_coerce(ctx, v, _LETTERS.get(_letter(c), v.type)) for v, c in zip(operands, ins_c)]
        widths = [asm_registers(e, pack) for e in results]
        ret_types: list[ir.Type] = []
        for e, (regs_n, per) in zip(results, widths):
            natural = llvm_type(e) if per == 1 else ir.IntType(e.primitive_bitwidth * per)
            ret_types.extend(_LETTERS.get(_letter(c), natural) for c in outs_c[len(ret_types) : len(ret_types) + regs_n])
        ret: ir.Type = ret_types[0] if len(ret_types) == 1 else ir.LiteralStructType(ret_types)
        call = ctx.asm(ret, op.attrs["asm"], op.attrs["constraints"], operands, side_effect=not op.attrs["pure"])
        registers = [call] if len(ret_types) == 1 else [ctx.b.extract_value(call, i) for i in range(len(ret_types))]
        for k, (e, (regs_n, per)) in enumerate(zip(results, widths)):
            first = sum(w[0] for w in widths[:k])
            out[k].extend(_unpacked(ctx, registers[first : first + regs_n], e, per)[:count])
    return out
