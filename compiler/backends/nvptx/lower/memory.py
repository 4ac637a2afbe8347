"""Global loads and stores as predicated vector accesses (inline PTX, as Triton emits them).

Each thread's registers are cut into groups of `vec` elements that are consecutive in the
layout and, by axis analysis, consecutive and aligned in memory, with one mask value; each
group is one `ld.global.v4.b32`-style access of at most 128 bits, predicated by the mask
(and, for stores, by ownership so replicated elements are written once).
"""

from __future__ import annotations

import llvmlite.ir as ir

from ....ir.core import Op, Value
from ....ir.types import ElemType, PointerType, ScalarType, elem_of
from ...gpuir.access import access_width
from .context import Lowering
from .registry import Regs, lowering
from .types import const, i8, i16, i32, i64, llvm_type, mem_bits, mem_type

_LOAD_CACHE = {"ca", "cg", "cs", "lu", "cv"}
_STORE_CACHE = {"wb", "cg", "cs", "wt"}
_EVICT = {"evict_first", "evict_last", "evict_normal", "evict_unchanged", "no_allocate"}


def vector_width(ctx: Lowering, ptr: Value, mask: Value | None) -> int:
    """How many consecutive registers one access can cover (1 when nothing is known)."""
    return access_width(ctx.gpu, ptr, mask)


def _word_bits(total: int) -> int:
    return 32 if total >= 32 else 16


def _to_words(ctx: Lowering, elem: ElemType, values: list[ir.Value]) -> list[ir.Value]:
    b = ctx.b
    bits = mem_bits(elem)
    mty = ir.IntType(bits) if not (isinstance(elem, ScalarType) and elem.is_floating()) else llvm_type(elem)
    if isinstance(elem, ScalarType) and elem.is_bool():
        values = [b.zext(v, i8) for v in values]
    elif isinstance(elem, PointerType):
        values = [b.ptrtoint(v, i64) for v in values]
    total = bits * len(values)
    wbits = _word_bits(total)
    if total < wbits:  # a single byte travels in a 16-bit register
        return [b.zext(b.bitcast(values[0], ir.IntType(bits)), i16)]
    vec: ir.Value = ir.Constant(ir.VectorType(mty, len(values)), None)
    for i, v in enumerate(values):
        vec = b.insert_element(vec, v, const(i32, i))
    n = total // wbits
    words = b.bitcast(vec, ir.VectorType(ir.IntType(wbits), n))
    return [b.extract_element(words, const(i32, i)) for i in range(n)]


def _from_words(ctx: Lowering, elem: ElemType, words: list[ir.Value], count: int) -> list[ir.Value]:
    b = ctx.b
    bits = mem_bits(elem)
    is_float = isinstance(elem, ScalarType) and elem.is_floating()
    mty = llvm_type(elem) if is_float else ir.IntType(bits)
    if bits * count < 16:
        values = [b.bitcast(b.trunc(words[0], ir.IntType(bits)), mty)]
    else:
        wty = words[0].type
        vec: ir.Value = ir.Constant(ir.VectorType(wty, len(words)), None)
        for i, w in enumerate(words):
            vec = b.insert_element(vec, w, const(i32, i))
        elems = b.bitcast(vec, ir.VectorType(mty, count))
        values = [b.extract_element(elems, const(i32, i)) for i in range(count)]
    if isinstance(elem, ScalarType) and elem.is_bool():
        return [b.icmp_unsigned("!=", v, const(i8, 0)) for v in values]
    if isinstance(elem, PointerType):
        return [b.inttoptr(v, llvm_type(elem)) for v in values]
    return values


def _modifiers(op: Op, caches: set[str]) -> str:
    out = ""
    cache = str(op.attrs.get("cache") or "").lstrip(".")
    if cache:
        if cache not in caches:
            raise ValueError(f"cache modifier '{cache}' is not one of {sorted(caches)}")
        out += "." + cache
    evict = str(op.attrs.get("evict") or "").lstrip(".")
    # PTX takes an L1 eviction priority or a cache operator, not both: the operator wins.
    if evict and evict != "evict_normal" and not cache:
        if evict not in _EVICT:
            raise ValueError(f"eviction policy '{evict}' is not one of {sorted(_EVICT)}")
        out += ".L1::" + evict
    return out


