"""The cache key of a request's IR, hashed in pieces (`key_pieces`) so that a large IR is never copied, is the
key of `codec.key_bytes`, which joins them: for a module with locations and source, its records repeated, as
a view of a larger message (what a large gRPC request gives), and refused with the same errors."""

from __future__ import annotations

import pytest

from despina.compiler.ir.codec import IRDecodeError, encode, key_bytes
from despina.compiler.ir.core import SourceText
from despina.compiler.options import DEFAULTS
from despina.proto import ir_pb2
from despina.server.keys import compile_key, key_pieces

from .faults.attack import decode_bomb
from .kernels import vector_add


def key(ir: bytes | memoryview | list[bytes | memoryview]) -> str:
    return compile_key(ir if isinstance(ir, list) else key_bytes(bytes(ir)), "sm_90", DEFAULTS, {"a": "1"}, "tools")


def test_the_key_of_the_pieces_is_the_key_of_the_joined_bytes() -> None:
    traced = vector_add(file="/home/a/k.py", salt="x")
    traced.source = SourceText("/home/a/k.py", 1, ("def k():", "    pass"))
    plain, located = encode(vector_add(salt="x")), encode(traced)
    assert key(located) == key(encode(vector_add(file="/srv/ci/k.py", salt="x")))  # only the file's short name counts
    twice = located + located  # records again: protobuf would merge them; the key keeps each
    bomb = decode_bomb(300_000, salt=3)
    for ir in (plain, located, twice, bomb, b"", encode(vector_add(salt="y")) + b"\x78\x05"):  # an unknown field
        pieces = key_pieces(ir)
        assert b"".join(pieces) == key_bytes(ir)
        assert key(pieces) == key(ir)
    request = b"\x0a\x03abc" + bomb + b"\x12\x02xy"  # the IR as a view into the request that carries it
    view = memoryview(request)[5 : 5 + len(bomb)]
    pieces = key_pieces(view)
    assert key(pieces) == key(bomb)
    assert any(isinstance(p, memoryview) and p.obj is request and len(p) > 500_000 for p in pieces)  # not copied


def test_what_key_bytes_refuses_the_pieces_refuse_alike() -> None:
    many = ir_pb2.Module(schema_version=2)
    for _ in range(6000):
        many.functions.add()
    bad_locations = ir_pb2.Module.DESCRIPTOR.fields_by_name["locations"].number << 3 | 2
    for garbage in (b"\xff\xff\xff\xff", encode(vector_add())[:-3], b"\x0b", b"\x22\x05ab", many.SerializeToString(),
                    bytes([bad_locations, 3, 0xFF, 0xFF, 0xFF])):
        with pytest.raises(IRDecodeError) as joined:
            key_bytes(garbage)
        with pytest.raises(IRDecodeError) as pieces:
            key_pieces(memoryview(garbage))
        assert str(pieces.value) == str(joined.value)
