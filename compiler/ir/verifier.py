"""The verifier: a module is well formed, well typed and within limits, or `VerificationError` says why.

The daemon receives modules over the network, so nothing about the input is trusted: every op
is typed again through `ops.infer`, every attribute is checked against its op's schema (`ops.OPS`)
before a type rule sees it, every operand must be in scope, and sizes are bounded so a hostile
module cannot exhaust the compiler. Passes call it between stages too, so a broken rewrite is caught where it happens.

    verify(module)   # None, or VerificationError("function 'k', op 'add' (op 3 > region 0 > op 1): ...")
"""

from __future__ import annotations

import math
import re
from typing import Any

from .attrs import attrs_error
from .core import IR_VERSION, Block, Function, IRError, Loc, Module, Op, SourceText, Value
from .filenames import files_error
from .ops import OPS, OpDef, infer
from .types import SCALAR_NAMES, BufferType, PointerType, ScalarType, TileType, Type, elem_of

# Limits on what a module may hold; the parser and the decoder apply the nesting ones while
# reading, so that deep input fails cleanly before it reaches Python's recursion limit.
MAX_FUNCTIONS = 1024
MAX_OPS = 100_000  # ops in the whole module, nested ones included
MAX_OPERANDS = 4096  # operands of one op, arguments of one block, results of one op or function
MAX_REGION_DEPTH = 32  # regions nested inside regions
MAX_TILE_NUMEL = 2**20  # elements of one tile
MAX_TILE_RANK = 8
MAX_POINTER_DEPTH = 4  # ptr<ptr<...>> nesting
MAX_ADDRESS_SPACE = 255
MAX_ATTR_DEPTH = 8  # lists nested in attribute values
MAX_ATTR_LIST = 4096  # items of one list attribute
MAX_STRING = 65536  # characters of one string (attribute, file name, argument name)
MAX_SYMBOL = 1024  # characters of a function name (a PTX symbol)
MAX_LOC = 2**32 - 1  # line and column numbers
MAX_TYPE_TEXT = 256  # characters of a type's text form, as the parser and the decoder read it
MAX_SOURCE_LINES = 4096  # lines of the kernel's source text a module carries (`Module.source`)
MAX_SOURCE_BYTES = 256 * 1024  # UTF-8 bytes of those lines
INT_MIN, INT_MAX = -(2**63), 2**64 - 1  # integer attributes: int64 and uint64 values

# Function and attribute names: what the printer writes bare, so the text form can be read back.
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.$]*")
# Function names become PTX symbols: a letter, or '_' and at least one more character, then letters,
# digits, '_' and '$' only; not a name that PTX, libdevice or the backend's own symbols take.
SYMBOL = re.compile(r"[A-Za-z][A-Za-z0-9_$]*|_[A-Za-z0-9_$]+")
RESERVED_SYMBOLS = frozenset({"WARP_SZ", "vprintf", "global_smem"})
RESERVED_PREFIXES = ("__nv_", "__despina")

# Each region's terminator, by op; a region of any other op ends in `yield`.
REGION_TERMINATORS: dict[str, tuple[str, ...]] = {"while": ("condition", "yield")}


class VerificationError(IRError):
    """The module is malformed; the message names the function, the op and why."""


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_type(v: Any) -> bool:
    return isinstance(v, (ScalarType, PointerType, TileType))


