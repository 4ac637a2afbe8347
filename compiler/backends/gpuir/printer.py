"""The text form of GPU IR: the tile IR with each tile type followed by its layout alias.

    #L0 = blocked<spt=[4], tpw=[32], wpc=[4], order=[0]>
    module {divisibility = [0, 1, 2], version = 1}
    func @add_kernel(%0: ptr<fp32>, ...) kernel {names = ["x_ptr", ...], num_warps = 4} {
      %3 = arange() {end = 1024, start = 0} : tile<1024xint32> #L0
      %4 = local_alloc(%2) : shared<64x32xfp16> #L1
      %9 = for(%5, %6, %7, %3) (
        ^(%10: int32, %11: tile<1024xint32> #L0):
          yield(%11)
      ) : tile<1024xint32> #L0
    }

The aliases are numbered in order of first use. The `module` line holds the specialization the GPU
IR was made for (axis analysis reads it). With `locs=True` each op line ends in its source location,
as in the tile IR; `parser.parse_gpuir` reads either form back.
"""

from __future__ import annotations

import json

from ...ir.core import Block, Loc, Op, Value
from ...ir.printer import format_attr, format_attrs
from ...ir.types import BufferType, TileType
from .assign import GpuFunction
from .encoding_text import Layout


class _Printer:
    def __init__(self, gpu: GpuFunction, locs: bool) -> None:
        self.gpu = gpu
        self.locs = locs
        self.names: dict[Value, str] = {}
        self.aliases: dict[Layout, str] = {}
        self.lines: list[str] = []
        self.line_locs: list[Loc | None] = []

    def emit(self, text: str, loc: Loc | None = None) -> None:
        self.lines.append(text)
        self.line_locs.append(loc)

    def name(self, v: Value) -> str:
        return self.names.setdefault(v, f"%{len(self.names)}")

    def typed(self, v: Value) -> str:
        ty = v.type
        if not isinstance(ty, (TileType, BufferType)) or ty.encoding is None:
            return str(ty)
        alias = self.aliases.setdefault(ty.encoding, f"#L{len(self.aliases)}")
        return f"{ty.without_encoding()} {alias}"

    def loc(self, loc: Loc | None) -> str:
        return f" loc({json.dumps(loc.file)}:{loc.line}:{loc.col})" if self.locs and loc is not None else ""

    def block(self, block: Block, indent: str) -> None:
        for op in block.ops:
            self.op(op, indent)

    def op(self, op: Op, indent: str) -> None:
        results = ", ".join(self.name(r) for r in op.results)
        head = f"{indent}{results} = " if op.results else indent
        operands = ", ".join(self.names.get(v, "%?") for v in op.operands)
        text = f"{head}{op.name}({operands}){format_attrs(op.attrs)}"
        if op.regions:
            self.emit(text + " (", op.loc)
            for region in op.regions:
                args = ", ".join(f"{self.name(a)}: {self.typed(a)}" for a in region.args)
                self.emit(f"{indent}  ^({args}):")
                self.block(region, indent + "    ")
            text = indent + ")"
        if op.results:
            text += " : " + ", ".join(self.typed(r) for r in op.results)
        self.emit(text + self.loc(op.loc), op.loc)


def print_gpuir(gpu: GpuFunction, locs: bool = False) -> str:
    """The GPU IR as text (with each op's source location when `locs`)."""
    return print_gpuir_with_locs(gpu, locs)[0]


def print_gpuir_with_locs(gpu: GpuFunction, locs: bool = False) -> tuple[str, list[Loc | None]]:
    """The GPU IR as text, and the source location of each of its lines (`[i]` for line `i + 1`):
    the location of the op the line prints, None for the others (layout aliases, braces)."""
    p = _Printer(gpu, locs)
    fn = gpu.fn
    p.emit(f"module{format_attrs(gpu.module_attrs)}")
    args = ", ".join(f"{p.name(a)}: {a.type}" for a in fn.args)
    attrs = f"{{names = {format_attr(fn.arg_names)}, num_warps = {gpu.num_warps}}}"
    p.emit(f"func @{fn.name}({args}) kernel {attrs}{p.loc(fn.loc)} {{", fn.loc)
    p.block(fn.body, "  ")
    p.emit("}")
    header = [f"{alias} = {enc}" for enc, alias in p.aliases.items()]
    return "\n".join(header + p.lines) + "\n", [None] * len(header) + p.line_locs
