"""Transcendental and rounding functions.

As in Triton, `exp`, `exp2`, `log`, `log2`, `sqrt`, `rsqrt`, `sin` and `cos` on fp32 use the
hardware approximations (`ex2.approx`, `lg2.approx`, `sqrt.approx`, `rsqrt.approx`,
`sin.approx`, `cos.approx`); fp16 and bf16 compute in fp32. `erf` is a polynomial fitted for
fp32 (at most 3 ulp from the exact value). fp64 `sqrt`, `floor`, `ceil` are exact; the other fp64
functions need libdevice, which this backend does not link yet, and are refused clearly.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ....ir.core import Op
from ....ir.types import ScalarType, elem_of, float32
from .context import Lowering
from .elementwise import _suffix, cast_value
from .registry import Regs, lowering
from .types import const, f32, f64

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453

_APPROX = {
    "exp2": "ex2.approx.f32",
    "log2": "lg2.approx.f32",
    "sqrt": "sqrt.approx.ftz.f32",
    "rsqrt": "rsqrt.approx.ftz.f32",
    "sin": "sin.approx.f32",
    "cos": "cos.approx.f32",
}

# erf(x) = x * P(x^2) on |x| < 1;  erf(x) = 1 - exp(Q(|x|)) on 1 <= |x| < 4;  +-1 beyond.
_ERF_P = (
    7.898209878476337e-05,
    -0.0008024353883229196,
    0.00519005348905921,
    -0.026854809373617172,
    0.11283612251281738,
    -0.3761262893676758,
    1.128379225730896,
)
_ERF_Q = (
    7.080212327537083e-08,
    -1.7930063904714189e-06,
    2.043830136244651e-05,
    -0.00013657103409059346,
    0.0005688440869562328,
    -0.0012893604580312967,
    -0.0006974877323955297,
    0.020290564745664597,
    -0.10373625159263611,
    -0.636107325553894,
    -1.128538966178894,
    2.2267970052780584e-05,
)


def approx(ctx: Lowering, name: str, x: ir.Value) -> ir.Value:
    return ctx.asm(f32, f"{_APPROX[name]} $0, $1;", "=f,f", [x])


def _horner(ctx: Lowering, coeffs: tuple[float, ...], z: ir.Value) -> ir.Value:
    fma = f"llvm.fma.{_suffix(f32)}"
    r: ir.Value = const(f32, coeffs[0])
    for c in coeffs[1:]:
        r = ctx.call(fma, f32, [r, z, const(f32, c)])
    return r


def _erf(ctx: Lowering, x: ir.Value) -> ir.Value:
    b = ctx.b
    t = ctx.call("llvm.fabs.f32", f32, [x])
    small = b.fmul(_horner(ctx, _ERF_P, b.fmul(x, x)), x)
    e = approx(ctx, "exp2", b.fmul(_horner(ctx, _ERF_Q, t), const(f32, LOG2E)))
    tail = b.fsub(const(f32, 1.0), e)
    tail = b.select(b.fcmp_ordered(">=", t, const(f32, 4.0)), const(f32, 1.0), tail)
    big = ctx.call("llvm.copysign.f32", f32, [tail, x])
    return b.select(b.fcmp_unordered("<", t, const(f32, 1.0)), small, big)


def _fp32(ctx: Lowering, op: Op, x: ir.Value) -> ir.Value:
    b, name = ctx.b, op.name
    if name == "exp":
        return approx(ctx, "exp2", b.fmul(x, const(f32, LOG2E)))
    if name == "log":
        return b.fmul(approx(ctx, "log2", x), const(f32, LN2))
    if name == "erf":
        return _erf(ctx, x)
    return approx(ctx, name, x)


def _fp64(ctx: Lowering, op: Op, x: ir.Value) -> ir.Value:
    if op.name == "sqrt":
        return ctx.call("llvm.sqrt.f64", f64, [x])
    if op.name == "rsqrt":
        return ctx.b.fdiv(const(f64, 1.0), ctx.call("llvm.sqrt.f64", f64, [x]))
    raise ctx.error(op, f"fp64 '{op.name}' needs libdevice, which the NVPTX backend does not link yet; cast to fp32")


@lowering("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "erf")
def transcendental(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    e = elem_of(op.operands[0].type)
    assert isinstance(e, ScalarType)
    if e.is_fp64():
        return [[_fp64(ctx, op, x) for x in args[0]]]
    out = []
    for x in args[0]:
        y = _fp32(ctx, op, cast_value(ctx, x, e, float32))
        out.append(cast_value(ctx, y, float32, e))
    return [out]


@lowering("floor", "ceil")
def rounding(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    return [[ctx.call(f"llvm.{op.name}.{_suffix(x.type)}", x.type, [x]) for x in args[0]]]


@lowering("pow")
def power(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    raise ctx.error(
        op, "'pow' needs libdevice, which the NVPTX backend does not link yet; use exp2(y * log2(x)) for x > 0"
    )