def type_error(t: Any) -> str | None:
    """Why `t` is not a valid type within the limits, or None."""
    if isinstance(t, TileType):
        shape = t.shape
        if not isinstance(shape, tuple) or not 1 <= len(shape) <= MAX_TILE_RANK:
            return f"{t} must have 1 to {MAX_TILE_RANK} dimensions"
        if not all(_is_int(d) and 0 < d <= MAX_TILE_NUMEL for d in shape) or math.prod(shape) > MAX_TILE_NUMEL:
            return f"{t} holds more than {MAX_TILE_NUMEL} elements"
        if t.encoding is not None:
            return f"{t} names a layout: layouts exist only in the GPU IR, which the backend makes"
        return (
            type_error(t.element_ty)
            if isinstance(t.element_ty, (ScalarType, PointerType))
            else f"tile of {t.element_ty!r}"
        )
    depth = 0
    while isinstance(t, PointerType):
        depth += 1
        if depth > MAX_POINTER_DEPTH:
            return f"pointers nest deeper than {MAX_POINTER_DEPTH}"
        if not _is_int(t.address_space) or not 0 <= t.address_space <= MAX_ADDRESS_SPACE:
            return f"pointer address space {t.address_space!r} is not in [0, {MAX_ADDRESS_SPACE}]"
        t = t.element_ty
    if isinstance(t, ScalarType) and t.name in SCALAR_NAMES:
        return None
    if isinstance(t, BufferType):
        return f"{t} is a shared-memory buffer: buffers exist only in the GPU IR, which the backend makes"
    return f"{t!r} is not a scalar, pointer or tile type"


def attr_error(v: Any, depth: int = 0) -> str | None:
    """Why `v` is not a valid attribute value (any kind) within the limits, or None."""
    if v is None or isinstance(v, (bool, float)):
        return None
    if isinstance(v, int):
        return None if INT_MIN <= v <= INT_MAX else "integer outside the int64/uint64 range"
    if isinstance(v, str):
        return string_error(v)
    if _is_type(v):
        return type_error(v)
    if isinstance(v, (list, tuple)):
        if depth >= MAX_ATTR_DEPTH or len(v) > MAX_ATTR_LIST:
            return f"list nested deeper than {MAX_ATTR_DEPTH} or longer than {MAX_ATTR_LIST}"
        return next((e for e in (attr_error(x, depth + 1) for x in v) if e), None)
    return f"{type(v).__name__} is not an attribute kind"


def string_error(s: Any) -> str | None:
    if not isinstance(s, str):
        return f"{s!r} is not a string"
    if len(s) > MAX_STRING:
        return f"string longer than {MAX_STRING} characters"
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return "string is not valid Unicode (lone surrogate)"
    return None


def loc_error(loc: Any) -> str | None:
    if loc is None:
        return None
    if not isinstance(loc, Loc):
        return f"location {loc!r} is not a Loc"
    if not all(_is_int(n) and 0 <= n <= MAX_LOC for n in (loc.line, loc.col)):
        return f"location line/column must be integers in [0, {MAX_LOC}]"
    return string_error(loc.file)


def source_error(source: Any) -> str | None:
    """Why `source` is not a `SourceText` within the limits, or None."""
    if source is None:
        return None
    if not isinstance(source, SourceText) or not isinstance(source.lines, tuple):
        return f"source {type(source).__name__} is not a SourceText"
    if not _is_int(source.first_line) or not 1 <= source.first_line <= MAX_LOC - len(source.lines):
        return f"the source text's first line must be an integer in [1, {MAX_LOC}], with its lines below that too"
    if len(source.lines) > MAX_SOURCE_LINES:
        return f"the source text holds {len(source.lines)} lines; at most {MAX_SOURCE_LINES}"
    if not all(isinstance(line, str) for line in source.lines):
        return "the source text's lines must be strings"
    if any("\n" in line for line in source.lines):
        return "a line of the source text holds a line break"
    try:
        size = sum(len(line.encode("utf-8")) for line in source.lines)
    except UnicodeEncodeError:
        return "the source text is not valid Unicode (lone surrogate)"
    if size > MAX_SOURCE_BYTES:
        return f"the source text holds {size} bytes; at most {MAX_SOURCE_BYTES}"
    return string_error(source.file)


def _symbol_error(name: Any) -> str | None:
    if not isinstance(name, str) or len(name) > MAX_SYMBOL or not SYMBOL.fullmatch(name):
        return (f"function name {str(name)[:80]!r} cannot be a GPU symbol: it must start with a letter, or with "
                f"'_' and one more character, hold only letters, digits, '_' and '$', and be at most "
                f"{MAX_SYMBOL} characters; rename the function")
    if name in RESERVED_SYMBOLS or name.startswith(RESERVED_PREFIXES):
        return (f"function name {name!r} is taken by PTX, libdevice or the backend's own symbols "
                f"({', '.join(sorted(RESERVED_SYMBOLS))}, {'*, '.join(RESERVED_PREFIXES)}*); rename the function")
    return None


