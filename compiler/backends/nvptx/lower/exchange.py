"""Moving values between threads without a full layout conversion: warp shuffles, and the
index of a thread's warp along a set of warp bits."""

from __future__ import annotations

import llvmlite.ir as ir

from ...gpuir import LinearLayout
from .context import Lowering
from .types import const, i32, i64


def shuffle_xor(ctx: Lowering, v: ir.Value, lane_mask: int) -> ir.Value:
    """`v` from the lane whose id differs from ours by `lane_mask` (`shfl.sync.bfly`)."""
    b = ctx.b
    ty = v.type
    if isinstance(ty, ir.PointerType):
        return b.inttoptr(shuffle_xor(ctx, b.ptrtoint(v, i64), lane_mask), ty)
    bits = ty.width if isinstance(ty, ir.IntType) else {"half": 16, "bfloat": 16, "float": 32, "double": 64}[str(ty)]
    if bits == 64:
        pair = b.bitcast(v, ir.VectorType(i32, 2))
        lo, hi = (shuffle_xor(ctx, b.extract_element(pair, const(i32, i)), lane_mask) for i in (0, 1))
        out = b.insert_element(
            b.insert_element(ir.Constant(ir.VectorType(i32, 2), None), lo, const(i32, 0)), hi, const(i32, 1)
        )
        return b.bitcast(out, ty)
    word = v if isinstance(ty, ir.IntType) else b.bitcast(v, ir.IntType(bits))
    if bits < 32:
        word = b.zext(word, i32)
    got = ctx.call("llvm.nvvm.shfl.sync.bfly.i32", i32, [const(i32, -1), word, const(i32, lane_mask), const(i32, 31)])
    if bits < 32:
        got = b.trunc(got, ir.IntType(bits))
    return got if isinstance(ty, ir.IntType) else b.bitcast(got, ty)


def warp_group(ctx: Lowering, bits: list[int]) -> ir.Value:
    """This warp's number among the warps that differ only in `bits` of the warp id."""
    b = ctx.b
    out: ir.Value = const(i32, 0)
    for j, bit in enumerate(bits):
        on = b.and_(b.lshr(ctx.warp, const(i32, bit)), const(i32, 1))
        out = b.or_(out, b.shl(on, const(i32, j)) if j else on)
    return out


def check_axis_bases(ll: LinearLayout, axis: int) -> None:
    """Reductions and scans need every basis to move along `axis` or off it, not both."""
    for b in ll.reg + ll.lane + ll.warp:
        if b[axis] and any(x for d, x in enumerate(b) if d != axis):
            raise NotImplementedError(f"layout {ll} mixes dimension {axis} with others")
