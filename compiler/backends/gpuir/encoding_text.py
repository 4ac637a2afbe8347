"""Reading an encoding back from its text form (`str(encoding)`), for the GPU-IR parser.

    parse_encoding("slice<dim=1, parent=blocked<spt=[1, 8], tpw=[4, 8], wpc=[8, 1], order=[1, 0]>>")

One builder per encoding, keyed by the name its `__str__` writes; each takes the positional and
the named parameters as written and refuses any other. The text must be exactly what `str` of the
result gives (the form is canonical), so a parsed GPU IR prints back the same.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .encodings import Blocked, DotOperand, Encoding, Slice
from .mma import Mma, MmaOperand
from .shared import SwizzledShared

Layout = Encoding | SwizzledShared
_TOKEN = re.compile(r"\s*(?:(?P<num>-?[0-9]+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<punct>[<>\[\],=]))")


def _ints(v: Any, what: str) -> tuple[int, ...]:
    if not isinstance(v, list) or not all(isinstance(x, int) for x in v):
        raise ValueError(f"{what} must be a list of integers, got {v!r}")
    return tuple(v)


def _int(v: Any, what: str) -> int:
    if not isinstance(v, int):
        raise ValueError(f"{what} must be an integer, got {v!r}")
    return v


def _blocked(pos: list[Any], kw: dict[str, Any]) -> Blocked:
    spt, tpw, wpc, order = (_ints(kw[k], k) for k in ("spt", "tpw", "wpc", "order"))
    if not len(spt) == len(tpw) == len(wpc) == len(order) or sorted(order) != list(range(len(order))):
        raise ValueError("a blocked layout's spt, tpw and wpc have one entry per dimension, and order lists each once")
    return Blocked(spt, tpw, wpc, order)


def _slice(pos: list[Any], kw: dict[str, Any]) -> Slice:
    parent = kw["parent"]
    if not isinstance(parent, Encoding):
        raise ValueError(f"a slice's parent must be a register layout, got {parent!r}")
    return Slice(_int(kw["dim"], "dim"), parent)


def _dot_op(pos: list[Any], kw: dict[str, Any]) -> DotOperand | MmaOperand:
    (index,) = pos
    parent = kw["parent"]
    if "kWidth" in kw:
        if not isinstance(parent, Mma):
            raise ValueError(f"a tensor-core operand's parent must be an mma layout, got {parent}")
        return MmaOperand(_int(index, "the operand index"), parent, _int(kw["kWidth"], "kWidth"))
    if not isinstance(parent, Encoding):
        raise ValueError(f"a dot operand's parent must be a register layout, got {parent!r}")
    return DotOperand(_int(index, "the operand index"), parent)


def _mma(pos: list[Any], kw: dict[str, Any]) -> Mma:
    (version,) = pos
    if not isinstance(version, str) or not re.fullmatch(r"v[0-9]", version):
        raise ValueError(f"an mma layout's version is written v2 or v3, got {version!r}")
    warps, instr = _ints(kw["warps"], "warps"), _ints(kw["instr"], "instr")
    if len(warps) != 2 or len(instr) != 2:
        raise ValueError("an mma layout's warps and instr have two entries each")
    return Mma(int(version[1:]), (warps[0], warps[1]), (instr[0], instr[1]))


def _swizzled(pos: list[Any], kw: dict[str, Any]) -> SwizzledShared:
    order = _ints(kw["order"], "order")
    if len(order) != 2:
        raise ValueError("a swizzled shared layout's order has two entries")
    return SwizzledShared(_int(kw["vec"], "vec"), _int(kw["perPhase"], "perPhase"), _int(kw["maxPhase"], "maxPhase"),
                          (order[0], order[1]), _int(kw.get("block", 0), "block"))


# name -> (builder, positional count, required names, optional names)
_BUILDERS: dict[str, tuple[Callable[[list[Any], dict[str, Any]], Layout], int, set[str], set[str]]] = {
    "blocked": (_blocked, 0, {"spt", "tpw", "wpc", "order"}, set()),
    "slice": (_slice, 0, {"dim", "parent"}, set()),
    "dot_op": (_dot_op, 1, {"parent"}, {"kWidth"}),
    "mma": (_mma, 1, {"warps", "instr"}, set()),
    "swizzled_shared": (_swizzled, 0, {"vec", "perPhase", "maxPhase", "order"}, {"block"}),
}


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def peek(self) -> tuple[str, str]:
        m = _TOKEN.match(self.text, self.pos)
        if m is None:
            rest = self.text[self.pos :].strip()
            return ("end", "") if not rest else ("bad", rest[:20])
        kind = m.lastgroup or ""
        return kind, m.group(kind)

    def take(self) -> tuple[str, str]:
        kind, text = self.peek()
        if kind in ("end", "bad"):
            raise ValueError(f"unexpected {'end' if kind == 'end' else repr(text)} in layout {self.text!r}")
        m = _TOKEN.match(self.text, self.pos)
        assert m is not None
        self.pos = m.end()
        return kind, text

    def expect(self, punct: str) -> None:
        kind, text = self.take()
        if (kind, text) != ("punct", punct):
            raise ValueError(f"expected {punct!r}, found {text!r} in layout {self.text!r}")

    def value(self) -> Any:
        kind, text = self.take()
        if kind == "num":
            return int(text)
        if (kind, text) == ("punct", "["):
            items: list[Any] = []
            while self.peek() != ("punct", "]"):
                items.append(self.value())
                if self.peek() == ("punct", ","):
                    self.take()
            self.take()
            return items
        if kind == "name" and self.peek() == ("punct", "<"):
            return self.encoding(text)
        if kind == "name":
            return text
        raise ValueError(f"unexpected {text!r} in layout {self.text!r}")

    def encoding(self, name: str) -> Layout:
        if name not in _BUILDERS:
            raise ValueError(f"unknown layout {name!r} (known: {', '.join(_BUILDERS)})")
        build, npos, need, may = _BUILDERS[name]
        self.expect("<")
        pos: list[Any] = []
        kw: dict[str, Any] = {}
        while self.peek() != ("punct", ">"):
            start = self.pos
            item = self.value()
            if self.peek() == ("punct", "="):
                self.take()
                if not isinstance(item, str) or item in kw:
                    raise ValueError(f"bad or repeated parameter at {self.text[start:self.pos]!r} in {self.text!r}")
                kw[item] = self.value()
            else:
                pos.append(item)
            if self.peek() == ("punct", ","):
                self.take()
        self.take()
        if len(pos) != npos or not need <= set(kw) <= need | may:
            raise ValueError(f"{name} takes {npos} positional parameters and {', '.join(sorted(need | may))}, "
                             f"got {len(pos)} and {', '.join(sorted(kw)) or 'none'}")
        return build(pos, kw)


def parse_encoding(text: str) -> Layout:
    """The encoding whose text form is `text`; ValueError when it is not one, or not canonical."""
    reader = _Reader(text)
    kind, name = reader.take()
    if kind != "name":
        raise ValueError(f"expected a layout name, found {name!r}")
    enc = reader.encoding(name)
    if reader.peek()[0] != "end":
        raise ValueError(f"unexpected {reader.text[reader.pos:][:20]!r} after the layout")
    if str(enc) != text:
        raise ValueError(f"{text!r} is not written as the layout prints ({str(enc)!r})")
    return enc