def _constant_error(value: Any, ty: Type) -> str | None:
    elem = elem_of(ty)
    if isinstance(elem, PointerType) or elem.is_int():
        if not _is_int(value) and not (elem.is_bool() and isinstance(value, bool)):
            return f"constant of type {ty} needs an integer value, got {value!r}"
        bits = elem.primitive_bitwidth
        if not -(2 ** (bits - 1)) <= value < 2**bits:
            return f"constant {value} does not fit in {ty}"
    elif isinstance(value, bool):
        return f"constant of type {ty} needs a number, got {value!r}"
    return None


class _Verifier:
    def __init__(self, module: Module) -> None:
        self.module = module
        self.functions: dict[str, Function] = {}
        self.calls: dict[str, set[str]] = {}
        self.defined: set[int] = set()
        self.seen_ops: set[int] = set()
        self.num_ops = 0
        self.fn = ""
        self.path: list[str] = []

    def fail(self, why: str, op: Op | None = None) -> VerificationError:
        where = f"function '{self.fn}'" if self.fn else "module"
        if op is not None:
            where += f", op '{op.name}'"
        if self.path:
            where += f" ({' > '.join(self.path)})"
        if op is not None and isinstance(op.loc, Loc):
            where += f" at {op.loc}"
        return VerificationError(f"{where}: {why}")

    def run(self) -> None:
        m = self.module
        if not isinstance(m, Module):
            raise VerificationError(f"expected a Module, got {type(m).__name__}")
        if not _is_int(m.version) or m.version != IR_VERSION:
            raise self.fail(f"IR version {m.version!r} is not the supported version {IR_VERSION}")
        self.attrs(m.attrs, None, "module attribute")
        if "version" in m.attrs:
            raise self.fail("module attribute 'version' is reserved for the IR version")
        if err := source_error(m.source):
            raise self.fail(err)
        if not isinstance(m.functions, list) or not 0 < len(m.functions) <= MAX_FUNCTIONS:
            raise self.fail(f"a module holds 1 to {MAX_FUNCTIONS} functions")
        for fn in m.functions:
            self.signature(fn)
        kernels = [f.name for f in m.functions if f.kernel]
        if len(kernels) != 1:
            raise self.fail(f"a module holds exactly one kernel function, found {len(kernels)}: {kernels}")
        for fn in m.functions:
            self.fn, self.path = fn.name, []
            self.calls[fn.name] = set()
            self.block(fn.body, [], "return", 0, fn)
        self.fn = ""
        self.recursion()
        files = [fn.loc.file for fn in m.functions if isinstance(fn.loc, Loc)]
        files += [op.loc.file for fn in m.functions for op in fn.walk() if isinstance(op.loc, Loc)]
        if err := files_error(files):
            raise self.fail(err)

    def signature(self, fn: Any) -> None:
        if not isinstance(fn, Function):
            raise self.fail(f"{fn!r} is not a Function")
        if err := _symbol_error(fn.name):
            raise self.fail(err)
        if fn.name in self.functions:
            raise self.fail(f"two functions are named '{fn.name}'")
        self.functions[fn.name] = fn
        self.fn = fn.name
        if not isinstance(fn.body, Block) or not isinstance(fn.body.args, list):
            raise self.fail("the body is not a Block")
        if not isinstance(fn.kernel, bool):
            raise self.fail(f"'kernel' must be a bool, got {fn.kernel!r}")
        names = fn.arg_names
        if not isinstance(names, list) or len(names) != len(fn.args) or any(string_error(n) for n in names):
            raise self.fail(f"arg_names must name each of the {len(fn.args)} arguments with a string, got {names!r}")
        if not isinstance(fn.result_types, list) or len(fn.result_types) > MAX_OPERANDS:
            raise self.fail("result_types must be a list of types")
        for t in fn.result_types:
            if err := type_error(t):
                raise self.fail(f"result type: {err}")
        if fn.kernel and fn.result_types:
            raise self.fail("the kernel returns nothing, but result types are declared")
        if fn.kernel and any(isinstance(a.type, ScalarType) and a.type.is_fp8() for a in fn.body.args):
            raise self.fail("a kernel takes fp8 values only through pointers: pass a scalar as fp32 and convert it")
        if err := loc_error(fn.loc):
            raise self.fail(err)

    def attrs(self, attrs: Any, opdef: OpDef | None, what: str, op: Op | None = None) -> None:
        if not isinstance(attrs, dict):
            raise self.fail(f"{what}s must be a dict", op)
        for key, value in attrs.items():
            if not isinstance(key, str) or not NAME.fullmatch(key) or len(key) > MAX_STRING:
                raise self.fail(f"{what} name {key!r} is not an identifier", op)
            if err := attr_error(value):
                raise self.fail(f"{what} '{key}': {err}", op)
        if opdef is not None and (err := attrs_error(opdef.attrs, attrs)):
            raise self.fail(err, op)

    def define(self, v: Any, owner: Any, index: int, scope: set[int], op: Op | None) -> None:
        if not isinstance(v, Value) or v.owner is not owner or v.index != index:
            raise self.fail(f"value #{index} is not a Value owned by its {'op' if op else 'block'}", op)
        if id(v) in self.defined:
            raise self.fail(f"value #{index} ({v.type}) is defined twice", op)
        if err := type_error(v.type):
            raise self.fail(f"value #{index}: {err}", op)
        self.defined.add(id(v))
        scope.add(id(v))

    def block(self, block: Any, scopes: list[set[int]], term: str, depth: int, fn: Function | None = None) -> None:
        where = "the function body" if fn else "the region"
        if not isinstance(block, Block) or not isinstance(block.args, list) or not isinstance(block.ops, list):
            raise self.fail(f"{where} is not a Block")
        if len(block.args) > MAX_OPERANDS:
            raise self.fail(f"{where} has more than {MAX_OPERANDS} arguments")
        scope: set[int] = set()
        for i, arg in enumerate(block.args):
            self.define(arg, block, i, scope, None)
        scopes = scopes + [scope]
        for i, op in enumerate(block.ops):
            self.path.append(f"op {i}")
            self.op(op, scopes, depth)
            if OPS[op.name].terminator and i + 1 != len(block.ops):
                raise self.fail("a terminator must be the last op of its block", op)
            if i + 1 == len(block.ops) and op.name != term:
                raise self.fail(f"{where} must end with '{term}', not '{op.name}'", op)
            if fn is not None and op.name == "return":
                got = [v.type for v in op.operands]
                if got != fn.result_types:
                    want = ", ".join(map(str, fn.result_types))
                    raise self.fail(f"returns ({', '.join(map(str, got))}) but the function returns ({want})", op)
            self.path.pop()
        if not block.ops:
            raise self.fail(f"{where} is empty; it must end with '{term}'")

    def op(self, op: Any, scopes: list[set[int]], depth: int) -> None:
        if not isinstance(op, Op):
            raise self.fail(f"{op!r} is not an Op")
        if id(op) in self.seen_ops:
            raise self.fail("the same op object appears twice in the module", op)
        self.seen_ops.add(id(op))
        self.num_ops += 1
        if self.num_ops > MAX_OPS:
            raise self.fail(f"the module holds more than {MAX_OPS} ops", op)
        opdef = OPS.get(op.name) if isinstance(op.name, str) else None
        if opdef is None:
            raise self.fail("unknown op", op)
        if err := loc_error(op.loc):
            raise self.fail(err, op)
        self.operands(op, scopes)
        self.attrs(op.attrs, opdef, "attribute", op)
        if not isinstance(op.regions, list) or len(op.regions) != opdef.num_regions:
            raise self.fail(f"takes {opdef.num_regions} regions, got {len(op.regions)}", op)
        if op.regions and depth >= MAX_REGION_DEPTH:
            raise self.fail(f"regions nest deeper than {MAX_REGION_DEPTH}", op)
        terms = REGION_TERMINATORS.get(op.name, ("yield",) * opdef.num_regions)
        for r, (region, term) in enumerate(zip(op.regions, terms)):
            self.path.append(f"region {r}")
            self.block(region, scopes, term, depth + 1)
            self.path.pop()
        if not isinstance(op.results, list) or len(op.results) > MAX_OPERANDS:
            raise self.fail(f"has more than {MAX_OPERANDS} results", op)
        for i, res in enumerate(op.results):
            self.define(res, op, i, scopes[-1], op)
        self.typecheck(op)
        if op.name == "constant":
            if err := _constant_error(op.attrs["value"], op.attrs["type"]):
                raise self.fail(err, op)
        elif op.name == "call":
            self.call(op)

    def operands(self, op: Op, scopes: list[set[int]]) -> None:
        if not isinstance(op.operands, list) or len(op.operands) > MAX_OPERANDS:
            raise self.fail(f"operands must be a list of at most {MAX_OPERANDS} values", op)
        for i, v in enumerate(op.operands):
            if not isinstance(v, Value):
                raise self.fail(f"operand {i} is {v!r}, not a Value", op)
            if not any(id(v) in s for s in scopes):
                raise self.fail(
                    f"operand {i} ({v.type}) is not in scope: it must be defined earlier in this block "
                    "or in a block enclosing it, in the same function",
                    op,
                )

    def typecheck(self, op: Op) -> None:
        try:
            expected = infer(op.name, [v.type for v in op.operands], op.attrs, op.regions)
        except IRError as e:
            raise self.fail(str(e), op) from None
        except Exception as e:  # the type rules trust their inputs' kinds; hostile input may still trip one
            raise self.fail(f"malformed op ({type(e).__name__}: {e})", op) from None
        got = [v.type for v in op.results]
        if got != expected:
            want = ", ".join(map(str, expected))
            raise self.fail(f"result types ({', '.join(map(str, got))}) differ from the type rule's ({want})", op)

    def call(self, op: Op) -> None:
        callee = self.functions.get(op.attrs["callee"])
        if callee is None:
            raise self.fail(f"calls '{op.attrs['callee']}', which is not a function of the module", op)
        got, want = [v.type for v in op.operands], [a.type for a in callee.args]
        if got != want:
            raise self.fail(f"passes ({', '.join(map(str, got))}) to '{callee.name}({', '.join(map(str, want))})'", op)
        results = list(op.attrs.get("results", []))
        if results != callee.result_types:
            shown, returned = ", ".join(map(str, results)), ", ".join(map(str, callee.result_types))
            raise self.fail(f"expects results ({shown}) from '{callee.name}', which returns ({returned})", op)
        self.calls[self.fn].add(callee.name)

    def recursion(self) -> None:
        state: dict[str, int] = {}  # 1 on the current path, 2 done
        for root in self.calls:
            if state.get(root):
                continue
            state[root] = 1
            stack: list[tuple[str, list[str]]] = [(root, sorted(self.calls[root]))]
            while stack:
                name, todo = stack[-1]
                if not todo:
                    state[name] = 2
                    stack.pop()
                    continue
                nxt = todo.pop()
                if state.get(nxt) == 1:
                    cycle = [n for n, _ in stack[[n for n, _ in stack].index(nxt) :]] + [nxt]
                    self.fn = cycle[0]
                    raise self.fail(f"recursion is not supported: {' -> '.join(cycle)}")
                if not state.get(nxt):
                    state[nxt] = 1
                    stack.append((nxt, sorted(self.calls[nxt])))


def verify(module: Module) -> None:
    """Check `module` completely; raise `VerificationError` naming the function, op and reason."""
    _Verifier(module).run()
