"""Conversions to and from the 8-bit floats, which live in `i8` registers.

On sm_89 and later the packed PTX conversions take two values at a time:

    cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32    d.b16, hi.f32, lo.f32
    cvt.rn.satfinite.{e4m3x2,e5m2x2}.f16x2  d.b16, a.b32         (a's upper half into d's upper byte)
    cvt.rn.f16x2.{e4m3x2,e5m2x2}            d.b32, a.b16

rounding to nearest even, a value beyond the largest finite one (an infinity too) becoming that one
with its sign, NaN staying NaN; bf16 goes through f32 both ways, and f32 comes from f16 (each step
exact, so one rounding in all). Older targets widen fp8 in integer arithmetic (exact: e5m2 is the
upper byte of an fp16; e4m3 shifted into an fp16's fields is its value times 2^-8) and refuse the
narrowing, which they have no instruction for, except of constants (a load's `other=0.0`), which
are converted here, on every target.
"""

from __future__ import annotations

from collections.abc import Callable

import llvmlite.ir as ir

from ....ir.types import ScalarType
from ....passes.numerics import fp8_bits
from .context import Lowering
from .registry import Regs
from .types import bf16, const, f16, f32, i8, i16, i32

_PTX = {"fp8e4nv": "e4m3x2", "fp8e5": "e5m2x2"}
_HALF = ir.VectorType(f16, 2)


def convert(ctx: Lowering, regs: Regs, src: ScalarType, dst: ScalarType) -> Regs:
    """`regs` of `src` converted to `dst`, one of them fp8 and the other fp16, bf16 or fp32."""
    if src.is_fp8():
        half = _pairs(ctx, regs, lambda lo, hi: _widen(ctx, lo, hi, src))
        if dst.is_fp16():
            return half
        wide = [ctx.b.fpext(h, f32) for h in half]
        return wide if dst.is_fp32() else [ctx.b.fptrunc(w, bf16) for w in wide]
    if all(isinstance(r, ir.Constant) for r in regs):
        return [const(i8, fp8_bits(float(r.constant), dst)) for r in regs]
    if src.is_bf16():
        regs = [ctx.b.fpext(r, f32) for r in regs]
    return _pairs(ctx, regs, lambda lo, hi: _narrow(ctx, lo, hi, dst))


def _pairs(ctx: Lowering, regs: Regs, fn: Callable[[ir.Value, ir.Value], Regs]) -> Regs:
    """`fn(lo, hi)` (two results) over consecutive pairs of `regs`, the last one paired with itself
    when their number is odd."""
    out: Regs = []
    for j in range(0, len(regs), 2):
        lo = regs[j]
        hi = regs[j + 1] if j + 1 < len(regs) else lo
        out += fn(lo, hi)[: min(2, len(regs) - j)]
    return out


def _widen(ctx: Lowering, lo: ir.Value, hi: ir.Value, src: ScalarType) -> Regs:
    """Two fp8 values as fp16."""
    b = ctx.b
    if ctx.target.capability < 89:
        return [_widen_in_integers(ctx, lo, src), _widen_in_integers(ctx, hi, src)]
    packed = b.or_(b.zext(lo, i16), b.shl(b.zext(hi, i16), const(i16, 8)))
    word = ctx.asm(i32, f"cvt.rn.f16x2.{_PTX[src.name]} $0, $1;", "=r,h", [packed])
    halves = b.bitcast(word, _HALF)
    return [b.extract_element(halves, const(i32, 0)), b.extract_element(halves, const(i32, 1))]


def _widen_in_integers(ctx: Lowering, x: ir.Value, src: ScalarType) -> ir.Value:
    b = ctx.b
    bits = b.zext(x, i16)
    if src.name == "fp8e5":
        return b.bitcast(b.shl(bits, const(i16, 8)), f16)
    sign = b.shl(b.and_(bits, const(i16, 0x80)), const(i16, 8))
    fields = b.shl(b.and_(bits, const(i16, 0x7F)), const(i16, 7))
    scaled = b.fmul(b.bitcast(b.or_(sign, fields), f16), ir.Constant(f16, 256.0))
    nan = b.icmp_unsigned("==", b.and_(bits, const(i16, 0x7F)), const(i16, 0x7F))
    return b.select(nan, ir.Constant(f16, float("nan")), scaled)


def _narrow(ctx: Lowering, lo: ir.Value, hi: ir.Value, dst: ScalarType) -> Regs:
    """Two fp16 or fp32 values as fp8 (`i8`)."""
    b = ctx.b
    kind = _PTX[dst.name]
    if lo.type == f16:
        halves = b.insert_element(b.insert_element(ir.Constant(_HALF, None), lo, const(i32, 0)), hi, const(i32, 1))
        packed = ctx.asm(i16, f"cvt.rn.satfinite.{kind}.f16x2 $0, $1;", "=h,r", [b.bitcast(halves, i32)])
    else:
        packed = ctx.asm(i16, f"cvt.rn.satfinite.{kind}.f32 $0, $1, $2;", "=h,f,f", [hi, lo])
    return [b.trunc(packed, i8), b.trunc(b.lshr(packed, const(i16, 8)), i8)]
