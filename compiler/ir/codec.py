"""The wire form of the tile IR: `despina.ir.v1` protobuf messages (proto/ir.proto).

    data = encode(module)   # deterministic: the same module always gives the same bytes
    module = decode(data)   # IRDecodeError for anything that is not such bytes
    verify(module)          # decode does not verify; callers must before using the module

Values travel as numbers in order of definition (as the printer numbers them), types as their
printed text. Source locations travel in a table of their own (`Module.locations`, each file
once), and the kernel's source lines in another (`Module.source`, for a viewer of the stages), which
`key_bytes` both leaves out: a cache key names the kernel, not the checkout it came from. A module
without source text (an older client's) decodes with `source` None; an older decoder skips it.
`decode` checks only what it needs to build the objects (the schema version, well-formed types and
attributes, every value reference pointing at a value defined before it); it may return a module
that is still malformed (an unknown op, a value used out of its scope), which is what
`verifier.verify` is for.
"""

from __future__ import annotations

from typing import Any, NoReturn

from despina.proto import ir_pb2 as pb

from .core import Block, Function, IRError, Loc, Module, Op, SourceText, Value
from .filenames import files_error, short_names
from .types import PointerType, ScalarType, TileType, Type, parse_type
from .verifier import MAX_ATTR_DEPTH, MAX_ATTR_LIST, MAX_FUNCTIONS, MAX_REGION_DEPTH, MAX_TYPE_TEXT
from .wire import IRDecodeError, census, top_records

SCHEMA_VERSION = 2
_I64, _U64 = 2**63, 2**64


# ---- encoding -------------------------------------------------------------------------------


class _Encoder:
    def __init__(self) -> None:
        self.numbers: dict[int, int] = {}
        self.items = 0  # functions and ops, in order
        self.files: dict[str, int] = {}
        self.entries: list[int] = []

    def define(self, v: Value) -> None:
        self.numbers[id(v)] = len(self.numbers)

    def module(self, m: Module) -> Any:
        msg = pb.Module(schema_version=SCHEMA_VERSION, ir_version=m.version)
        self.attrs(m.attrs, msg.attrs)
        for fn in m.functions:
            self.function(fn, msg.functions.add())
        if m.source is not None:
            msg.source.file = self.files.setdefault(m.source.file, len(self.files))
            msg.source.first_line = m.source.first_line
            msg.source.lines.extend(m.source.lines)
        if self.files:
            msg.locations.files.extend(self.files)
            msg.locations.entries.extend(self.entries)
        return msg

    def function(self, fn: Function, msg: Any) -> None:
        msg.name = fn.name
        msg.arg_names.extend(fn.arg_names)
        msg.result_types.extend(str(t) for t in fn.result_types)
        msg.kernel = fn.kernel
        self.loc(fn.loc)
        self.block(fn.body, msg.body)

    def block(self, block: Block, msg: Any) -> None:
        for arg in block.args:
            self.define(arg)
            msg.arg_types.append(str(arg.type))
        for op in block.ops:
            self.op(op, msg.ops.add())

    def op(self, op: Op, msg: Any) -> None:
        msg.name = op.name
        self.loc(op.loc)
        for i, v in enumerate(op.operands):
            number = self.numbers.get(id(v))
            if number is None:
                raise IRError(f"op '{op.name}' operand {i} ({v!r}) is used before it is defined")
            msg.operands.append(number)
        for r in op.results:
            self.define(r)
            msg.result_types.append(str(r.type))
        self.attrs(op.attrs, msg.attrs)
        for region in op.regions:
            self.block(region, msg.regions.add())

    def loc(self, loc: Loc | None) -> None:
        """Number the next function or op and record where it came from."""
        if loc is not None:
            file = self.files.setdefault(loc.file, len(self.files))
            self.entries.extend((self.items, file, loc.line, loc.col))
        self.items += 1

    def attrs(self, attrs: dict[str, Any], msg: Any) -> None:
        for key in sorted(attrs):
            item = msg.add(name=key)
            self.attr(attrs[key], item.value, 0)

    def attr(self, v: Any, msg: Any, depth: int) -> None:
        if isinstance(v, bool):
            msg.bool_value = v
        elif v is None:
            msg.none_value.SetInParent()
        elif isinstance(v, int):
            if -_I64 <= v < _I64:
                msg.int_value = v
            elif _I64 <= v < _U64:
                msg.uint_value = v
            else:
                raise IRError(f"integer attribute {v} is outside the int64/uint64 range")
        elif isinstance(v, float):
            msg.float_value = v
        elif isinstance(v, str):
            msg.str_value = v
        elif isinstance(v, (ScalarType, PointerType, TileType)):
            msg.type_value = str(v)
        elif isinstance(v, (list, tuple)):
            if depth >= MAX_ATTR_DEPTH:
                raise IRError(f"attribute lists nest deeper than {MAX_ATTR_DEPTH}")
            msg.list_value.SetInParent()
            for x in v:
                self.attr(x, msg.list_value.items.add(), depth + 1)
        else:
            raise IRError(f"attribute value {v!r} of type {type(v).__name__} has no wire form")


