"""Reading the text form of the GPU IR (`printer.print_gpuir`) back into a `GpuFunction`.

    text = print_gpuir(gpu, locs=True)
    assert print_gpuir(parse_gpuir(text), locs=True) == text

The layout aliases (`#L0 = blocked<...>`) are read first (`encoding_text.parse_encoding`); then the
`module` line (the specialization), the kernel and its ops, as the tile IR's parser reads them, with
these differences: a tile type may be followed by its alias, which puts the encoding in the type
(a register layout; a shared-memory buffer, `shared<64x32xfp16> #L3`, takes a shared layout);
an op's regions are written `(^(args): ops ^(args): ops)`; and ops are typed by both catalogues
(`ops.infer_gpu`: the GPU IR's own ops and attributes too), encodings aside. Axis analysis runs again
on what was read; the plans of pipelined loops are not part of the text (`pipeline.plan_pipelines`
makes them from it). Errors are `IRParseError`s that say where (`line:column`) and what was expected.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from ...ir.core import Block, Function
from ...ir.parser import IRParseError, _Parser
from ...ir.types import BufferType, TileType, Type, parse_type
from ...ir.verifier import MAX_TYPE_TEXT
from .assign import GpuFunction
from .axis import AxisAnalysis
from .encoding_text import Layout, parse_encoding
from .encodings import Encoding
from .ops import infer_gpu, plain

_ALIAS_LINE = re.compile(r"(#L[0-9]+) = (.*)\n")
_ALIAS_USE = re.compile(r"[ \t]*(#L[0-9]+)")


class _GpuParser(_Parser):
    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.aliases: dict[str, Layout] = {}

    def header(self) -> None:
        while (m := _ALIAS_LINE.match(self.text, self.pos)) is not None:
            if m.group(1) in self.aliases:
                self.error(f"layout alias {m.group(1)} is defined twice", m.start())
            try:
                enc = parse_encoding(m.group(2))
            except ValueError as e:
                self.error(f"bad layout for {m.group(1)}: {e}", m.start(2))
            except (KeyError, TypeError) as e:
                self.error(f"bad layout for {m.group(1)}: {type(e).__name__}: {e}", m.start(2))
            self.aliases[m.group(1)] = enc
            self.pos = m.end()

    def type(self) -> Type:
        start = self.tok.pos if self.tok is not None else self.after_space(self.pos)
        ty = self.buffer_type(start) if self.text.startswith("shared<", start) else super().type()
        m = _ALIAS_USE.match(self.text, self.pos)
        if m is None:
            return ty
        if not isinstance(ty, (TileType, BufferType)):
            self.error(f"only tiles and buffers take a layout, not {ty}", m.start(1))
        enc = self.aliases.get(m.group(1))
        if enc is None:
            self.error(f"layout alias {m.group(1)} is not defined", m.start(1))
        if isinstance(ty, TileType) != isinstance(enc, Encoding):
            want = "a register layout" if isinstance(ty, TileType) else "a shared-memory layout"
            self.error(f"{m.group(1)} is {enc}; a {'tile' if isinstance(ty, TileType) else 'buffer'} takes {want}",
                       m.start(1))
        self.pos = m.end()
        self.tok = None
        return replace(ty, encoding=enc)

    def buffer_type(self, start: int) -> BufferType:
        """`shared<64x32xfp16>`: a buffer, written as the tile of its shape is."""
        end, depth = start + len("shared<"), 1
        while end < len(self.text) and depth and end - start <= MAX_TYPE_TEXT:
            depth += {"<": 1, ">": -1}.get(self.text[end], 0)
            end += 1
        spelled = self.text[start:end]
        if depth:
            self.error(f"unterminated or overlong type {spelled[:40]!r}", start)
        try:
            tile = parse_type("tile" + spelled[len("shared") :])
        except ValueError as e:
            self.error(f"bad type {spelled!r}: {e}", start)
        if not isinstance(tile, TileType):
            self.error(f"bad type {spelled!r}", start)
        self.tok, self.pos = None, end
        return BufferType(tile.shape, tile.element_ty)

    def regions(self, depth: int) -> list[Block]:
        blocks = []
        while self.accept("^"):
            block = self.region_head()
            while not (self.peek().kind == "punct" and self.peek().text in ("^", ")")):
                block.ops.append(self.op(depth))
            self.scopes.pop()
            blocks.append(block)
        self.expect(")", "closing the regions")
        return blocks

    def infer(self, name: str, operand_types: list[Type], attrs: dict[str, Any], regions: list[Block]) -> list[Type]:
        return infer_gpu(name, operand_types, attrs, regions)

    def plain(self, types: list[Type]) -> list[Type]:
        return [plain(t) for t in types]

    def gpu_function(self) -> GpuFunction:
        self.header()
        self.expect("module", "after the layout aliases")
        module_attrs = self.attr_dict()
        self.expect("func", "after the module's attributes")
        name = self.expect_kind("symbol", "a function name like @kernel").text[1:]
        self.expect("(")
        args = self.typed_args()
        self.expect("kernel", "after the kernel's arguments")
        pos = self.peek().pos
        attrs = self.attr_dict()
        names, num_warps = attrs.pop("names", None), attrs.pop("num_warps", None)
        if attrs or not isinstance(names, list) or not all(isinstance(n, str) for n in names) or len(names) != len(args):
            self.error("a kernel's attributes are exactly {names = [its argument names], num_warps = N}", pos)
        if not isinstance(num_warps, int) or isinstance(num_warps, bool) or num_warps not in (1, 2, 4, 8, 16, 32):
            self.error(f"num_warps must be 1, 2, 4, 8, 16 or 32, got {num_warps!r}", pos)
        loc = self.loc()
        body = Block([t for _, t in args])
        self.scopes = [{}]
        for (tok, _), value in zip(args, body.args):
            self.define(tok, value)
        self.expect("{", "opening the kernel's body")
        self.ops(body, 0)
        if self.peek().kind != "eof":
            self.error(f"expected the end of the text after the kernel, found {self.found()}")
        fn = Function(name, body, names, [], True, loc)
        return GpuFunction(fn, module_attrs, num_warps, AxisAnalysis(module_attrs, fn))


def parse_gpuir(text: str) -> GpuFunction:
    """The GPU IR that `text` (as `printer.print_gpuir` writes it) describes; `verifier.verify_gpuir`
    checks its invariants. Raises `IRParseError` ("line:col: expected ...") on anything else."""
    if not isinstance(text, str):
        raise IRParseError(f"expected text, got {type(text).__name__}", 1, 1)
    return _GpuParser(text).gpu_function()
