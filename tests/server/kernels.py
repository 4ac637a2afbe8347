"""Small tile-IR modules for the server tests, built with the IR `Builder` as a frontend would."""

from __future__ import annotations

from typing import Any

from despina.compiler.ir.builder import Builder
from despina.compiler.ir.codec import encode
from despina.compiler.ir.core import Block, Function, Loc, Module
from despina.compiler.ir.types import PointerType, float32, int32

f32p = PointerType(float32)


def vector_add(block: int = 1024, name: str = "add_kernel", file: str | None = None, **attrs: Any) -> Module:
    """out[i] = x[i] + y[i] for i < n; module `attrs` make distinct kernels (and steer the fake backend),
    `name` names the kernel (and steers the fake GPU executor, fake_gpu.py), `file` is where it was
    traced from (each op on a line of its own)."""
    names = ["x", "y", "out", "n"]
    fn = Function(name, Block([f32p, f32p, f32p, int32], names), names, kernel=True,
                  loc=Loc(file, 1) if file else None)
    x, y, out, n = fn.args
    b = Builder(fn.body)
    start = b.value("mul", [b.value("program_id", axis=0), b.constant(block, int32)])
    offs = b.value("add", [b.value("splat", [start], shape=[block]), b.value("arange", start=0, end=block)])
    mask = b.value("cmp", [offs, b.value("splat", [n], shape=[block])], pred="lt")

    def ptrs(p: Any) -> Any:
        return b.value("addptr", [b.value("splat", [p], shape=[block]), offs])

    total = b.value("add", [b.value("load", [ptrs(x), mask]), b.value("load", [ptrs(y), mask])])
    b.create("store", [ptrs(out), total, mask])
    b.create("return")
    if file:
        for line, op in enumerate(fn.body.ops, 2):
            op.loc = Loc(file, line, 4)
    return Module([fn], dict(attrs))


def vector_add_ir(block: int = 1024, name: str = "add_kernel", file: str | None = None, **attrs: Any) -> bytes:
    return encode(vector_add(block, name, file, **attrs))