def encode(module: Module) -> bytes:
    """The module as `despina.ir.v1.Module` bytes; equal modules give equal bytes.

    Raises `IRError` for a module that has no wire form (a value used before its definition,
    an integer or string that protobuf cannot hold, an attribute value of no IR kind).
    """
    try:
        msg = _Encoder().module(module)
    except (ValueError, TypeError) as e:  # protobuf's own range and encoding checks
        raise IRError(f"module cannot be encoded: {e}") from None
    return bytes(msg.SerializeToString(deterministic=True))


# ---- decoding -------------------------------------------------------------------------------


class _Decoder:
    def __init__(self) -> None:
        self.values: list[Value | None] = []  # None: a result of an op still being decoded
        self.types: dict[str, Type] = {}
        self.where = "module"
        self.items = 0  # functions and ops, in order
        self.locs: dict[int, Loc] = {}

    def fail(self, why: str) -> NoReturn:
        raise IRDecodeError(f"{self.where}: {why}")

    def type(self, text: str) -> Type:
        ty = self.types.get(text)
        if ty is None:
            if len(text) > MAX_TYPE_TEXT:
                self.fail(f"type text longer than {MAX_TYPE_TEXT} characters")
            try:
                ty = self.types[text] = parse_type(text)
            except ValueError as e:
                self.fail(f"bad type {text[:40]!r}: {e}")
        return ty

    def module(self, msg: Any) -> Module:
        if msg.schema_version != SCHEMA_VERSION:
            self.fail(f"schema version {msg.schema_version} is not the supported version {SCHEMA_VERSION}")
        self.locations(msg.locations)
        attrs = self.attrs(msg.attrs)
        functions = [self.function(f) for f in msg.functions]
        return Module(functions, attrs, msg.ir_version, self.source(msg))

    def source(self, msg: Any) -> SourceText | None:
        if not msg.HasField("source"):
            return None
        files = msg.locations.files
        if msg.source.file >= len(files):
            self.fail(f"the source text names file {msg.source.file}; the location table has {len(files)}")
        return SourceText(files[msg.source.file], msg.source.first_line, tuple(msg.source.lines))

    def function(self, msg: Any) -> Function:
        self.where = f"function '{msg.name[:80]}'"
        loc = self.loc()
        result_types = [self.type(t) for t in msg.result_types]
        body = self.block(msg.body, 0)
        return Function(msg.name, body, list(msg.arg_names), result_types, msg.kernel, loc)

    def block(self, msg: Any, depth: int) -> Block:
        block = Block([self.type(t) for t in msg.arg_types])
        self.values.extend(block.args)
        for op in msg.ops:
            block.ops.append(self.op(op, depth))
        return block

    def op(self, msg: Any, depth: int) -> Op:
        loc = self.loc()
        operands = []
        for i, number in enumerate(msg.operands):
            value = self.values[number] if number < len(self.values) else None
            if value is None:
                self.fail(f"op '{msg.name[:80]}' operand {i} refers to value %{number}, which is not defined before it")
            operands.append(value)
        types = [self.type(t) for t in msg.result_types]
        first = len(self.values)
        self.values.extend([None] * len(types))
        attrs = self.attrs(msg.attrs)
        if msg.regions and depth >= MAX_REGION_DEPTH:
            self.fail(f"regions nest deeper than {MAX_REGION_DEPTH}")
        regions = [self.block(r, depth + 1) for r in msg.regions]
        op = Op(msg.name, operands, types, attrs, regions, loc)
        self.values[first : first + len(types)] = op.results
        return op

    def locations(self, msg: Any) -> None:
        files, entries = list(msg.files), msg.entries
        if len(entries) % 4:
            self.fail(f"the location table holds {len(entries)} numbers, not four per item")
        last = -1
        for i in range(0, len(entries), 4):
            item, file, line, col = entries[i : i + 4]
            if item <= last:
                self.fail(f"the location table's items are not in increasing order (item {item} after {last})")
            if file >= len(files):
                self.fail(f"the location of item {item} names file {file}; the table has {len(files)}")
            self.locs[item] = Loc(files[file], line, col)
            last = item

    def loc(self) -> Loc | None:
        """The location of the next function or op."""
        self.items += 1
        return self.locs.get(self.items - 1)

    def attrs(self, items: Any) -> dict[str, Any]:
        attrs: dict[str, Any] = {}
        for item in items:
            if item.name in attrs:
                self.fail(f"attribute '{item.name[:80]}' is given twice")
            attrs[item.name] = self.attr(item.value, 0)
        return attrs

    def attr(self, msg: Any, depth: int) -> Any:
        kind = msg.WhichOneof("kind")
        if kind == "none_value":
            return None
        if kind == "type_value":
            return self.type(msg.type_value)
        if kind == "list_value":
            if depth >= MAX_ATTR_DEPTH:
                self.fail(f"attribute lists nest deeper than {MAX_ATTR_DEPTH}")
            return [self.attr(x, depth + 1) for x in msg.list_value.items]
        if kind is None:
            self.fail("an attribute has no value")
        return getattr(msg, kind)


