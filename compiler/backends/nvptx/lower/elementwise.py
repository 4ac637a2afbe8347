"""Elementwise arithmetic, comparisons, `fma` and casts, register by register."""

from __future__ import annotations

from collections.abc import Callable

import llvmlite.ir as ir

from ....ir.core import Op
from ....ir.types import ElemType, PointerType, ScalarType, bfloat16, elem_of, float16, float32
from . import fp8
from .context import Lowering
from .registry import Regs, lowering
from .types import bf16, const, f32, i1, llvm_type
from .wgmma import is_accumulator, truncate_pairs

Binary = Callable[[ir.IRBuilder, ir.Value, ir.Value], ir.Value]


def _scalar(op: Op, i: int = 0) -> ScalarType:
    e = elem_of(op.operands[i].type)
    assert isinstance(e, ScalarType)
    return e


def _map2(ctx: Lowering, args: list[Regs], fn: Binary) -> list[Regs]:
    return [[fn(ctx.b, x, y) for x, y in zip(args[0], args[1])]]


def _minmax(ctx: Lowering, op: Op, x: ir.Value, y: ir.Value) -> ir.Value:
    e, b = _scalar(op), ctx.b
    is_max = op.name == "maximum"
    if e.is_floating():
        nan = op.attrs.get("propagate_nan") == "all"
        name = ("llvm.maximum" if is_max else "llvm.minimum") if nan else ("llvm.maxnum" if is_max else "llvm.minnum")
        return ctx.call(f"{name}.{_suffix(x.type)}", x.type, [x, y])
    cmp = b.icmp_signed if e.is_int_signed() and not e.is_bool() else b.icmp_unsigned
    return b.select(cmp(">" if is_max else "<", x, y), x, y)


def _suffix(t: ir.Type) -> str:
    """The overload suffix of an LLVM intrinsic for type `t` (`llvm.fabs.f32`)."""
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    if t == bf16:
        return "bf16"
    return {"half": "f16", "float": "f32", "double": "f64"}[str(t)]


