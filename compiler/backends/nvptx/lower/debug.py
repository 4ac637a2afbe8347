"""`device_print` (CUDA's `vprintf`) and `device_assert` (`__assertfail`).

Each element prints once, from the thread that owns it, as
`pid (x, y, z) idx (i, j) <prefix><value>`; an assertion fails in any thread holding a false
element, with the op's source file and line.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ....ir.core import Op
from ....ir.types import PointerType, ScalarType, elem_of
from .context import Lowering
from .registry import Regs, lowering
from .types import const, f64, generic_ptr, i1, i8, i32, i64, void


def string(ctx: Lowering, text: str) -> ir.Value:
    """A generic pointer to a NUL-terminated global string constant."""
    data = bytearray(text.encode("utf-8")) + b"\0"
    name = f"str.{len([g for g in ctx.module.global_values if g.name.startswith('str.')])}"
    g = ir.GlobalVariable(ctx.module, ir.ArrayType(i8, len(data)), name, addrspace=1)
    g.global_constant = True
    g.linkage = "internal"
    g.initializer = ir.Constant(ir.ArrayType(i8, len(data)), data)
    return ctx.b.addrspacecast(g, generic_ptr)


def _printable(ctx: Lowering, elem: object, v: ir.Value, hex_: bool) -> tuple[str, ir.Value]:
    b = ctx.b
    if isinstance(elem, PointerType):
        return "%p", b.ptrtoint(v, i64)
    assert isinstance(elem, ScalarType)
    if elem.is_floating():
        if hex_:
            bits = elem.primitive_bitwidth
            word = b.bitcast(v, ir.IntType(bits))
            return ("0x%llx", b.zext(word, i64)) if bits < 64 else ("0x%llx", word)
        return "%f", b.fpext(v, f64) if v.type != f64 else v
    if elem.primitive_bitwidth == 64:
        return ("0x%llx" if hex_ else ("%lld" if elem.is_int_signed() else "%llu")), v
    wide = b.sext(v, i32) if elem.is_int_signed() and not elem.is_bool() else b.zext(v, i32) if v.type != i32 else v
    return ("0x%x" if hex_ else ("%d" if elem.is_int_signed() and not elem.is_bool() else "%u")), wide


@lowering("device_print")
def device_print(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    b = ctx.b
    prefix, hex_ = str(op.attrs.get("prefix", "")), bool(op.attrs.get("hex", False))
    vprintf = ctx.declare("vprintf", i32, [generic_ptr, generic_ptr])
    pid = [ctx.program_scalar(f"ctaid.{a}") for a in "xyz"]
    if not op.operands:
        with b.if_then(b.icmp_unsigned("==", ctx.tid, const(i32, 0))):
            _vprintf(ctx, vprintf, "pid (%u, %u, %u) " + prefix.replace("%", "%%") + "\n", pid)
        return []
    for v, regs in zip(op.operands, args):
        ll = ctx.layout(v)
        owner = ctx.owner(ll)
        for r, x in enumerate(regs):
            idx = ctx.index(ll, r)
            fmt, value = _printable(ctx, elem_of(v.type), x, hex_)
            idx_fmt = " idx (" + ", ".join(["%d"] * len(idx)) + ")" if idx else ""
            text = "pid (%u, %u, %u)" + idx_fmt + " " + prefix.replace("%", "%%") + fmt + "\n"
            if owner is None:
                _vprintf(ctx, vprintf, text, [*pid, *idx, value])
            else:
                with b.if_then(owner):
                    _vprintf(ctx, vprintf, text, [*pid, *idx, value])
    return []


def _vprintf(ctx: Lowering, vprintf: ir.Function, text: str, values: list[ir.Value]) -> None:
    b = ctx.b
    ty = ir.LiteralStructType([v.type for v in values])
    buf = b.alloca(ty)
    for i, v in enumerate(values):
        b.store(v, b.gep(buf, [const(i32, 0), const(i32, i)]))
    b.call(vprintf, [string(ctx, text), buf])


@lowering("device_assert")
def device_assert(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    b = ctx.b
    failed: ir.Value = const(i1, 0)
    for cond in args[0]:
        failed = b.or_(failed, b.not_(cond))
    loc = op.loc
    fn = ctx.declare("__assertfail", void, [generic_ptr, generic_ptr, i32, generic_ptr, i64])
    with b.if_then(failed, likely=False):
        msg = str(op.attrs.get("msg", "device_assert failed"))
        b.call(
            fn,
            [
                string(ctx, msg),
                string(ctx, loc.file if loc else "<unknown>"),
                const(i32, loc.line if loc else 0),
                string(ctx, ctx.kernel),
                const(i64, 1),
            ],
        )
    return []