def decode(data: bytes) -> Module:
    """The module that `encode` turned into `data`; `IRDecodeError` for anything else.

    The result is not verified: run `verifier.verify` on it before trusting it.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise IRDecodeError(f"expected bytes, got {type(data).__name__}")
    census(data)  # past a limit, refused before protobuf builds anything
    msg = pb.Module()
    try:
        msg.ParseFromString(bytes(data))
    except Exception as e:  # protobuf's DecodeError, or whatever its runtime raises on garbage
        raise IRDecodeError(f"not a serialized despina.ir.v1.Module: {e}") from None
    return _Decoder().module(msg)


def key_bytes(data: bytes) -> bytes:
    """`data` as a cache key hashes it: without the source text, and with the location table's files
    named as the debug info names them (`filenames.short_names`), so that one kernel traced from two
    checkouts (or one path written two ways) gets one key, and the same kernel at other lines (whose
    PTX carries other `.loc` lines) another. `IRDecodeError` for bytes whose top level is not protobuf
    records.

    Only the module's top-level records are read (a few per module; at most MAX_FUNCTIONS functions
    and MAX_ATTR_LIST attributes), each skipped by its length: the cost does not grow with the ops,
    so a daemon can key a request before it decides to decode it."""
    data = bytes(data)
    view = memoryview(data)  # slices of it copy nothing: the IR may be megabytes
    kept: list[memoryview] = []
    for tag, start, _, end in top_records(data, _MAX_TOP_LEVEL, "functions and module attributes"):
        if tag >> 3 == _LOCATIONS:
            kept.append(memoryview(_keyed_locations(bytes(view[start:end]))))
        elif tag >> 3 != _SOURCE:
            kept.append(view[start:end])
    return b"".join(kept)


def _keyed_locations(record: bytes) -> bytes:
    """A Module.locations record (tag, length, message) with each file replaced by its short name."""
    module = pb.Module()
    try:
        module.MergeFromString(record)
    except Exception as e:  # protobuf's DecodeError, or whatever its runtime raises on garbage
        raise IRDecodeError(f"not a serialized despina.ir.v1.Module: its location table: {e}") from None
    table = module.locations
    if why := files_error(table.files):
        raise IRDecodeError(why)
    names = short_names(table.files)
    table.files[:] = [names[f] for f in table.files]
    return module.SerializeToString()


_LOCATIONS, _SOURCE = (pb.Module.DESCRIPTOR.fields_by_name[name].number for name in ("locations", "source"))
_MAX_TOP_LEVEL = 2 + MAX_FUNCTIONS + MAX_ATTR_LIST + 2  # versions, functions, attributes, locations, source

