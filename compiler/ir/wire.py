"""A census of the wire form: what a serialized module holds, counted without building it.

    found = census(data)   # IRDecodeError as soon as the bytes pass a limit
    found.ops, found.values, found.records

`codec.decode` runs it before protobuf parses anything, so that input past the verifier's limits
(more than MAX_OPS ops, an op with more than MAX_OPERANDS operands, lists nested past MAX_ATTR_DEPTH,
more than MAX_RECORDS records in all, a source text past MAX_SOURCE_LINES or MAX_SOURCE_BYTES) is
refused for the cost of reading its first records: an 8 MiB module of empty ops is refused after
100,001 of them, before a single Python object is made for it. The scan follows proto/ir.proto's
field numbers; a field of another number or wire type is skipped, as protobuf would keep it aside
as an unknown field (and still counted as a record).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .core import IRError
from .verifier import (
    MAX_ATTR_DEPTH,
    MAX_ATTR_LIST,
    MAX_FUNCTIONS,
    MAX_OPERANDS,
    MAX_OPS,
    MAX_REGION_DEPTH,
    MAX_SOURCE_BYTES,
    MAX_SOURCE_LINES,
)

# Every record (field) of the message tree, nested ones included: what decoding allocates grows with
# it. A module at MAX_OPS ops with a few operands, results and attributes each stays well under it.
MAX_RECORDS = 16 * MAX_OPS
# Numbers in the location table: four per located function or op.
MAX_LOCATION_NUMBERS = 4 * (MAX_OPS + MAX_FUNCTIONS)
# Records of one function, op or attribute: operands, results and names are at most MAX_OPERANDS each;
# more is refused by the check that follows, as soon as they are read.
_MOST_FIELDS = 3 * MAX_OPERANDS + MAX_ATTR_LIST
_LEN, _VARINT = 2, 0
# Bytes of a packed varint field that end a number (the high bit clear): their count is the count of numbers.
_CONTINUATION = bytes(range(0x80, 0x100))


class IRDecodeError(IRError):
    """The bytes are not a serialized module of this schema version; the message says why."""


@dataclass
class Census:
    functions: int = 0
    ops: int = 0
    values: int = 0  # block arguments and op results
    records: int = 0
    source_lines: int = 0
    source_bytes: int = 0  # of the source text's records


def census(data: bytes) -> Census:
    """What `data` (a `despina.ir.v1.Module`) holds; `IRDecodeError` for bytes that are not protobuf
    records, or as soon as one of the limits above is passed."""
    scan = _Scan(bytes(data))
    scan.module(0, len(scan.data))
    return scan.found


def varint(data: bytes, i: int) -> tuple[int, int]:
    """The varint at `data[i:]` and the index after it."""
    value = shift = 0
    for j in range(i, min(i + 10, len(data))):
        value |= (data[j] & 0x7F) << shift
        if data[j] < 0x80:
            return value, j + 1
        shift += 7
    raise IRDecodeError(f"not a serialized despina.ir.v1.Module: a bad varint at byte {i}")


def top_records(data: bytes, most: int, what: str) -> Iterator[tuple[int, int, int, int]]:
    """The top-level records of the protobuf message `data` in order: (tag, start, value start, end) of
    each, a length-delimited value's bytes being data[value start:end]. Each is skipped by its length, so
    the cost does not grow with what the records hold. `IRDecodeError` for bytes that are not protobuf
    records, or past `most` records (`what` names them in the message)."""
    i, n, records = 0, len(data), 0
    while i < n:
        records += 1
        if records > most:
            raise IRDecodeError(f"more than {most} {what}")
        start = i
        tag, i = varint(data, i)
        wire, value = tag & 7, i
        if wire == _VARINT:
            i = varint(data, i)[1]
        elif wire == _LEN:
            length, value = varint(data, i)
            i = value + length
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        else:
            raise IRDecodeError(f"not a serialized despina.ir.v1.Module: wire type {wire} at byte {start}")
        if i > n:
            raise IRDecodeError(f"not a serialized despina.ir.v1.Module: a record at byte {start} runs past the end")
        yield tag, start, value, i


def split_field(data: bytes, tag: int, most: int) -> tuple[bytes, bytes] | None:
    """`data` (a protobuf message) without its records of `tag` (a length-delimited field), and the last
    one's value (what protobuf gives the field); None when it has none, more than `most` top-level records,
    or is not protobuf records. One copy of the value, none through protobuf's parsed message."""
    view = memoryview(data)
    kept: list[memoryview] = []
    found: tuple[int, int] | None = None
    try:
        for record_tag, start, value, end in top_records(data, most, "records"):
            if record_tag == tag:
                found = (value, end)
            else:
                kept.append(view[start:end])
    except IRDecodeError:
        return None
    if found is None:
        return None
    return b"".join(kept), bytes(view[found[0] : found[1]])


