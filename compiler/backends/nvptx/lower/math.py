"""Transcendental and rounding functions.

As in Triton, `exp`, `exp2`, `log`, `log2`, `sqrt`, `rsqrt`, `sin` and `cos` on fp32 use the
hardware approximations (`ex2.approx`, `lg2.approx`, `sqrt.approx`, `rsqrt.approx`,
`sin.approx`, `cos.approx`); fp16 and bf16 compute in fp32. `exp2` flushes subnormal inputs and
results to zero (`ex2.approx.ftz`, as Triton's `tl.exp2`): without `.ftz` ptxas wraps each
`MUFU.EX2` in a test and two multiplies, a third of attention's softmax. `erf` and `pow` call libdevice
(`__nv_erff`, at most 2 ulp from the exact value, and `__nv_powf`), as do fp64 `exp`, `exp2`, `log`,
`log2`, `sin`, `cos`, `erf`, `rsqrt` and `pow` (`__nv_exp`, ...); fp64 `sqrt`, `floor`, `ceil` are
exact. The LLVM stage links libdevice (from the nvidia-nvvm wheel) in when a kernel calls it.

`ex2.approx` runs on the SM's 16 special-function lanes, a bottleneck of d64 attention: on an H100 the
descriptor forward at (4,32,2048,64), 8 warps, 3 stages, ran 6.7% faster (420 -> 448 TFLOP/s at 128x128
blocks, 390 -> 417 at 128x64) with every second exponential of a thread replaced by one add (wrong results:
an upper bound). Computed on the FMA pipe instead, as a degree-5 polynomial of the fraction scaled by the
exponent's bits (13 instructions, within 2^-22 of 2^x, as `ex2.approx`), every fourth exponential made the same
kernels 8-20% slower: 128 -> 155 registers at 128x128 (one CTA an SM, not two), 107 -> 109 and 390 -> 358 at
128x64. Not kept.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ....ir.core import Op
from ....ir.types import ScalarType, elem_of, float32
from ..toolkit import LIBDEVICE_HINT, LIBDEVICE_PREFIX, find_libdevice
from .context import Lowering
from .elementwise import _suffix, cast_value
from .registry import Regs, lowering
from .types import const, f32, f64, llvm_type

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453

_APPROX = {
    "exp": "ex2.approx.f32",
    "exp2": "ex2.approx.ftz.f32",
    "log2": "lg2.approx.f32",
    "sqrt": "sqrt.approx.ftz.f32",
    "rsqrt": "rsqrt.approx.ftz.f32",
    "sin": "sin.approx.f32",
    "cos": "cos.approx.f32",
}


def approx(ctx: Lowering, name: str, x: ir.Value) -> ir.Value:
    return ctx.asm(f32, f"{_APPROX[name]} $0, $1;", "=f,f", [x])


def libdevice(ctx: Lowering, op: Op, name: str, ret: ir.Type, args: list[ir.Value]) -> ir.Value:
    """A call to libdevice's `__nv_<name>`, linked in by the LLVM stage; a clear error without it."""
    if find_libdevice() is None:
        raise ctx.error(
            op, f"'{op.name}' on {elem_of(op.operands[0].type)} needs libdevice, which was not found: {LIBDEVICE_HINT} or set DESPINA_LIBDEVICE"
        )
    return ctx.call(f"{LIBDEVICE_PREFIX}{name}", ret, args)


def _fp32(ctx: Lowering, op: Op, x: ir.Value) -> ir.Value:
    b, name = ctx.b, op.name
    if name == "exp":
        return approx(ctx, "exp", b.fmul(x, const(f32, LOG2E)))
    if name == "log":
        return b.fmul(approx(ctx, "log2", x), const(f32, LN2))
    if name == "erf":
        return libdevice(ctx, op, "erff", f32, [x])
    return approx(ctx, name, x)


def _fp64(ctx: Lowering, op: Op, x: ir.Value) -> ir.Value:
    if op.name == "sqrt":
        return ctx.call("llvm.sqrt.f64", f64, [x])
    return libdevice(ctx, op, op.name, f64, [x])


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


@lowering("sqrt_rn")
def sqrt_rn(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    # llvm.sqrt is IEEE round-to-nearest on NVPTX (sqrt.rn.f32 / sqrt.rn.f64).
    e = elem_of(op.operands[0].type)
    assert isinstance(e, ScalarType)
    if e.is_fp64():
        return [[ctx.call("llvm.sqrt.f64", f64, [x]) for x in args[0]]]
    return [[cast_value(ctx, ctx.call("llvm.sqrt.f32", f32, [cast_value(ctx, x, e, float32)]), float32, e) for x in args[0]]]


@lowering("extern_elementwise")
def extern_elementwise(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    # A libdevice call per element (`tl.extra.cuda.libdevice`); the LLVM stage links libdevice in.
    ret = llvm_type(op.attrs["result"])
    return [[libdevice(ctx, op, op.attrs["symbol"][len(LIBDEVICE_PREFIX):], ret, list(xs)) for xs in zip(*args)]]


@lowering("floor", "ceil")
def rounding(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    return [[ctx.call(f"llvm.{op.name}.{_suffix(x.type)}", x.type, [x]) for x in args[0]]]


@lowering("pow")
def power(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    e = elem_of(op.operands[0].type)
    assert isinstance(e, ScalarType)
    if e.is_fp64():
        return [[libdevice(ctx, op, "pow", f64, [x, y]) for x, y in zip(*args)]]
    out = []
    for x, y in zip(*args):
        xf, yf = cast_value(ctx, x, e, float32), cast_value(ctx, y, e, float32)
        out.append(cast_value(ctx, libdevice(ctx, op, "powf", f32, [xf, yf]), float32, e))
    return [out]