def _access_type(total: int) -> tuple[str, str, ir.Type, int]:
    """PTX vector suffix, register constraint, word type and word count for `total` bits."""
    wbits = _word_bits(total)
    n = max(total // wbits, 1)
    suffix = (f".v{n}" if n > 1 else "") + (".b32" if wbits == 32 else (".b16" if total >= 16 else ".b8"))
    return suffix, "r" if wbits == 32 else "h", ir.IntType(wbits), n


@lowering("load")
def load(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    ptr, mask = op.operands[0], op.operands[1] if len(op.operands) > 1 else None
    pointee = elem_of(ptr.type)
    assert isinstance(pointee, PointerType)
    elem = pointee.element_ty
    vec = vector_width(ctx, ptr, mask)
    space = "ld.volatile.global" if op.attrs.get("volatile") else "ld.global" + _modifiers(op, _LOAD_CACHE)
    suffix, con, wty, n = _access_type(vec * mem_bits(elem))
    out: list[ir.Value] = []
    for g in range(0, len(args[0]), vec):
        outs = "{" + ", ".join(f"${i}" for i in range(n)) + "}" if n > 1 else "$0"
        operands: list[ir.Value] = []
        text = ""
        if mask is None:
            text = f"{space}{suffix} {outs}, [ ${n} + 0 ];"
            operands = [args[0][g]]
            constraints = ",".join([f"={con}"] * n + ["l"])
        else:
            others = _to_words(ctx, elem, args[2][g : g + vec]) if len(args) > 2 else [const(wty, 0)] * n
            movs = " ".join(f"mov.b{wty.width} ${i}, ${n + 2 + i};" for i in range(n))
            text = f"{movs} @${n} {space}{suffix} {outs}, [ ${n + 1} + 0 ];"
            operands = [args[1][g], args[0][g], *others]
            constraints = ",".join([f"=&{con}"] * n + ["b", "l"] + [con] * n)
        ret = ir.LiteralStructType([wty] * n) if n > 1 else wty
        res = ctx.asm(ret, text, constraints, operands, side_effect=bool(op.attrs.get("volatile")))
        words = [ctx.b.extract_value(res, i) for i in range(n)] if n > 1 else [res]
        out.extend(_from_words(ctx, elem, words, vec))
    return [out]


@lowering("store")
def store(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    ptr = op.operands[0]
    mask = op.operands[2] if len(op.operands) > 2 else None
    pointee = elem_of(ptr.type)
    assert isinstance(pointee, PointerType)
    elem = pointee.element_ty
    vec = vector_width(ctx, ptr, mask)
    space = "st.global" + _modifiers(op, _STORE_CACHE)
    suffix, con, _, n = _access_type(vec * mem_bits(elem))
    owner = ctx.owner(ctx.layout(ptr))
    for g in range(0, len(args[0]), vec):
        words = _to_words(ctx, elem, args[1][g : g + vec])
        values = "{" + ", ".join(f"${i + 2}" for i in range(n)) + "}" if n > 1 else "$2"
        pred = ctx.and_preds(args[2][g] if mask is not None else None, owner)
        if pred is None:
            pred = const(ir.IntType(1), 1)
        text = f"@$0 {space}{suffix} [ $1 + 0 ], {values};"
        ctx.asm(ir.VoidType(), text, ",".join(["b", "l"] + [con] * n), [pred, args[0][g], *words], side_effect=True)
    return []


@lowering("addptr")
def addptr(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    pointee = elem_of(op.operands[0].type)
    offset = elem_of(op.operands[1].type)
    assert isinstance(pointee, PointerType) and isinstance(offset, ScalarType)
    ety = mem_type(pointee.element_ty)
    out = []
    for p, off in zip(args[0], args[1]):
        if offset.is_int_unsigned() and offset.primitive_bitwidth < 64:
            off = ctx.b.zext(off, i64)  # GEP sign-extends its indices
        out.append(ctx.b.gep(p, [off], source_etype=ety))
    return [out]