class _Scan:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.found = Census()

    def fail(self, why: str) -> IRDecodeError:
        return IRDecodeError(f"the module is past the IR's limits: {why}")

    def fields(self, i: int, end: int, most: int = MAX_RECORDS, what: str = "the module"
               ) -> list[tuple[int, int, int, int]]:
        """The records of the message in data[i:end]: (field number, wire type, start, end) of each value.
        Past `most` of them (or the whole scan's budget), the scan stops there and refuses the module."""
        data, out = self.data, []
        limit = min(most, MAX_RECORDS - self.found.records)
        while i < end:
            tag = data[i]
            if tag < 0x80:  # one-byte tags and lengths are the rule: skip the call
                i += 1
            else:
                tag, i = varint(data, i)
            wire = tag & 7
            if wire == _LEN:
                length = data[i] if i < end else 0x80
                start = i + 1
                if length >= 0x80:
                    length, start = varint(data, i)
                i = start + length
            elif wire == _VARINT:
                start = i
                i = varint(data, i)[1]
            elif wire in (1, 5):
                start = i
                i += 8 if wire == 1 else 4
            else:
                raise IRDecodeError(f"not a serialized despina.ir.v1.Module: wire type {wire} at byte {i}")
            if i > end:
                raise IRDecodeError(f"not a serialized despina.ir.v1.Module: a record at byte {start} runs past its end")
            out.append((tag >> 3, wire, start, i))
            if len(out) > limit:
                raise self.fail(f"{what} holds more than {most} records" if limit == most else
                                f"more than {MAX_RECORDS} protobuf records")
        self.found.records += len(out)
        return out

    def numbers(self, fields: list[tuple[int, int, int, int]], field: int) -> int:
        """How many numbers a repeated integer field holds, packed or not."""
        count = 0
        for f, wire, start, end in fields:
            if f == field:
                count += 1 if wire == _VARINT else len(self.data[start:end].translate(None, _CONTINUATION))
        return count

    def module(self, i: int, end: int) -> None:
        for f, wire, start, stop in self.fields(i, end):
            if wire != _LEN:
                continue
            if f == 3:
                self.named_attr(start, stop)
            elif f == 4:
                self.found.functions += 1
                if self.found.functions > MAX_FUNCTIONS:
                    raise self.fail(f"more than {MAX_FUNCTIONS} functions")
                self.function(start, stop)
            elif f == 5:
                entries = self.numbers(self.fields(start, stop), 2)
                if entries > MAX_LOCATION_NUMBERS:
                    raise self.fail(f"a location table of more than {MAX_LOCATION_NUMBERS} numbers")
            elif f == 6:  # protobuf merges repeated records of it: their sum is the source text
                self.found.source_bytes += stop - start
                if self.found.source_bytes > MAX_SOURCE_BYTES + 4 * MAX_SOURCE_LINES + 16:  # and line headers
                    raise self.fail(f"a source text of more than {MAX_SOURCE_BYTES} bytes")
                self.found.source_lines += sum(1 for g, _, _, _ in self.fields(start, stop) if g == 3)
                if self.found.source_lines > MAX_SOURCE_LINES:
                    raise self.fail(f"a source text of more than {MAX_SOURCE_LINES} lines")

    def function(self, i: int, end: int) -> None:
        fields = self.fields(i, end, _MOST_FIELDS, "a function")
        for what, field in (("argument names", 3), ("results", 4)):
            if sum(1 for f, wire, _, _ in fields if f == field and wire == _LEN) > MAX_OPERANDS:
                raise self.fail(f"a function with more than {MAX_OPERANDS} {what}")
        for f, wire, start, stop in fields:
            if f == 2 and wire == _LEN:
                self.block(start, stop, 0)

    def block(self, i: int, end: int, depth: int) -> None:
        if depth > MAX_REGION_DEPTH:
            raise self.fail(f"regions nest deeper than {MAX_REGION_DEPTH}")
        # Past this many records, the block holds too many ops or arguments: stop reading there.
        fields = self.fields(i, end, MAX_OPERANDS + MAX_OPS - self.found.ops, "a block (its ops and arguments)")
        args = sum(1 for f, wire, _, _ in fields if f == 1 and wire == _LEN)
        if args > MAX_OPERANDS:
            raise self.fail(f"a block with more than {MAX_OPERANDS} arguments")
        self.found.values += args
        for f, wire, start, stop in fields:
            if f == 2 and wire == _LEN:
                self.found.ops += 1
                if self.found.ops > MAX_OPS:
                    raise self.fail(f"more than {MAX_OPS} ops")
                self.op(start, stop, depth)

    def op(self, i: int, end: int, depth: int) -> None:
        fields = self.fields(i, end, _MOST_FIELDS, "an op")
        if len(fields) <= 1:  # a name alone, or nothing: the common leaf needs no more looking at
            return
        if self.numbers(fields, 2) > MAX_OPERANDS:
            raise self.fail(f"an op with more than {MAX_OPERANDS} operands")
        results = sum(1 for f, wire, _, _ in fields if f == 3 and wire == _LEN)
        if results > MAX_OPERANDS:
            raise self.fail(f"an op with more than {MAX_OPERANDS} results")
        self.found.values += results
        for f, wire, start, stop in fields:
            if wire != _LEN:
                continue
            if f == 4:
                self.named_attr(start, stop)
            elif f == 5:
                self.block(start, stop, depth + 1)

    def named_attr(self, i: int, end: int) -> None:
        for f, wire, start, stop in self.fields(i, end, _MOST_FIELDS, "an attribute"):
            if f == 2 and wire == _LEN:
                self.attr(start, stop, 0)

    def attr(self, i: int, end: int, depth: int) -> None:
        for f, wire, start, stop in self.fields(i, end, _MOST_FIELDS, "an attribute"):
            if f != 8 or wire != _LEN:
                continue
            if depth >= MAX_ATTR_DEPTH:
                raise self.fail(f"attribute lists nest deeper than {MAX_ATTR_DEPTH}")
            items = [(s, e) for g, w, s, e in self.fields(start, stop, MAX_ATTR_LIST, "an attribute list") if g == 1 and w == _LEN]
            if len(items) > MAX_ATTR_LIST:
                raise self.fail(f"an attribute list of more than {MAX_ATTR_LIST} items")
            for s, e in items:
                self.attr(s, e, depth + 1)
