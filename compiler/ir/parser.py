"""Reading the text form of the tile IR back into a `Module`.

`parse_module` reads exactly what `printer.print_module` writes, with or without locations:

    text = print_module(module)
    assert print_module(parse_module(text)) == text

Every op is typed again through `ops.infer`; printed result types that disagree with the type
rule are an error, as is any syntax error. Errors are `IRParseError`s that say where
(`line:column`) and what was expected there. The parser checks what it needs to build the
module (names defined once and in scope, types well formed); `verifier.verify` checks the rest.
"""

from __future__ import annotations

import bisect
import json
import re
from typing import Any, NamedTuple, NoReturn

from .core import Block, Function, IRError, Loc, Module, Op, Value
from .ops import infer
from .types import Type, parse_type
from .verifier import MAX_ATTR_DEPTH, MAX_REGION_DEPTH, MAX_TYPE_TEXT, NAME


class IRParseError(IRError):
    """The text is not a module as the printer writes it; the message starts with `line:column`."""

    def __init__(self, message: str, line: int, col: int) -> None:
        super().__init__(f"{line}:{col}: {message}")
        self.message = message
        self.line = line
        self.col = col

    def __reduce__(self) -> tuple[Any, ...]:  # compile workers send errors across processes
        return (type(self), (self.message, self.line, self.col))


_TOKEN = re.compile(
    rf"""
      (?P<value>%[A-Za-z0-9_]+)
    | (?P<symbol>@{NAME.pattern})
    | (?P<number>-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
    | (?P<string>"(?:[^"\\\n]|\\.)*")
    | (?P<ident>{NAME.pattern})
    | (?P<punct>->|[(){{}}\[\],=:^])
    """,
    re.VERBOSE,
)
_SPACE = re.compile(r"\s*")
_TYPE_HEAD = re.compile(r"[A-Za-z0-9_]+")
_TYPE_BODY = re.compile(r"[A-Za-z0-9_, ]")
_HEX_FLOAT = re.compile(r"\s*([^)\s]*)")


