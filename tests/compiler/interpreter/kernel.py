"""Test kernels written directly against the tile-IR `Builder`, one op at a time."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from despina.compiler.interpreter import run_kernel
from despina.compiler.ir.builder import Builder
from despina.compiler.ir.core import Block, Function, Loc, Module, Value
from despina.compiler.ir.types import ElemType, PointerType, ScalarType, TileType, Type, int32, shape_of

Body = Callable[..., Sequence[Value]]

FILE = "kernels/test_kernel.py"


def ptr(elem: str | ElemType) -> PointerType:
    return PointerType(ScalarType(elem) if isinstance(elem, str) else elem)


def tile(shape: Sequence[int] | int, elem: str | ElemType) -> TileType:
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    return TileType(dims, ScalarType(elem) if isinstance(elem, str) else elem)


class K:
    """One kernel function under construction: `k = K(x=ptr("fp32"), n=int32)`."""

    def __init__(self, name: str = "kern", **params: Type) -> None:
        self.name = name
        self.fn = Function(name, Block(list(params.values()), list(params)), list(params), kernel=True)
        self.b = Builder(self.fn.body)
        self.b.loc = Loc(FILE, 1)
        self.arg = dict(zip(params, self.fn.args))
        self.helpers: list[Function] = []

    def line(self, n: int) -> K:
        """Stamp the ops created from now on with source line `n`."""
        self.b.loc = Loc(FILE, n)
        return self

    def op(self, name: str, *operands: Value, **attrs: Any) -> Value:
        return self.b.create(name, list(operands), attrs).result

    def ops(self, name: str, *operands: Value, regions: Sequence[Block] = (), **attrs: Any) -> list[Value]:
        return self.b.create(name, list(operands), attrs, regions).results

    def void(self, name: str, *operands: Value, **attrs: Any) -> None:
        self.b.create(name, list(operands), attrs)

    def const(self, value: bool | int | float, ty: Type = int32) -> Value:
        return self.b.constant(value, ty)

    def splat(self, x: Value, shape: Sequence[int] | int) -> Value:
        return self.op("splat", x, shape=[shape] if isinstance(shape, int) else list(shape))

    def arange(self, n: int, start: int = 0) -> Value:
        return self.op("arange", start=start, end=start + n)

    def pid(self, axis: int = 0) -> Value:
        return self.op("program_id", axis=axis)

    def offsets(self, block: int) -> Value:
        """`pid * block + arange(block)`."""
        start = self.op("mul", self.pid(), self.const(block))
        return self.op("add", self.splat(start, block), self.arange(block))

    def lt(self, a: Value, b: Value) -> Value:
        return self.op("cmp", a, b, pred="lt")

    def at(self, p: Value, offs: Value) -> Value:
        """`p + offs`, splatting a scalar pointer to the offsets' shape."""
        if shape_of(offs.type) and not shape_of(p.type):
            p = self.splat(p, shape_of(offs.type))
        return self.op("addptr", p, offs)

    def region(self, arg_types: Sequence[Type], body: Body, terminator: str = "yield") -> Block:
        block = Block(list(arg_types))
        with self.b.at(block):
            out = body(*block.args)
            self.b.create(terminator, list(out))
        return block

    def for_(self, lo: Value, hi: Value, step: Value, inits: Sequence[Value], body: Body) -> list[Value]:
        region = self.region([lo.type] + [v.type for v in inits], body)
        return self.ops("for", lo, hi, step, *inits, regions=[region])

    def if_(self, cond: Value, then: Body, other: Body) -> list[Value]:
        return self.ops("if", cond, regions=[self.region([], then), self.region([], other)])

    def while_(self, inits: Sequence[Value], before: Body, after: Body) -> list[Value]:
        first = self.region([v.type for v in inits], before, "condition")
        cond = first.terminator
        assert cond is not None
        second = self.region([v.type for v in cond.operands[1:]], after)
        return self.ops("while", *inits, regions=[first, second])

    def combine(self, name: str, xs: Sequence[Value], body: Body, **attrs: Any) -> list[Value]:
        scalars = [x.type.element_ty if isinstance(x.type, TileType) else x.type for x in xs]
        return self.ops(name, *xs, regions=[self.region(scalars * 2, body)], **attrs)

    def helper(self, name: str, params: Sequence[Type], results: Sequence[Type], body: Body) -> str:
        """Add a callable function `name` to the module."""
        block = Block(list(params))
        fn = Function(name, block, [f"a{i}" for i in range(len(params))], list(results))
        with self.b.at(block):
            self.b.create("return", list(body(*block.args)))
        self.helpers.append(fn)
        return name

    def module(self) -> Module:
        if not self.fn.body.ops or self.fn.body.ops[-1].name != "return":
            self.void("return")
        return Module([self.fn, *self.helpers])

    def run(self, grid: int | tuple[int, ...], *args: Any) -> None:
        dims = (grid,) if isinstance(grid, int) else tuple(grid)
        run_kernel(self.module(), dims + (1,) * (3 - len(dims)), list(args))  # type: ignore[arg-type]


def vector_add(block: int, masked: bool = True, dtype: str = "fp32") -> K:
    k = K("add_kernel", x_ptr=ptr(dtype), y_ptr=ptr(dtype), out_ptr=ptr(dtype), n=int32)
    offs = k.line(10).offsets(block)
    mask = [k.lt(offs, k.splat(k.arg["n"], block))] if masked else []
    x = k.line(12).op("load", k.at(k.arg["x_ptr"], offs), *mask)
    y = k.line(13).op("load", k.at(k.arg["y_ptr"], offs), *mask)
    k.line(14).void("store", k.at(k.arg["out_ptr"], offs), k.op("add", x, y), *mask)
    return k
