"""A small helper to write test kernels against the tile-IR `Builder`, Triton-style:
scalars are splatted and tiles broadcast to a common shape automatically."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from despina.compiler.ir.builder import Builder
from despina.compiler.ir.core import Block, Function, Module, Value
from despina.compiler.ir.types import PointerType, ScalarType, TileType, Type, elem_of, int1, int32, shape_of

Scalar = int | float | bool


class KernelBuilder:
    def __init__(self, name: str, args: Sequence[tuple[str, Type]]) -> None:
        self.name = name
        self.fn = Function(name, Block([t for _, t in args], [n for n, _ in args]), [n for n, _ in args], kernel=True)
        self.b = Builder(self.fn.body)
        self.args = {n: a for (n, _), a in zip(args, self.fn.args)}

    def __getitem__(self, name: str) -> Value:
        return self.args[name]

    # ---- plumbing ------------------------------------------------------------------------

    def op(self, name: str, *operands: Value, **attrs: Any) -> Value:
        return self.b.create(name, list(operands), attrs).result

    def void(self, name: str, *operands: Value, **attrs: Any) -> None:
        self.b.create(name, list(operands), attrs)

    def const(self, value: Scalar, ty: Type = int32) -> Value:
        return self.b.constant(value, ty)

    def lift(self, x: Value | Scalar, like: Value) -> Value:
        if isinstance(x, Value):
            return x
        return self.const(x, elem_of(like.type))

    def bcast(self, a: Value, b: Value) -> tuple[Value, Value]:
        sa, sb = shape_of(a.type), shape_of(b.type)
        if sa == sb:
            return a, b
        if not sa:
            return self.op("splat", a, shape=list(sb)), b
        if not sb:
            return a, self.op("splat", b, shape=list(sa))
        shape = tuple(max(x, y) for x, y in zip(sa, sb))
        if sa != shape:
            a = self.op("broadcast", a, shape=list(shape))
        if sb != shape:
            b = self.op("broadcast", b, shape=list(shape))
        return a, b

    def bin(self, name: str, a: Value | Scalar, b: Value | Scalar, **attrs: Any) -> Value:
        if not isinstance(a, Value):
            assert isinstance(b, Value)
            a = self.lift(a, b)
        b = self.lift(b, a)
        a, b = self.bcast(a, b)
        return self.op(name, a, b, **attrs)

    def cmp(self, pred: str, a: Value | Scalar, b: Value | Scalar) -> Value:
        return self.bin("cmp", a, b, pred=pred)

    # ---- language-level helpers ----------------------------------------------------------

    def program_id(self, axis: int = 0) -> Value:
        return self.op("program_id", axis=axis)

    def arange(self, start: int, end: int) -> Value:
        return self.op("arange", start=start, end=end)

    def full(self, shape: Sequence[int], value: Scalar, ty: ScalarType) -> Value:
        return self.op("splat", self.const(value, ty), shape=list(shape))

    def expand(self, x: Value, axis: int) -> Value:
        return self.op("expand_dims", x, axis=axis)

    def cast(self, x: Value, to: ScalarType) -> Value:
        return self.op("cast", x, to=to)

    def ptrs(self, base: Value, offsets: Value) -> Value:
        base, offsets = self.bcast(base, offsets)
        return self.op("addptr", base, offsets)

    def load(self, ptr: Value, mask: Value | None = None, other: Value | Scalar | None = None, **attrs: Any) -> Value:
        operands = [ptr]
        if mask is not None:
            operands.append(mask)
            if other is not None:
                pointee = elem_of(ptr.type)
                assert isinstance(pointee, PointerType)
                o = other if isinstance(other, Value) else self.const(other, pointee.element_ty)
                operands.append(self.op("splat", o, shape=list(shape_of(ptr.type))) if not shape_of(o.type) else o)
        return self.op("load", *operands, **attrs)

    def store(self, ptr: Value, value: Value, mask: Value | None = None, **attrs: Any) -> None:
        self.void("store", ptr, value, *([mask] if mask is not None else []), **attrs)

    def reduce(self, x: Value, axis: int, combine: str) -> Value:
        elem = elem_of(x.type)
        region = Block([elem, elem])
        with self.b.at(region):
            self.void("yield", self.op(combine, region.args[0], region.args[1]))
        return self.b.create("reduce", [x], {"axis": axis}, [region]).result

    def scan(self, x: Value, axis: int, combine: str, reverse: bool = False) -> Value:
        elem = elem_of(x.type)
        region = Block([elem, elem])
        with self.b.at(region):
            self.void("yield", self.op(combine, region.args[0], region.args[1]))
        return self.b.create("scan", [x], {"axis": axis, "reverse": reverse}, [region]).result

    def for_(
        self, lo: Value, hi: Value, step: Value, inits: Sequence[Value], body: Callable[..., Sequence[Value]]
    ) -> list[Value]:
        region = Block([lo.type] + [v.type for v in inits])
        with self.b.at(region):
            self.void("yield", *body(*region.args))
        return self.b.create("for", [lo, hi, step, *inits], {}, [region]).results

    def if_(
        self, cond: Value, then: Callable[[], Sequence[Value]], other: Callable[[], Sequence[Value]]
    ) -> list[Value]:
        regions = [Block(), Block()]
        for region, fn in zip(regions, (then, other)):
            with self.b.at(region):
                self.void("yield", *fn())
        return self.b.create("if", [cond], {}, regions).results

    def module(self, **attrs: Any) -> Module:
        if not self.fn.body.ops or self.fn.body.ops[-1].name != "return":
            self.void("return")
        return Module([self.fn], dict(attrs))


def tile_of(shape: Sequence[int], elem: ScalarType) -> TileType:
    return TileType(tuple(shape), elem)


__all__ = ["KernelBuilder", "int1", "tile_of"]
