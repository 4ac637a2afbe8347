"""Axis analysis: contiguity, divisibility and constancy of integer and pointer values.

Per dimension of a value (one entry for a scalar):
- `contig[d]`: the value splits along `d` into runs of this many consecutive integers
  (pointers: consecutive elements), each run starting at an index multiple of its length;
- `div[d]`: the first value of each run is a multiple of this (bytes for pointers);
- `const[d]`: runs of this many equal values.
Seeded by the specialization (`divisibility`, `equal_to_1` on the module) and by the
`multiple_of` / `max_contiguous` / `max_constancy` / `assume` hints. The layout pass reads it
to pick each memory access's vector width; the lowering to check a mask's vector width.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from math import gcd
from typing import Any

from ...ir.core import Block, Function, Op, Value
from ...ir.ops import OPS
from ...ir.registry import OpRegistry
from ...ir.types import PointerType, ScalarType, elem_of, shape_of
from .ops import CONVERT, GPU_OPS

MAX_DIV = 1 << 30


def pow2_divisor(n: int) -> int:
    return MAX_DIV if n == 0 else min(n & -n, MAX_DIV)


@dataclass(frozen=True)
class AxisInfo:
    contig: tuple[int, ...]
    div: tuple[int, ...]
    const: tuple[int, ...]
    value: int | None = None

    def join(self, other: AxisInfo) -> AxisInfo:
        """What holds for both (a loop-carried value, the two branches of an `if`)."""
        return AxisInfo(
            tuple(map(gcd, self.contig, other.contig)),
            tuple(map(gcd, self.div, other.div)),
            tuple(map(gcd, self.const, other.const)),
            self.value if self.value == other.value else None,
        )


def _dims(v: Value) -> tuple[int, ...]:
    return shape_of(v.type) or (1,)


def unknown(v: Value) -> AxisInfo:
    n = len(_dims(v))
    return AxisInfo((1,) * n, (1,) * n, (1,) * n)


def constant_info(v: Value, value: int) -> AxisInfo:
    dims = _dims(v)
    return AxisInfo((1,) * len(dims), (pow2_divisor(value),) * len(dims), dims, value)


Rule = Callable[["AxisAnalysis", Op, list[AxisInfo]], AxisInfo]
RULES: OpRegistry[Rule] = OpRegistry("axis analysis", (OPS, GPU_OPS))
rule = RULES.register
RULES.builtin("`AxisAnalysis.op` walks their regions and joins what init and yields carry", "for", "if")
RULES.builtin("`AxisAnalysis.op` walks their regions for the hints inside (results: unknown)", "while", "reduce", "scan")
RULES.builtin("terminators: read by the op that owns the region", "yield", "condition", "return")
RULES.builtin("`AxisAnalysis._assume` reads the divisibility its condition states", "assume")
RULES.builtin("no results to describe", "store", "descriptor_store", "local_store", "barrier", "device_print", "device_assert")
RULES.unsupported("float results: the facts describe integers and pointers (unknown)", "exp", "exp2", "log", "log2",
                  "sqrt", "sqrt_rn", "rsqrt", "sin", "cos", "erf", "floor", "ceil", "div", "div_rn", "fdiv", "pow", "fma")
RULES.unsupported("values read from memory: no facts (unknown)", "load", "descriptor_load", "atomic_rmw", "atomic_cas")
RULES.unsupported("not analysed: results get no facts (unknown)", "neg", "abs", "not", "bitcast", "reshape", "cat",
                  "join", "split", "dot")
RULES.unsupported("calls are inlined before layout assignment runs the analysis", "call")
RULES.unsupported("shared-memory buffers and what is read from them: no facts (unknown)", "local_alloc", "local_load")


class AxisAnalysis:
    """Runs once over a kernel; `info(value)` answers for any integer or pointer value."""

    def __init__(self, attrs: Mapping[str, Any], fn: Function) -> None:
        """Analyse `fn` under the specialization in the module attributes `attrs`."""
        self.infos: dict[Value, AxisInfo] = {}
        divisible = set(attrs.get("divisibility", []) or [])
        ones = set(attrs.get("equal_to_1", []) or [])
        for i, arg in enumerate(fn.args):
            if i in ones:
                self.infos[arg] = constant_info(arg, 1)
            elif isinstance(arg.type, PointerType):
                natural = arg.type.element_ty.itemsize
                self.infos[arg] = AxisInfo((1,), (16 if i in divisible else natural,), (1,))
            else:
                self.infos[arg] = AxisInfo((1,), (16 if i in divisible else 1,), (1,))
        self.block(fn.body)

    def info(self, v: Value) -> AxisInfo:
        return self.infos.get(v) or unknown(v)

    def block(self, block: Block) -> None:
        for op in block.ops:
            self.op(op)

    def op(self, op: Op) -> None:
        if op.name == "for":
            iv = op.regions[0].args[0]
            lo, step = self.info(op.operands[0]), self.info(op.operands[2])
            self.infos[iv] = AxisInfo((1,), (gcd(lo.div[0], step.div[0]),), (1,))
            self._loop(op, op.operands[3:], op.regions[0].args[1:], op.regions[0])
            return
        if op.name == "if":
            for region in op.regions:
                self.block(region)
            then, other = op.regions[0].terminator, op.regions[1].terminator
            if then is not None and other is not None:
                for r, a, b in zip(op.results, then.operands, other.operands):
                    self.infos[r] = self.info(a).join(self.info(b))
            return
        if op.regions:  # while, reduce, scan: bodies analysed for their own hints only
            for region in op.regions:
                self.block(region)
            return
        fn = RULES.get(op.name)
        if fn is not None and len(op.results) == 1:
            self.infos[op.result] = fn(self, op, [self.info(v) for v in op.operands])
        if op.name == "assume":
            self._assume(op)

    def _loop(self, op: Op, inits: list[Value], args: list[Value], body: Block) -> None:
        """Iterate to a fixpoint: carried values hold what init and every yield agree on."""
        for a, init in zip(args, inits):
            self.infos[a] = self.info(init)
        for _ in range(8):
            self.block(body)
            term = body.terminator
            changed = False
            for a, y in zip(args, term.operands if term is not None else []):
                joined = self.info(a).join(self.info(y))
                if joined != self.info(a):
                    self.infos[a] = joined
                    changed = True
            if not changed:
                break
        else:  # no fixpoint yet: what the body was analysed with may not hold; assume nothing
            for a in args:
                self.infos[a] = unknown(a)
            self.block(body)
        for r, a in zip(op.results, args):
            self.infos[r] = self.info(a)

    def _assume(self, op: Op) -> None:
        # assume(x % c == 0) tells x's divisibility, as in Triton.
        cond = op.operands[0].owner
        if not isinstance(cond, Op) or cond.name != "cmp" or cond.attrs.get("pred") != "eq":
            return
        rem, zero = cond.operands
        if self.info(zero).value != 0 or not isinstance(rem.owner, Op) or rem.owner.name != "rem":
            return
        x, c = rem.owner.operands
        cv = self.info(c).value
        if cv:
            old = self.info(x)
            self.infos[x] = AxisInfo(
                old.contig, tuple(max(d, pow2_divisor(cv)) for d in old.div), old.const, old.value
            )


@rule(CONVERT)
def _convert(a: AxisAnalysis, op: Op, ins: list[AxisInfo]) -> AxisInfo:
    return ins[0]  # the same values, held elsewhere


@rule("constant")
def _constant(a: AxisAnalysis, op: Op, ins: list[AxisInfo]) -> AxisInfo:
    value = op.attrs["value"]
    if isinstance(value, bool) or isinstance(value, int):
        return constant_info(op.result, int(value))
    dims = _dims(op.result)
    return AxisInfo((1,) * len(dims), (1,) * len(dims), dims)


@rule("program_id", "num_programs")
def _grid(a: AxisAnalysis, op: Op, ins: list[AxisInfo]) -> AxisInfo:
    return AxisInfo((1,), (1,), (1,))


@rule("arange")
def _arange(a: AxisAnalysis, op: Op, ins: list[AxisInfo]) -> AxisInfo:
    start, end = op.attrs["start"], op.attrs["end"]
    return AxisInfo((end - start,), (pow2_divisor(start),), (1,))


@rule("splat")
def _splat(a: AxisAnalysis, op: Op, ins: list[AxisInfo]) -> AxisInfo:
    dims = _dims(op.result)
    return AxisInfo((1,) * len(dims), (ins[0].div[0],) * len(dims), dims, ins[0].value)


@rule("broadcast")
def _broadcast(a: AxisAnalysis, op: Op, ins: list[AxisInfo]) -> AxisInfo:
    src, dst = _dims(op.operands[0]), _dims(op.result)
    x = ins[0]
    contig = tuple(c if s == d else 1 for c, s, d in zip(x.contig, src, dst))
    const = tuple(c if s == d else d for c, s, d in zip(x.const, src, dst))
    return AxisInfo(contig, x.div, const, x.value)


@rule("expand_dims")
def _expand_dims(a: AxisAnalysis, op: Op, ins: list[AxisInfo]) -> AxisInfo:
    axis, x = op.attrs["axis"], ins[0]
    if not shape_of(op.operands[0].type):
        return AxisInfo((1,), x.div, (1,), x.value)
    # Along the new axis every element starts a run of its own: what divides them all. A run of
    # consecutive integers holds an odd offset from its start, so a contiguous dimension gives 1.
    if x.value is not None:
        div = pow2_divisor(x.value)
    else:
        div = min(d if c == 1 else 1 for c, d in zip(x.contig, x.div))
    return AxisInfo(
        x.contig[:axis] + (1,) + x.contig[axis:],
        x.div[:axis] + (div,) + x.div[axis:],
        x.const[:axis] + (1,) + x.const[axis:],
        x.value,
    )


@rule("multiple_of", "max_contiguous", "max_constancy")
def _hint(a: AxisAnalysis, op: Op, ins: list[AxisInfo]) -> AxisInfo:
    x, values = ins[0], tuple(op.attrs["values"])
    if op.name == "multiple_of":
        return AxisInfo(x.contig, values, x.const, x.value)
    if op.name == "max_contiguous":
        return AxisInfo(values, x.div, x.const, x.value)
    return AxisInfo(x.contig, x.div, values, x.value)


def _fold(op: Op, ins: list[AxisInfo], fn: Callable[[int, int], int]) -> int | None:
    if len(ins) == 2 and ins[0].value is not None and ins[1].value is not None:
        try:
            return fn(ins[0].value, ins[1].value)
        except ZeroDivisionError:
            return None
    return None


@rule("add", "addptr")
def _add(a: AxisAnalysis, op: Op, ins: list[AxisInfo]) -> AxisInfo:
    x, y = ins
    scale = 1
    if op.name == "addptr":
        ptr = elem_of(op.operands[0].type)
        assert isinstance(ptr, PointerType)
        scale = ptr.element_ty.itemsize
    contig = tuple(max(gcd(xc, yk), gcd(xk, yc)) for xc, xk, yc, yk in zip(x.contig, x.const, y.contig, y.const))
    div = tuple(gcd(xd, min(yd * scale, MAX_DIV)) for xd, yd in zip(x.div, y.div))
    const = tuple(map(gcd, x.const, y.const))
    return AxisInfo(contig, div, const, None if op.name == "addptr" else _fold(op, ins, lambda p, q: p + q))


@rule("sub")
def _sub(a: AxisAnalysis, op: Op, ins: list[AxisInfo]) -> AxisInfo:
    x, y = ins
    contig = tuple(gcd(xc, yk) for xc, yk in zip(x.contig, y.const))
    return AxisInfo(
        contig, tuple(map(gcd, x.div, y.div)), tuple(map(gcd, x.const, y.const)), _fold(op, ins, lambda p, q: p - q)
    )


@rule("mul")
def _mul(a: AxisAnalysis, op: Op, ins: list[AxisInfo]) -> AxisInfo:
    x, y = ins
    if y.value == 1:
        return x
    if x.value == 1:
        return y
    # A run [k, k+1, ...] has divisibility 1 element-wise, whatever k's.
    xd = tuple(1 if c > 1 else d for c, d in zip(x.contig, x.div))
    yd = tuple(1 if c > 1 else d for c, d in zip(y.contig, y.div))
    div = tuple(min(p * q, MAX_DIV) for p, q in zip(xd, yd))
    return AxisInfo((1,) * len(div), div, tuple(map(gcd, x.const, y.const)), _fold(op, ins, lambda p, q: p * q))


@rule("rem")
def _rem(a: AxisAnalysis, op: Op, ins: list[AxisInfo]) -> AxisInfo:
    x, y = ins
    contig = tuple(gcd(xc, yd) if yk > 1 or y.value is not None else 1 for xc, yd, yk in zip(x.contig, y.div, y.const))
    return AxisInfo(contig, tuple(map(gcd, x.div, y.div)), tuple(map(gcd, x.const, y.const)), None)


@rule("floordiv", "shr")
def _div(a: AxisAnalysis, op: Op, ins: list[AxisInfo]) -> AxisInfo:
    x, y = ins
    n = len(x.contig)
    return AxisInfo((1,) * n, (1,) * n, tuple(map(gcd, x.const, y.const)), None)


@rule("shl")
def _shl(a: AxisAnalysis, op: Op, ins: list[AxisInfo]) -> AxisInfo:
    x, y = ins
    n = len(x.contig)
    if y.value is not None and 0 <= y.value < 31:
        xd = tuple(1 if c > 1 else d for c, d in zip(x.contig, x.div))
        return AxisInfo((1,) * n, tuple(min(d << y.value, MAX_DIV) for d in xd), tuple(map(gcd, x.const, y.const)))
    return AxisInfo((1,) * n, (1,) * n, tuple(map(gcd, x.const, y.const)))


@rule("and", "or", "xor", "maximum", "minimum", "umulhi")
def _bitwise(a: AxisAnalysis, op: Op, ins: list[AxisInfo]) -> AxisInfo:
    n = len(ins[0].contig)
    return AxisInfo((1,) * n, (1,) * n, tuple(map(gcd, ins[0].const, ins[1].const)))


@rule("cmp")
def _cmp(a: AxisAnalysis, op: Op, ins: list[AxisInfo]) -> AxisInfo:
    # With k and n multiples of g, [k, k+g) < n and [k, k+g) >= n keep one truth value over the
    # run (and n > [k, k+g), n <= [k, k+g)); `<=` and `>` do not: k <= n but k+1 > n when k == n.
    x, y = ins
    pred = op.attrs["pred"]
    const = []
    for xc, xd, xk, yc, yd, yk in zip(x.contig, x.div, x.const, y.contig, y.div, y.const):
        k = gcd(xk, yk)
        if pred in ("lt", "ge") and xc > 1 and yk > 1:
            k = max(k, gcd(xc, gcd(xd, yd)))
        elif pred in ("gt", "le") and yc > 1 and xk > 1:
            k = max(k, gcd(yc, gcd(yd, xd)))
        const.append(k)
    n = len(const)
    return AxisInfo((1,) * n, (1,) * n, tuple(const))


@rule("select")
def _select(a: AxisAnalysis, op: Op, ins: list[AxisInfo]) -> AxisInfo:
    c, x, y = ins
    contig = tuple(gcd(ck, gcd(xc, yc)) for ck, xc, yc in zip(c.const, x.contig, y.contig))
    return AxisInfo(contig, tuple(map(gcd, x.div, y.div)), tuple(map(gcd, c.const, gcd_t(x.const, y.const))))


def gcd_t(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(map(gcd, a, b))


@rule("cast")
def _cast(a: AxisAnalysis, op: Op, ins: list[AxisInfo]) -> AxisInfo:
    to = op.attrs["to"]
    if isinstance(to, ScalarType) and to.is_int() and not to.is_bool():
        return ins[0]
    return unknown(op.result)


@rule("trans")
def _trans(a: AxisAnalysis, op: Op, ins: list[AxisInfo]) -> AxisInfo:
    perm, x = op.attrs["perm"], ins[0]
    return AxisInfo(
        tuple(x.contig[p] for p in perm), tuple(x.div[p] for p in perm), tuple(x.const[p] for p in perm), x.value
    )


@rule("gather", "histogram", "extern_elementwise", "inline_asm")
def _data_dependent(a: AxisAnalysis, op: Op, ins: list[AxisInfo]) -> AxisInfo:
    # Values picked, counted or computed by a library at run time: nothing is known of their runs.
    return unknown(op.result)
