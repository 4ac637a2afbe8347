"""The census of the wire form: exact counts for real modules, and refusal past each limit before
protobuf parses anything (the message is the scan's own, not the decoder's or the verifier's)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from strategies import modules
from test_codec import sample

from despina.compiler.ir.codec import decode, encode
from despina.compiler.ir.core import Module
from despina.compiler.ir.verifier import (
    MAX_ATTR_LIST,
    MAX_OPERANDS,
    MAX_OPS,
    MAX_REGION_DEPTH,
    MAX_SOURCE_BYTES,
    MAX_SOURCE_LINES,
)
from despina.compiler.ir.wire import MAX_RECORDS, IRDecodeError, census, split_field, top_records

LIMIT = "the module is past the IR's limits"


def record(field: int, payload: bytes) -> bytes:
    """A length-delimited protobuf record."""
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append(n & 0x7F | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def module_of(block: bytes) -> bytes:
    """A module (schema 2) with one function 'k' whose body is `block` (Block's own bytes)."""
    return b"\x08\x02" + record(4, record(1, b"k") + record(2, block))


def op(*fields: bytes) -> bytes:
    return record(2, record(1, b"add") + b"".join(fields))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(modules())
def test_counts_ops_and_values_of_any_module(m: Module) -> None:
    found = census(encode(m))
    ops = [o for fn in m.functions for o in fn.walk()]
    blocks = [fn.body for fn in m.functions] + [r for o in ops for r in o.regions]
    assert (found.functions, found.ops) == (len(m.functions), len(ops))
    assert found.values == sum(len(o.results) for o in ops) + sum(len(b.args) for b in blocks)


def test_a_decode_bomb_is_refused_by_the_scan() -> None:
    """1.6 M empty ops in 3.2 MB: refused at op 100,001, before protobuf or the decoder builds them."""
    bomb = module_of(b"\x12\x00" * 1_600_000)
    with pytest.raises(IRDecodeError, match=f"{LIMIT}: a block .* holds more than {MAX_OPS + MAX_OPERANDS} records"):
        decode(bomb)
    just_past = module_of(b"\x12\x00" * (MAX_OPS + 1))
    with pytest.raises(IRDecodeError, match=f"{LIMIT}: more than {MAX_OPS} ops"):
        census(just_past)
    assert census(module_of(b"\x12\x00" * MAX_OPS)).ops == MAX_OPS


def test_ops_are_counted_across_blocks_and_regions() -> None:
    half = MAX_OPS // 2 + 1
    inner = b"\x12\x00" * half
    with pytest.raises(IRDecodeError, match=f"more than {MAX_OPS} ops"):
        census(module_of(b"\x12\x00" * half + op(record(5, inner))))


def test_operands_packed_or_not() -> None:
    packed = record(2, b"\x01" * (MAX_OPERANDS + 1))
    with pytest.raises(IRDecodeError, match=f"an op with more than {MAX_OPERANDS} operands"):
        census(module_of(op(packed)))
    chunks = record(2, b"\x01" * 3000) + record(2, b"\x01" * 1097)  # packed chunks add up
    with pytest.raises(IRDecodeError, match="more than 4096 operands"):
        census(module_of(op(chunks)))
    unpacked = b"\x10\x01" * (MAX_OPERANDS + 1)  # field 2 as single varints: protobuf accepts these too
    with pytest.raises(IRDecodeError, match="more than 4096 operands"):
        census(module_of(op(unpacked)))
    assert census(module_of(op(record(2, b"\x81\x01" * MAX_OPERANDS)))).ops == 1  # two-byte numbers count once


def test_results_arguments_and_empty_records() -> None:
    with pytest.raises(IRDecodeError, match="an op with more than 4096 results"):
        census(module_of(op(record(3, b"i32") * (MAX_OPERANDS + 1))))
    with pytest.raises(IRDecodeError, match="a block with more than 4096 arguments"):
        census(module_of(record(1, b"i32") * (MAX_OPERANDS + 1)))
    with pytest.raises(IRDecodeError, match="an op holds more than"):  # empty operand chunks: nothing, many records
        census(module_of(op(record(2, b"") * 20_000)))


def test_nesting_of_regions_and_attribute_lists() -> None:
    block = b""
    for _ in range(MAX_REGION_DEPTH + 1):
        block = op(record(5, block))
    with pytest.raises(IRDecodeError, match=f"regions nest deeper than {MAX_REGION_DEPTH}"):
        census(module_of(block))
    value = b"\x28\x01"  # bool_value
    for _ in range(9):
        value = record(8, record(1, value))  # list_value { items: value }
    with pytest.raises(IRDecodeError, match="attribute lists nest deeper than 8"):
        census(module_of(op(record(4, record(1, b"a") + record(2, value)))))
    long_list = record(8, record(1, b"\x28\x01") * (MAX_ATTR_LIST + 1))
    with pytest.raises(IRDecodeError, match="an attribute list holds more than 4096 records"):
        census(module_of(op(record(4, record(1, b"a") + record(2, long_list)))))


def test_the_whole_module_has_a_record_budget() -> None:
    """Many small module attributes: each message is within its own bound, the module is not."""
    attr = record(3, record(1, b"a") + record(2, b"\x28\x01"))
    with pytest.raises(IRDecodeError, match=f"more than {MAX_RECORDS} protobuf records"):
        census(b"\x08\x02" + attr * (MAX_RECORDS // 3 + 1))


def test_location_table_and_unknown_fields() -> None:
    table = record(5, record(1, b"f.py") + record(2, b"\x01" * (4 * (MAX_OPS + 1024) + 1)))
    with pytest.raises(IRDecodeError, match="a location table of more than"):
        census(module_of(b"") + table)
    data = encode(sample())
    unknown = record(15, b"\x00" * 100) + b"\x78\x05"  # field 15: LEN and varint, as protobuf keeps them aside
    assert census(data + unknown).records == census(data).records + 2
    assert decode(data + unknown).functions[0].name == decode(data).functions[0].name


def test_garbage_is_not_a_module() -> None:
    for junk in (b"\x22\x10abc", b"\x0b", b"\x22\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"):
        with pytest.raises(IRDecodeError, match="not a serialized despina.ir.v1.Module"):
            census(junk)


def test_a_source_text_past_its_bounds_is_refused_before_protobuf_reads_it() -> None:
    base = module_of(op())
    lines = b"".join(record(3, b"x") for _ in range(MAX_SOURCE_LINES + 1))
    with pytest.raises(IRDecodeError, match=f"source text of more than {MAX_SOURCE_LINES} lines"):
        census(base + record(6, lines))
    halves = b"".join(record(3, b"x") for _ in range(MAX_SOURCE_LINES // 2 + 1))
    with pytest.raises(IRDecodeError, match="source text of more than"):  # protobuf would merge the two
        census(base + record(6, halves) + record(6, halves))
    big = record(3, b"y" * (MAX_SOURCE_BYTES + 4 * MAX_SOURCE_LINES + 17))
    with pytest.raises(IRDecodeError, match=f"source text of more than {MAX_SOURCE_BYTES} bytes"):
        census(base + record(6, big))
    assert census(base + record(6, record(3, b"ok") * 10)).ops == 1


def _record(field: int, payload: bytes) -> bytes:
    return bytes([field << 3 | 2, len(payload)]) + payload


def test_top_records_are_skipped_by_their_lengths() -> None:
    data = _record(1, b"abc") + bytes([2 << 3, 0x96, 0x01]) + _record(3, b"")
    assert list(top_records(data, 3, "records")) == [(1 << 3 | 2, 0, 2, 5), (2 << 3, 5, 6, 8), (3 << 3 | 2, 8, 10, 10)]
    with pytest.raises(IRDecodeError, match="more than 2 records"):
        list(top_records(data, 2, "records"))
    with pytest.raises(IRDecodeError, match="a record at byte 0 runs past the end"):
        list(top_records(_record(1, b"abc")[:-1], 3, "records"))
    with pytest.raises(IRDecodeError, match="wire type 3 at byte 0"):
        list(top_records(bytes([1 << 3 | 3]), 3, "records"))


def test_split_field_takes_the_last_value_out() -> None:
    rest = _record(2, b"x") + bytes([3 << 3, 7])
    data = _record(1, b"first") + rest[:3] + _record(1, b"last") + rest[3:]
    assert split_field(data, 1 << 3 | 2, 8) == (rest, b"last")
    assert split_field(rest, 1 << 3 | 2, 8) is None  # no such field
    assert split_field(data, 1 << 3 | 2, 3) is None  # more records than allowed
    assert split_field(data[:-1], 1 << 3 | 2, 8) is None  # not protobuf records