class _Token(NamedTuple):
    kind: str  # value, symbol, number, string, ident, punct or eof
    text: str
    pos: int


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0  # just after the last token taken
        self.tok: _Token | None = None  # the next token, once peeked
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self.scopes: list[dict[str, Value]] = []
        self.defined: set[str] = set()

    # ---- tokens ---------------------------------------------------------------------------

    def error(self, message: str, pos: int | None = None) -> NoReturn:
        if pos is None:
            pos = self.peek().pos
        line = bisect.bisect_right(self.line_starts, pos)
        raise IRParseError(message, line, pos - self.line_starts[line - 1] + 1)

    def peek(self) -> _Token:
        if self.tok is None:
            pos = self.after_space(self.pos)
            if pos == len(self.text):
                self.tok = _Token("eof", "", pos)
            else:
                m = _TOKEN.match(self.text, pos)
                if m is None:
                    self.error(f"unexpected character {self.text[pos]!r}", pos)
                self.tok = _Token(m.lastgroup or "", m.group(), pos)
        return self.tok

    def after_space(self, pos: int) -> int:
        return _SPACE.match(self.text, pos).end()  # type: ignore[union-attr]  # \s* always matches

    def next(self) -> _Token:
        tok = self.peek()
        self.tok = None
        self.pos = tok.pos + len(tok.text)
        return tok

    def accept(self, text: str) -> bool:
        tok = self.peek()
        if tok.kind in ("punct", "ident") and tok.text == text:
            self.next()
            return True
        return False

    def found(self) -> str:
        tok = self.peek()
        return "the end of the text" if tok.kind == "eof" else repr(tok.text[:40])

    def expect(self, text: str, what: str = "") -> None:
        if not self.accept(text):
            self.error(f"expected '{text}'{' ' + what if what else ''}, found {self.found()}")

    def expect_kind(self, kind: str, what: str) -> _Token:
        if self.peek().kind != kind:
            self.error(f"expected {what}, found {self.found()}")
        return self.next()

    def comma_list(self, close: str, item: Any) -> list[Any]:
        """Items separated by commas up to `close`, which the caller's opening token began."""
        items: list[Any] = []
        if self.accept(close):
            return items
        while True:
            items.append(item())
            if self.accept(close):
                return items
            self.expect(",", f"or '{close}'")

    def type(self) -> Type:
        start = self.tok.pos if self.tok is not None else self.after_space(self.pos)
        self.tok = None
        head = _TYPE_HEAD.match(self.text, start)
        if head is None:
            self.error(f"expected a type, found {self.text[start : start + 20]!r}", start)
        end, depth = head.end(), 0
        while end < len(self.text) and end - start <= MAX_TYPE_TEXT:
            c = self.text[end]
            if c == "<":
                depth += 1
            elif c == ">" and depth:
                depth -= 1
            elif depth == 0 or not _TYPE_BODY.match(c):
                break
            end += 1
            if depth == 0:
                break
        spelled = self.text[start:end]
        if depth or len(spelled) > MAX_TYPE_TEXT:
            self.error(f"unterminated or overlong type {spelled[:40]!r}", start)
        try:
            ty = parse_type(spelled)
        except ValueError as e:
            self.error(f"bad type {spelled!r}: {e}", start)
        self.pos = end
        return ty

    # ---- values ---------------------------------------------------------------------------

    def define(self, tok: _Token, value: Value) -> None:
        if tok.text in self.defined:
            self.error(f"value {tok.text} is defined twice", tok.pos)
        self.defined.add(tok.text)
        self.scopes[-1][tok.text] = value

    def use(self) -> Value:
        tok = self.expect_kind("value", "a value like %0")
        for scope in reversed(self.scopes):
            if tok.text in scope:
                return scope[tok.text]
        why = "is not in scope here" if tok.text in self.defined else "is not defined before this use"
        self.error(f"value {tok.text} {why}", tok.pos)

    def typed_args(self) -> list[tuple[_Token, Type]]:
        def arg() -> tuple[_Token, Type]:
            tok = self.expect_kind("value", "an argument like %0")
            self.expect(":", "and the argument's type")
            return tok, self.type()

        return self.comma_list(")", arg)

    # ---- attributes and locations ---------------------------------------------------------

    def attr_dict(self) -> dict[str, Any]:
        self.expect("{", "opening the attributes")
        attrs: dict[str, Any] = {}

        def item() -> None:
            key = self.expect_kind("ident", "an attribute name")
            if key.text in attrs:
                self.error(f"attribute '{key.text}' is given twice", key.pos)
            self.expect("=")
            attrs[key.text] = self.attr(0)

        self.comma_list("}", item)
        return attrs

    def attr(self, depth: int) -> Any:
        tok = self.next()
        if tok.kind == "number":
            try:
                return float(tok.text) if any(c in tok.text for c in ".eE") else int(tok.text)
            except ValueError:
                self.error(f"number {tok.text[:40]!r} is too long", tok.pos)
        if tok.kind == "string":
            return self.string(tok)
        if tok.kind == "ident" and tok.text in ("true", "false", "none"):
            return {"true": True, "false": False, "none": None}[tok.text]
        if tok.kind == "ident" and tok.text == "float":
            self.expect("(")
            m = _HEX_FLOAT.match(self.text, self.pos)
            assert m is not None  # the pattern matches the empty string
            try:
                value = float.fromhex(m.group(1))
            except (ValueError, OverflowError):
                self.error(f"expected a hexadecimal float, inf or nan, found {m.group(1)[:40]!r}", m.start(1))
            self.pos = m.end()
            self.expect(")")
            return value
        if tok.kind == "ident" and tok.text == "type":
            self.expect("(")
            ty = self.type()
            self.expect(")")
            return ty
        if tok.text == "[" and tok.kind == "punct":
            if depth >= MAX_ATTR_DEPTH:
                self.error(f"attribute lists nest deeper than {MAX_ATTR_DEPTH}", tok.pos)
            return self.comma_list("]", lambda: self.attr(depth + 1))
        self.error(f"expected an attribute value, found {tok.text[:40]!r}" if tok.text else "unexpected end", tok.pos)

    def string(self, tok: _Token) -> str:
        try:
            return str(json.loads(tok.text))
        except ValueError as e:
            self.error(f"bad string literal: {e}", tok.pos)

    def loc(self) -> Loc | None:
        if not (self.peek().kind == "ident" and self.peek().text == "loc"):
            return None
        self.next()
        self.expect("(")
        file = self.string(self.expect_kind("string", "a quoted file name"))
        numbers = []
        for _ in range(2):
            self.expect(":")
            tok = self.expect_kind("number", "a line or column number")
            if not tok.text.isdigit() or len(tok.text) > 20:
                self.error(f"expected a line or column number, found {tok.text[:40]!r}", tok.pos)
            numbers.append(int(tok.text))
        self.expect(")")
        return Loc(file, numbers[0], numbers[1])

    # ---- structure ------------------------------------------------------------------------

    def module(self) -> Module:
        self.expect("module", "at the start of the text")
        pos = self.peek().pos
        attrs = self.attr_dict()
        version = attrs.pop("version", None)
        if not isinstance(version, int) or isinstance(version, bool):
            self.error("the module's attributes must hold an integer 'version'", pos)
        self.expect("{", "opening the module's body")
        functions = []
        while not self.accept("}"):
            functions.append(self.function())
        if self.peek().kind != "eof":
            self.error(f"expected the end of the text after the module, found {self.found()}")
        return Module(functions, attrs, version)

    def function(self) -> Function:
        self.expect("func", "or '}' closing the module")
        name = self.expect_kind("symbol", "a function name like @kernel").text[1:]
        self.expect("(")
        args = self.typed_args()
        result_types: list[Type] = []
        if self.accept("->"):
            self.expect("(")
            result_types = self.comma_list(")", self.type)
        kernel = self.accept("kernel")
        pos = self.peek().pos
        attrs = self.attr_dict()
        names = attrs.pop("names", None)
        if attrs or not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            self.error("a function's attributes are exactly {names = [argument names as strings]}", pos)
        loc = self.loc()
        body = Block([t for _, t in args])
        self.scopes = [{}]
        for (tok, _), value in zip(args, body.args):
            self.define(tok, value)
        self.expect("{", "opening the function's body")
        self.ops(body, 0)
        return Function(name, body, names, result_types, kernel, loc)

    def ops(self, block: Block, depth: int) -> None:
        while not self.accept("}"):
            block.ops.append(self.op(depth))

    def region(self, depth: int) -> Block:
        self.expect("{", "opening a region")
        self.expect("^", "starting the region's arguments")
        block = self.region_head()
        self.ops(block, depth)
        self.scopes.pop()
        return block

    def region_head(self) -> Block:
        """A region's `(%a: type, ...):` after its '^': its block, with a scope for its arguments
        pushed (the caller pops it after the region's ops)."""
        self.expect("(")
        args = self.typed_args()
        self.expect(":", "after the region's arguments")
        block = Block([t for _, t in args])
        self.scopes.append({})
        for (tok, _), value in zip(args, block.args):
            self.define(tok, value)
        return block

    def op(self, depth: int) -> Op:
        results: list[_Token] = []
        if self.peek().kind == "value":
            while True:
                results.append(self.expect_kind("value", "a result like %0"))
                if not self.accept(","):
                    break
            self.expect("=", "after the results")
        name_tok = self.expect_kind("ident", "an op or '}'")
        name = name_tok.text
        self.expect("(", "opening the operands")
        operands = self.comma_list(")", self.use)
        attrs = self.attr_dict() if self.peek().text == "{" and self.peek().kind == "punct" else {}
        regions: list[Block] = []
        if self.accept("("):
            if depth >= MAX_REGION_DEPTH:
                self.error(f"regions nest deeper than {MAX_REGION_DEPTH}", name_tok.pos)
            regions = self.regions(depth + 1)
        types: list[Type] = []
        if self.accept(":"):
            types.append(self.type())
            while self.accept(","):
                types.append(self.type())
        loc = self.loc()
        try:
            inferred = self.infer(name, [v.type for v in operands], attrs, regions)
        except IRError as e:
            self.error(str(e), name_tok.pos)
        except Exception as e:  # the type rules trust their inputs' kinds; the text may not
            self.error(f"malformed '{name}' ({type(e).__name__}: {e})", name_tok.pos)
        if self.plain(types) != inferred:
            shown = ", ".join(map(str, inferred)) or "none"
            self.error(
                f"'{name}' has result types ({shown}) by its type rule, not ({', '.join(map(str, types))})",
                name_tok.pos,
            )
        if len(results) != len(inferred):
            self.error(f"'{name}' has {len(inferred)} results, but {len(results)} are named", name_tok.pos)
        op = Op(name, operands, types, attrs, regions, loc)
        for tok, value in zip(results, op.results):
            self.define(tok, value)
        return op

    # ---- what a dialect of the text form changes (the GPU IR's parser) ------------------------

    def regions(self, depth: int) -> list[Block]:
        """An op's regions, after its opening '('."""
        return self.comma_list(")", lambda: self.region(depth))

    def infer(self, name: str, operand_types: list[Type], attrs: dict[str, Any], regions: list[Block]) -> list[Type]:
        """The result types of op `name` by its type rule (`ops.infer`)."""
        return infer(name, operand_types, attrs, regions)

    def plain(self, types: list[Type]) -> list[Type]:
        """The printed result types as the type rule gives them."""
        return types


def parse_module(text: str) -> Module:
    """The module that `text` (as `printer.print_module` writes it) describes.

    Raises `IRParseError` ("line:col: expected ...") on anything else.
    """
    if not isinstance(text, str):
        raise IRParseError(f"expected text, got {type(text).__name__}", 1, 1)
    return _Parser(text).module()
