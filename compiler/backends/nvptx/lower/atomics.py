"""Atomics as inline PTX `atom.<sem>.<scope>.global.<op>.<type>`, so the requested memory
order and scope reach the hardware (LLVM's `atomicrmw` would drop the ordering on NVPTX).

Each element is updated once, by the thread that owns it; when a replicated result is used,
the owner's value is shared with the other threads through shared memory.

PTX has no float `atom.max`/`atom.min`; as in Triton they are integer atomics on the bits, split
on the value's sign: with the sign bit clear, a signed max of the bits; with it set, an unsigned
min (reversed for min). That orders floats by sign and magnitude, a total order
-NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN, which the interpreter follows too.

Two 16-bit float atomics have no instruction on some targets: `atom.add.noftz.bf16` needs sm_90,
and PTX has no `atom.exch.b16` at all. They are compare-and-swap loops (`_cas16`), as LLVM expands
them: on the aligned 32-bit word that holds the element (ptxas expands `atom.cas.b16` into such a
loop itself), relaxed, with `fence.acq_rel` before the loop for release and after it for acquire.
Every other form the rules emit exists on every supported target (sm_80 and up): `.f16` add
needs sm_70, `.f64` add sm_60, 64-bit integer min/max/and/or/xor sm_32, `.sem`/`.scope` sm_70,
and `atom.cas.b16` sm_70.
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
        if kind in ("max", "min") and bits in (32, 64):
            return _FLOAT_MINMAX[kind][0], f"s{bits}"
        raise ValueError(
            f"atomic '{kind}' on {elem} is not supported; floats have add and xchg, and max and min on fp32 and fp64"
        )
    if kind == "fadd" or kind not in _INT_OPS or bits not in (32, 64):
        raise ValueError(f"atomic '{kind}' on {elem} is not supported")
    name = _INT_OPS[kind]
    if name in ("and", "or", "xor", "exch"):
        return name, f"b{bits}"
    unsigned = kind in ("umax", "umin") or elem.is_int_unsigned() or name == "add"
    return name, ("u" if unsigned else "s") + str(bits)


# Float max/min: the integer atomic for values with the sign bit clear, and for those with it set.
_FLOAT_MINMAX = {"max": ("max", "min.u"), "min": ("min", "max.u")}


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
    kind = op.attrs["kind"]
    name, ty = _ptx_type(op, elem, kind)
    bits = elem.primitive_bitwidth
    split = elem.is_floating() and kind in _FLOAT_MINMAX
    loop = _cas_update(ctx, elem, kind)
    out = []
    for r, (ptr, value) in enumerate(zip(args[0], args[1])):
        pred = ctx.and_preds(args[2][r] if len(args) > 2 else None, owner) or const(i1, 1)
        if split:
            old = _float_minmax(ctx, prefix, kind, bits, pred, ptr, value)
        elif loop is not None:
            old = _cas16(ctx, op.attrs["sem"], op.attrs["scope"], loop, pred, ptr, value)
        else:
            old = _atom(ctx, f"{prefix}.{name}.{ty}", bits, pred, ptr, [value])
        out.append(old if old.type == value.type else ctx.b.bitcast(old, value.type))
    return [_share(ctx, op, out, owner)]


def _float_minmax(
    ctx: Lowering, prefix: str, kind: str, bits: int, pred: ir.Value, ptr: ir.Value, value: ir.Value
) -> ir.Value:
    """Float atomic max/min as two predicated integer atomics on the bits (see the module
    docstring); each thread runs the one its value's sign picks. The old value's bits."""
    b = ctx.b
    _, ity = _reg(bits)
    word = b.bitcast(value, ity)
    negative = b.icmp_signed("<", word, const(ity, 0))
    clear, set_ = _FLOAT_MINMAX[kind]
    old_clear = _atom(ctx, f"{prefix}.{clear}.s{bits}", bits, b.and_(pred, b.not_(negative)), ptr, [word])
    old_set = _atom(ctx, f"{prefix}.{set_}{bits}", bits, b.and_(pred, negative), ptr, [word])
    return b.select(negative, old_set, old_clear)


# What a 16-bit compare-and-swap loop computes: `cas_new` from the element's old bits `cas_old`
# and the operand `$3`. bf16 add is `fma.rn.bf16 old * 1.0 + v` (sm_80): one rounding, to nearest
# even, subnormals kept, as `atom.add.noftz.bf16` and the interpreter's float32 add then round.
_CAS_UPDATES = {
    "bf16 add": "mov.b16 cas_one, 0x3F80; fma.rn.bf16 cas_new, cas_old, cas_one, $3;",
    "exch": "mov.b16 cas_new, $3;",
}


def _cas_update(ctx: Lowering, elem: ScalarType, kind: str) -> str | None:
    """The `_CAS_UPDATES` entry when the atomic has no instruction on this target, else None."""
    if not elem.is_floating() or elem.primitive_bitwidth != 16:
        return None
    if kind == "xchg":
        return _CAS_UPDATES["exch"]
    if kind in ("add", "fadd") and elem.is_bf16() and ctx.target.capability < 90:
        return _CAS_UPDATES["bf16 add"]
    return None


def _cas16(
    ctx: Lowering, sem: str, scope: str, update: str, pred: ir.Value, ptr: ir.Value, value: ir.Value
) -> ir.Value:
    """A 16-bit atomic read-modify-write as a compare-and-swap loop on the aligned 32-bit word
    that holds the element (little-endian: at bit 16 when the address is 2 mod 4), in one
    `{ }` block of inline PTX, whose registers and labels are local to it. The loop is relaxed;
    `fence.acq_rel` before it makes the successful CAS's write a release, after it its read an
    acquire (the PTX memory model's release and acquire patterns). The old value's bits; 0 where
    `pred` is off, as `_atom`."""
    fence = f"fence.acq_rel.{scope};"
    text = " ".join(
        [
            "{ .reg .pred cas_again; .reg .b64 cas_addr;",
            ".reg .b32 cas_shift, cas_word, cas_seen, cas_bits; .reg .b16 cas_old, cas_new, cas_one;",
            "mov.b16 $0, 0;",
            "@!$1 bra cas_done;",
            "and.b64 cas_addr, $2, -4;",
            "cvt.u32.u64 cas_shift, $2; and.b32 cas_shift, cas_shift, 2; shl.b32 cas_shift, cas_shift, 3;",
            fence if sem in ("release", "acq_rel") else "",
            f"ld.relaxed.{scope}.global.b32 cas_word, [ cas_addr + 0 ];",
            "cas_retry:",
            "bfe.u32 cas_bits, cas_word, cas_shift, 16; cvt.u16.u32 cas_old, cas_bits;",
            update,
            "cvt.u32.u16 cas_bits, cas_new; bfi.b32 cas_bits, cas_bits, cas_word, cas_shift, 16;",
            f"atom.relaxed.{scope}.global.cas.b32 cas_seen, [ cas_addr + 0 ], cas_word, cas_bits;",
            "setp.ne.b32 cas_again, cas_seen, cas_word; mov.b32 cas_word, cas_seen;",
            "@cas_again bra cas_retry;",
            fence if sem in ("acquire", "acq_rel") else "",
            "mov.b16 $0, cas_old;",
            "cas_done: }",
        ]
    )
    word = value if isinstance(value.type, ir.IntType) else ctx.b.bitcast(value, i16)
    return ctx.asm(i16, " ".join(text.split()), "=&h,b,l,h", [pred, ptr, word], side_effect=True)


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
