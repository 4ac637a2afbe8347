"""Helpers for the pass tests: build a kernel with a `Builder`, print it, check lines FileCheck-style."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from despina.compiler.ir.builder import Builder
from despina.compiler.ir.core import Block, Function, Module, Op, Value
from despina.compiler.ir.printer import print_module
from despina.compiler.ir.types import Type
from despina.compiler.ir.verifier import verify


def kernel(*arg_types: Type, name: str = "k") -> tuple[Module, Builder, list[Value]]:
    """An empty kernel taking `arg_types`; finish it with `b.create("return")`."""
    fn = Function(name, Block(arg_types), [f"a{i}" for i in range(len(arg_types))], kernel=True)
    return Module([fn]), Builder(fn.body), fn.args


def helper(
    module: Module, name: str, arg_types: Sequence[Type], result_types: Sequence[Type]
) -> tuple[Builder, list[Value]]:
    fn = Function(name, Block(arg_types), [f"p{i}" for i in range(len(arg_types))], list(result_types))
    module.functions.append(fn)
    return Builder(fn.body), fn.args


def region(b: Builder, arg_types: Sequence[Type], body: Callable[[list[Value]], Sequence[Value]]) -> Block:
    """A block whose ops `body(args)` builds, ending with `yield` of what it returns."""
    block = Block(arg_types)
    with b.at(block):
        b.create("yield", list(body(block.args)))
    return block


def for_loop(
    b: Builder,
    lb: Value,
    ub: Value,
    step: Value,
    inits: Sequence[Value],
    body: Callable[[list[Value]], Sequence[Value]],
) -> Op:
    blk = region(b, [lb.type] + [v.type for v in inits], body)
    return b.create("for", [lb, ub, step, *inits], regions=[blk])


def if_op(b: Builder, cond: Value, then: Callable[[], Sequence[Value]], other: Callable[[], Sequence[Value]]) -> Op:
    return b.create("if", [cond], regions=[region(b, [], lambda _: then()), region(b, [], lambda _: other())])


def text(module: Module) -> str:
    return print_module(module, locs=False)


def run(module: Module, *passes: Callable[[Module], Module]) -> str:
    """Run `passes`, verifying the module after each, and return the printed module."""
    for p in passes:
        module = p(module)
        verify(module)
    return text(module)


def filecheck(output: str, checks: str) -> None:
    """`CHECK: s` lines must match lines of `output` in order, by substring; `CHECK-NOT: s` must
    match no line between the neighbouring matches (or after the last); `CHECK-NEXT: s` must
    match the line right after the last match."""
    lines = output.splitlines()
    pos = 0
    forbidden: list[str] = []
    for raw in checks.strip().splitlines():
        kind, _, pattern = raw.strip().partition(": ")
        if kind == "CHECK-NOT":
            forbidden.append(pattern)
            continue
        if kind == "CHECK-NEXT":
            found: int | None = pos if pos < len(lines) and pattern in lines[pos] else None
            assert found is not None, f"{pattern!r} is not on the line after the last match:\n{output}"
        else:
            assert kind == "CHECK", f"unknown directive {raw!r}"
            found = next((i for i in range(pos, len(lines)) if pattern in lines[i]), None)
            assert found is not None, f"{pattern!r} not found after line {pos}:\n{output}"
        for bad in forbidden:
            hit = [ln for ln in lines[pos:found] if bad in ln]
            assert not hit, f"{bad!r} found before {pattern!r}: {hit}\n{output}"
        forbidden, pos = [], found + 1
    for bad in forbidden:
        hit = [ln for ln in lines[pos:] if bad in ln]
        assert not hit, f"{bad!r} found after the last CHECK: {hit}\n{output}"


def count(output: str, needle: str) -> int:
    return sum(needle in line for line in output.splitlines())
