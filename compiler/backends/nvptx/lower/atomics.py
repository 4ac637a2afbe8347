"""Atomics as inline PTX `atom.<sem>.<scope>.global.<op>.<type>`, so the requested memory
order and scope reach the hardware (LLVM's `atomicrmw` would drop the ordering on NVPTX).

Each element is updated once, by the thread that owns it; when a replicated result is used,
the owner's value is shared with the other threads through shared memory.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ....ir.core import Op
from ....ir.types import PointerType, ScalarType, elem_of
from .context import Lowering
from .registry import Regs, lowering
from .smem import load_elem, row_major, store_elem
from .types import const, i1, i16, i32, i64

_INT_OPS = {
    "add": "add",
    "max": "max",
    "min": "min",
    "umax": "max",
    "umin": "min",
    "and": "and",
    "or": "or",
    "xor": "xor",
    "xchg": "exch",
}


def _ptx_type(op: Op, elem: ScalarType, kind: str) -> tuple[str, str]:
    """The PTX op and type suffix, e.g. ("add", "f32"), ("max", "s32"), ("exch", "b64")."""
    bits = elem.primitive_bitwidth
    if elem.is_floating():
        if kind in ("add", "fadd"):
            return ("add.noftz" if bits == 16 else "add"), elem.name.replace("fp", "f")
        if kind == "xchg":
            return "exch", f"b{bits}"
        raise ValueError(f"atomic '{kind}' on {elem} is not supported; only add and xchg are on floats")
    if kind == "fadd" or kind not in _INT_OPS or bits not in (32, 64):
        raise ValueError(f"atomic '{kind}' on {elem} is not supported")
    name = _INT_OPS[kind]
    if name in ("and", "or", "xor", "exch"):
        return name, f"b{bits}"
    unsigned = kind in ("umax", "umin") or elem.is_int_unsigned() or name == "add"
    return name, ("u" if unsigned else "s") + str(bits)


def _reg(bits: int) -> tuple[str, ir.IntType]:
    return {16: ("h", i16), 32: ("r", i32), 64: ("l", i64)}[bits]


def _atom(ctx: Lowering, instr: str, bits: int, pred: ir.Value, ptr: ir.Value, values: list[ir.Value]) -> ir.Value:
    con, ity = _reg(bits)
    b = ctx.b
    words = [v if isinstance(v.type, ir.IntType) else b.bitcast(v, ity) for v in values]
    operands = ", ".join(f"${i + 3}" for i in range(len(words)))
    text = f"mov.b{bits} $0, 0; @$1 {instr} $0, [ $2 + 0 ], {operands};"
    constraints = ",".join([f"=&{con}", "b", "l"] + [con] * len(words))
    return ctx.asm(ity, text, constraints, [pred, ptr, *words], side_effect=True)


def _share(ctx: Lowering, op: Op, results: list[ir.Value], owner: ir.Value | None) -> list[ir.Value]:
    """Give every replica of an element the value its owner got back."""
    if owner is None or not ctx.is_used(op.results[0]):
        return results
    b, ll, elem = ctx.b, ctx.layout(op.results[0]), elem_of(op.results[0].type)
    flats = [row_major(ctx, ctx.index(ll, r), ll.shape) for r in range(len(results))]
    with ctx.scratch(max(1, elem.primitive_bitwidth // 8) * max(1, _numel(ll.shape))) as buffer:
        with b.if_then(owner):
            for flat, v in zip(flats, results):
                store_elem(ctx, elem, flat, v, buffer)
        ctx.barrier()
        return [load_elem(ctx, elem, flat, buffer) for flat in flats]


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _prepare(ctx: Lowering, op: Op) -> tuple[ScalarType, str, ir.Value | None]:
    pointee = elem_of(op.operands[0].type)
    assert isinstance(pointee, PointerType) and isinstance(pointee.element_ty, ScalarType)
    sem, scope = op.attrs["sem"], op.attrs["scope"]
    return pointee.element_ty, f"atom.{sem}.{scope}.global", ctx.owner(ctx.layout(op.operands[0]))


@lowering("atomic_rmw")
def atomic_rmw(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    elem, prefix, owner = _prepare(ctx, op)
    name, ty = _ptx_type(op, elem, op.attrs["kind"])
    bits = elem.primitive_bitwidth
    out = []
    for r, (ptr, value) in enumerate(zip(args[0], args[1])):
        pred = ctx.and_preds(args[2][r] if len(args) > 2 else None, owner) or const(i1, 1)
        old = _atom(ctx, f"{prefix}.{name}.{ty}", bits, pred, ptr, [value])
        out.append(old if old.type == value.type else ctx.b.bitcast(old, value.type))
    return [_share(ctx, op, out, owner)]


@lowering("atomic_cas")
def atomic_cas(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    elem, prefix, owner = _prepare(ctx, op)
    bits = elem.primitive_bitwidth
    if bits not in (16, 32, 64):
        raise ValueError(f"atomic_cas on {elem} is not supported")
    out = []
    for ptr, cmp, value in zip(*args):
        old = _atom(ctx, f"{prefix}.cas.b{bits}", bits, owner or const(i1, 1), ptr, [cmp, value])
        out.append(old if old.type == value.type else ctx.b.bitcast(old, value.type))
    return [_share(ctx, op, out, owner)]
