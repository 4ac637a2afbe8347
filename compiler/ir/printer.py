"""The text form of the tile IR.

    module {version = 1, ...} {
    func @add_kernel(%x: ptr<fp32>, %n: int32) kernel {
      %0 = program_id() {axis = 0} : int32
      %1, %2 = split(%0) : tile<4xfp32>, tile<4xfp32>
      %3 = for(%a, %b, %c, %init) ({
      ^(%4: int32, %5: fp32):
        yield(%5)
      }) : fp32
      return()
    }
    }

Values are numbered in order of definition; attributes print sorted by name, so the same
module always prints the same text (its canonical bytes, see `hashing`). Locations print as
`loc("file":line:col)` after an op unless `locs=False`.
"""

from __future__ import annotations

import json
from typing import Any

from .core import Block, Function, Loc, Module, Op, Value
from .types import PointerType, ScalarType, TileType


def format_attr(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "float(" + value.hex() + ")" if value != value or value in (float("inf"), float("-inf")) else repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (ScalarType, PointerType, TileType)):
        return f"type({value})"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_attr(v) for v in value) + "]"
    raise TypeError(f"attribute value {value!r} of type {type(value).__name__} has no text form")


def format_attrs(attrs: dict[str, Any]) -> str:
    if not attrs:
        return ""
    return " {" + ", ".join(f"{k} = {format_attr(attrs[k])}" for k in sorted(attrs)) + "}"


class _Printer:
    def __init__(self, locs: bool) -> None:
        self.locs = locs
        self.names: dict[int, str] = {}
        self.lines: list[str] = []
        self.line_locs: list[Loc | None] = []  # where the op or function each line prints came from

    def emit(self, text: str, loc: Loc | None = None) -> None:
        self.lines.append(text)
        self.line_locs.append(loc)

    def name(self, v: Value) -> str:
        key = id(v)
        if key not in self.names:
            self.names[key] = f"%{len(self.names)}"
        return self.names[key]

    def use(self, v: Value) -> str:
        name = self.names.get(id(v))
        if name is None:
            raise ValueError(f"value {v!r} is used before it is defined")
        return name

    def block_header(self, block: Block, indent: str) -> None:
        args = ", ".join(f"{self.name(a)}: {a.type}" for a in block.args)
        self.emit(f"{indent}^({args}):")

    def op(self, op: Op, indent: str) -> None:
        results = ", ".join(self.name(r) for r in op.results)
        head = f"{indent}{results} = " if op.results else indent
        text = f"{head}{op.name}({', '.join(self.use(v) for v in op.operands)}){format_attrs(op.attrs)}"
        if op.regions:
            self.emit(text + " (", op.loc)
            for i, region in enumerate(op.regions):
                self.emit(indent + "  {")
                self.block_header(region, indent + "  ")
                for inner in region.ops:
                    self.op(inner, indent + "    ")
                self.emit(indent + "  }" + ("," if i + 1 < len(op.regions) else ""))
            text = indent + ")"
        if op.results:
            text += " : " + ", ".join(str(r.type) for r in op.results)
        if self.locs and op.loc is not None:
            text += f" loc({json.dumps(op.loc.file)}:{op.loc.line}:{op.loc.col})"
        self.emit(text, op.loc)

    def function(self, fn: Function) -> None:
        args = ", ".join(f"{self.name(a)}: {a.type}" for a in fn.args)
        names = format_attr(fn.arg_names)
        results = " -> (" + ", ".join(map(str, fn.result_types)) + ")" if fn.result_types else ""
        kind = " kernel" if fn.kernel else ""
        loc = f" loc({json.dumps(fn.loc.file)}:{fn.loc.line}:{fn.loc.col})" if self.locs and fn.loc else ""
        self.emit(f"func @{fn.name}({args}){results}{kind} {{names = {names}}}{loc} {{", fn.loc)
        for op in fn.body.ops:
            self.op(op, "  ")
        self.emit("}")


def print_module(module: Module, locs: bool = True) -> str:
    """The module as text; `parse_module(print_module(m))` rebuilds it exactly."""
    return print_module_with_locs(module, locs)[0]


def print_module_with_locs(module: Module, locs: bool = True) -> tuple[str, list[Loc | None]]:
    """The module as text, and the source location of each of its lines (`[i]` for line `i + 1`): the
    location of the op or function the line prints (both lines of an op with regions), None for
    the others."""
    p = _Printer(locs)
    attrs = dict(module.attrs, version=module.version)
    p.emit(f"module{format_attrs(attrs)} {{")
    for fn in module.functions:
        p.function(fn)
    p.emit("}")
    return "\n".join(p.lines) + "\n", p.line_locs


def print_function(fn: Function, locs: bool = True) -> str:
    p = _Printer(locs)
    p.function(fn)
    return "\n".join(p.lines) + "\n"
