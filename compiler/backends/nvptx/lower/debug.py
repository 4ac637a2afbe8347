"""`device_print` (CUDA's `vprintf`) and `device_assert` (a record in a module global, then `exit`).

Each element prints once, from the thread that owns it, as
`pid (x, y, z) idx (i, j) <prefix><value>`.

A failed assertion does not trap (a trap is a sticky CUDA_ERROR_ASSERT: the context would be lost
for the rest of the process). A thread holding a false element claims the module's
`__despina_assert` record (`ASSERT_FIELDS`, one u32 each, zero while no assertion failed) with a
compare-and-swap on its `failed` word, and the winner writes which assertion (its index in the
kernel's `metadata["asserts"]`), its program id and the failing element's row-major index. Then its
whole warp exits: the warp's threads are converged at the assertion (tile ops run in every thread),
so `vote.any.sync` is well defined, and exiting whole warps keeps warp-synchronous ops (`shfl.sync`)
after it free of exited lanes; the PTX ISA releases a CTA barrier (`bar.sync`) that only exited
threads hold up. The rest of the grid runs on; the launcher reads the record after the launch,
clears it and raises.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ....ir.core import Op
from ....ir.types import PointerType, ScalarType, elem_of, float32, shape_of
from . import fp8
from .context import Lowering
from .registry import Regs, lowering
from .types import const, f64, generic_ptr, i1, i8, i32, i64, void

ASSERT_GLOBAL = "__despina_assert"
ASSERT_FIELDS = ("failed", "assert", "pid_x", "pid_y", "pid_z", "element")


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
    """The printf conversion and argument of one element; `hex_` prints its raw bits, zero-padded to
    its bytes, as the interpreter does (`0x000000ff` for an int32 255)."""
    b = ctx.b
    if isinstance(elem, PointerType):
        return "%p", b.ptrtoint(v, i64)
    assert isinstance(elem, ScalarType)
    bits = elem.primitive_bitwidth
    if hex_:
        word = b.bitcast(v, ir.IntType(bits)) if elem.is_floating() else v
        return f"0x%0{max(bits, 8) // 4}llx", b.zext(word, i64) if bits < 64 else word
    if elem.is_fp8():
        return "%f", b.fpext(fp8.convert(ctx, [v], elem, float32)[0], f64)
    if elem.is_floating():
        return "%f", b.fpext(v, f64) if v.type != f64 else v
    if bits == 64:
        return ("%lld" if elem.is_int_signed() else "%llu"), v
    signed = elem.is_int_signed() and not elem.is_bool()
    return ("%d" if signed else "%u"), v if bits == 32 else (b.sext if signed else b.zext)(v, i32)


@lowering("device_print")
def device_print(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    b = ctx.b
    ctx.prints = True
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
    cond = op.operands[0]
    ll, shape = ctx.layout(cond), shape_of(cond.type)
    failed: ir.Value = const(i1, 0)
    element: ir.Value = const(i32, 0)
    for r in reversed(range(len(args[0]))):  # the element: this thread's first false one
        bad = b.not_(args[0][r])
        element = b.select(bad, _row_major(ctx, ctx.index(ll, r), shape), element)
        failed = b.or_(failed, bad)
    loc = op.loc
    index = len(ctx.asserts)
    ctx.asserts.append({"message": str(op.attrs.get("msg", "")), "file": loc.file if loc else "<unknown>",
                        "line": loc.line if loc else 0, "shape": list(shape)})
    warp_failed = ctx.call("llvm.nvvm.vote.any.sync", i1, [const(i32, -1), failed])
    with b.if_then(warp_failed, likely=False):
        with b.if_then(failed):
            record = _assert_record(ctx)
            claim = b.cmpxchg(_field(ctx, record, "failed"), const(i32, 0), const(i32, 1), "monotonic", "monotonic")
            with b.if_then(b.extract_value(claim, 1)):
                pid = [ctx.program_scalar(f"ctaid.{a}") for a in "xyz"]
                for name, value in zip(ASSERT_FIELDS[1:], [const(i32, index), *pid, element]):
                    b.store(value, _field(ctx, record, name))
        ctx.call("llvm.nvvm.exit", void, [])
        b.unreachable()
    return []


def _row_major(ctx: Lowering, idx: list[ir.Value], shape: tuple[int, ...]) -> ir.Value:
    """The row-major linear index of the element at `idx` in a tile of `shape`."""
    b = ctx.b
    linear: ir.Value = const(i32, 0)
    stride = 1
    for d in reversed(range(len(shape))):
        linear = b.add(linear, b.mul(idx[d], const(i32, stride)) if stride != 1 else idx[d])
        stride *= shape[d]
    return linear


def _assert_record(ctx: Lowering) -> ir.GlobalVariable:
    """The module's `__despina_assert` record: externally visible, so that the launcher finds it with
    cuModuleGetGlobal, and zero-initialized when the module is loaded."""
    g = ctx.module.globals.get(ASSERT_GLOBAL)
    if g is None:
        ty = ir.ArrayType(i32, len(ASSERT_FIELDS))
        g = ir.GlobalVariable(ctx.module, ty, ASSERT_GLOBAL, addrspace=1)
        g.initializer = ir.Constant(ty, None)
        g.align = 4
    assert isinstance(g, ir.GlobalVariable)
    return g


def _field(ctx: Lowering, record: ir.GlobalVariable, name: str) -> ir.Value:
    return ctx.b.gep(record, [const(i32, 0), const(i32, ASSERT_FIELDS.index(name))], inbounds=True)