@lowering("add", "sub", "mul", "rem", "maximum", "minimum", "div", "div_rn", "fdiv", "floordiv")
def arith(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    e = _scalar(op)
    name = op.name
    if name in ("maximum", "minimum"):
        return [[_minmax(ctx, op, x, y) for x, y in zip(*args)]]
    if e.is_floating():
        # fp32 `/` is `div.full.f32` (within 2 ulp), as Triton's, and so is `tl.fdiv` without
        # ieee_rounding; `tl.div_rn` is IEEE. IEEE division's slow path is a subroutine call per element
        # (FCHK, CALL): it made ptxas serialize every wgmma of a kernel (C7509), took 64 calls a thread in
        # mma.sync attention's epilogue, and cost softmax and layer norm registers: 35 against 22 for
        # softmax 4096x1024, 3-6% slower than Triton by ncu on an H100, within 1% of it since.
        approximate = name == "div" or (name == "fdiv" and not op.attrs.get("ieee_rounding"))
        if approximate and e.is_fp32():
            return [[ctx.asm(f32, "div.full.f32 $0, $1, $2;", "=f,f,f", [x, y]) for x, y in zip(*args)]]
        fops: dict[str, Binary] = {  # add, sub and mul through the builder's own (`fp_fusion`)
            "add": lambda b, x, y: b.fadd(x, y),
            "sub": lambda b, x, y: b.fsub(x, y),
            "mul": lambda b, x, y: b.fmul(x, y),
            "rem": ir.IRBuilder.frem,
            "div": ir.IRBuilder.fdiv,
            "div_rn": ir.IRBuilder.fdiv,
            "fdiv": ir.IRBuilder.fdiv,
        }
        return _map2(ctx, args, fops[name])
    signed = e.is_int_signed() and not e.is_bool()
    iops: dict[str, Binary] = {
        "add": ir.IRBuilder.add,
        "sub": ir.IRBuilder.sub,
        "mul": ir.IRBuilder.mul,
        # C semantics, as Triton: `//` and `%` truncate toward zero on signed integers.
        "rem": ir.IRBuilder.srem if signed else ir.IRBuilder.urem,
        "floordiv": ir.IRBuilder.sdiv if signed else ir.IRBuilder.udiv,
    }
    if name not in iops:
        raise ctx.error(op, f"'{name}' needs floating-point operands, got {e}")
    return _map2(ctx, args, iops[name])


@lowering("and", "or", "xor", "shl", "shr")
def bitwise(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    e = _scalar(op)
    fns: dict[str, Binary] = {
        "and": ir.IRBuilder.and_,
        "or": ir.IRBuilder.or_,
        "xor": ir.IRBuilder.xor,
        "shl": ir.IRBuilder.shl,
        "shr": ir.IRBuilder.ashr if e.is_int_signed() and not e.is_bool() else ir.IRBuilder.lshr,
    }
    return _map2(ctx, args, fns[op.name])


@lowering("umulhi")
def umulhi(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    b, bits = ctx.b, _scalar(op).primitive_bitwidth
    wide = ir.IntType(2 * bits)
    out = []
    for x, y in zip(*args):
        p = b.mul(b.zext(x, wide), b.zext(y, wide))
        out.append(b.trunc(b.lshr(p, const(wide, bits)), x.type))
    return [out]


@lowering("neg", "abs", "not")
def unary(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    e, b = _scalar(op), ctx.b
    out = []
    for x in args[0]:
        if op.name == "not":
            out.append(b.not_(x))
        elif e.is_floating():
            out.append(b.fneg(x) if op.name == "neg" else ctx.call(f"llvm.fabs.{_suffix(x.type)}", x.type, [x]))
        elif op.name == "neg":
            out.append(b.neg(x))
        elif e.is_int_signed() and not e.is_bool():
            out.append(b.select(b.icmp_signed("<", x, const(x.type, 0)), b.neg(x), x))
        else:
            out.append(x)
    return [out]


_FCMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


@lowering("cmp")
def cmp(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    e, b = elem_of(op.operands[0].type), ctx.b
    pred = _FCMP[op.attrs["pred"]]
    out = []
    for x, y in zip(*args):
        if isinstance(e, ScalarType) and e.is_floating():
            # `!=` is true on NaN, the others are false: IEEE, as NumPy and Triton.
            out.append(b.fcmp_unordered(pred, x, y) if pred == "!=" else b.fcmp_ordered(pred, x, y))
        elif isinstance(e, ScalarType) and e.is_int_signed() and not e.is_bool():
            out.append(b.icmp_signed(pred, x, y))
        else:
            out.append(b.icmp_unsigned(pred, x, y))
    return [out]


@lowering("fma")
def fma(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    return [[ctx.call(f"llvm.fma.{_suffix(x.type)}", x.type, [x, y, z]) for x, y, z in zip(*args)]]


def cast_value(ctx: Lowering, x: ir.Value, src: ElemType, dst: ElemType, rounding: str = "") -> ir.Value:
    """`x` of element type `src` converted to `dst`, with Triton's semantics."""
    b = ctx.b
    to = llvm_type(dst)
    if src == dst:
        return x
    if isinstance(src, PointerType) or isinstance(dst, PointerType):
        if isinstance(src, PointerType) and isinstance(dst, PointerType):
            return x
        return b.ptrtoint(x, to) if isinstance(src, PointerType) else b.inttoptr(x, to)
    if dst.is_bool():
        zero = const(x.type, 0)
        return b.fcmp_unordered("!=", x, zero) if src.is_floating() else b.icmp_unsigned("!=", x, zero)
    if src.is_floating() and dst.is_floating():
        if {src.name, dst.name} == {"fp16", "bf16"}:
            return cast_value(ctx, cast_value(ctx, x, src, ScalarType("fp32")), ScalarType("fp32"), dst, rounding)
        if src.primitive_bitwidth < dst.primitive_bitwidth:
            return b.fpext(x, to)
        if rounding == "rtz":
            ptx = {"fp16": ("f16", "h"), "bf16": ("bf16", "h"), "fp32": ("f32", "f")}[dst.name]
            srcp = {"fp32": ("f32", "f"), "fp64": ("f64", "d")}[src.name]
            asm_ty = ir.IntType(16) if ptx[1] == "h" else to
            y = ctx.asm(asm_ty, f"cvt.rz.{ptx[0]}.{srcp[0]} $0, $1;", f"={ptx[1]},{srcp[1]}", [x])
            return b.bitcast(y, to) if asm_ty != to else y
        return b.fptrunc(x, to)
    if src.is_floating():
        return b.fptosi(x, to) if dst.is_int_signed() else b.fptoui(x, to)
    if dst.is_floating():
        return b.sitofp(x, to) if src.is_int_signed() and not src.is_bool() else b.uitofp(x, to)
    sb, db = src.primitive_bitwidth, dst.primitive_bitwidth
    if sb < db:
        return b.sext(x, to) if src.is_int_signed() and not src.is_bool() else b.zext(x, to)
    return b.trunc(x, to) if sb > db else x


@lowering("cast")
def cast(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    src, dst = elem_of(op.operands[0].type), op.attrs["to"]
    rounding = str(op.attrs.get("rounding") or "")
    if isinstance(src, ScalarType) and isinstance(dst, ScalarType) and (src.is_fp8() or dst.is_fp8()):
        return [fp8.convert(ctx, args[0], src, dst)]
    if src == float32 and dst in (float16, bfloat16) and rounding in ("", "rtne") and is_accumulator(ctx, op.operands[0]):
        return [truncate_pairs(ctx, args[0], dst)]
    return [[cast_value(ctx, x, src, dst, rounding) for x in args[0]]]


@lowering("bitcast")
def bitcast(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    src, dst = elem_of(op.operands[0].type), op.attrs["to"]
    if isinstance(src, PointerType) or isinstance(dst, PointerType):
        return [[cast_value(ctx, x, src, dst) for x in args[0]]]
    to = llvm_type(dst)
    return [[ctx.b.bitcast(x, to) if x.type != to else x for x in args[0]]]


__all__ = ["cast_value", "i1"]
