from __future__ import annotations

import ast
import importlib.metadata
import math
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import modules

from despina.compiler.ir.builder import Builder
from despina.compiler.ir.codec import SCHEMA_VERSION, IRDecodeError, decode, encode, key_bytes
from despina.compiler.ir.core import Block, Function, IRError, Loc, Module, Op, SourceText
from despina.compiler.ir.filenames import short_names
from despina.compiler.ir.hashing import module_hash
from despina.compiler.ir.parser import parse_module
from despina.compiler.ir.printer import print_module
from despina.compiler.ir.types import PointerType, TileType, float32, int32
from despina.compiler.ir.verifier import MAX_ATTR_DEPTH, MAX_REGION_DEPTH, VerificationError, verify
from despina.proto import ir_pb2 as pb

ROOT = Path(__file__).resolve().parents[3]
# Must equal the command recorded at the top of proto/ir.proto.
GENERATE = (
    "mkdir -p build/proto && python -m grpc_tools.protoc -Idespina/proto=proto --python_out=build/proto proto/ir.proto"
    " && cp build/proto/despina/proto/ir_pb2.py proto/ir_pb2.py"
)
GRPC_TOOLS_VERSION = "1.63.0"
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


def sample(**attrs: Any) -> Module:
    body = Block([PointerType(float32), int32])
    b = Builder(body)
    b.loc = Loc("k.py", 7, 2)
    offs = b.value("arange", start=0, end=4)
    ptrs = b.value("addptr", [b.value("splat", [body.args[0]], shape=[4]), offs])
    lo = b.constant(0, int32)
    loop_body = Block([int32, TileType((4,), float32)])
    with b.at(loop_body):
        b.create("yield", [b.value("exp", [loop_body.args[1]])])
    b.loc = None
    loop = b.create("for", [lo, body.args[1], lo, b.value("load", [ptrs])], {"num_stages": 3}, [loop_body])
    b.create("store", [ptrs, loop.result])
    b.create("return")
    return Module([Function("k", body, ["x", "n"], [], True, Loc("k.py", 1, 0))], dict(attrs))


def test_round_trip() -> None:
    m = sample(num_warps=4)
    data = encode(m)
    back = decode(data)
    verify(back)
    assert print_module(back) == print_module(m)
    assert back.kernel.body.ops[0].loc == Loc("k.py", 7, 2) and back.kernel.loc == Loc("k.py", 1, 0)
    assert encode(back) == data == encode(m)


@pytest.mark.parametrize(
    "value",
    [
        0, -1, 2**63 - 1, -(2**63), 2**63, 2**64 - 1, 1.5, -0.0, math.inf, -math.inf, "", "é\n\"", True, False, None,
        float32, TileType((2, 2), PointerType(PointerType(int32), 3)), [], [1, [2.5, ["x", None]], int32],
    ],
)  # fmt: skip
def test_attribute_values(value: Any) -> None:
    back = decode(encode(sample(a=value))).attrs["a"]
    assert back == value and type(back) is type(value)
    if isinstance(value, float):
        assert math.copysign(1, back) == math.copysign(1, value)


def test_nan_and_tuples() -> None:
    attrs = decode(encode(sample(nan=math.nan, shape=(1, 2)))).attrs
    assert math.isnan(attrs["nan"]) and attrs["shape"] == [1, 2]


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        ({"a": 2**64}, "outside the int64/uint64 range"),
        ({"a": -(2**63) - 1}, "outside the int64/uint64 range"),
        ({"a": object()}, "has no wire form"),
        ({"a": "\ud800"}, "cannot be encoded"),
        ({"a": [[[[[[[[[1]]]]]]]]]}, "nest deeper"),
    ],
)
def test_encode_errors(attrs: dict[str, Any], message: str) -> None:
    with pytest.raises(IRError, match=message):
        encode(sample(**attrs))


def test_encode_rejects_a_use_before_definition_and_bad_locations() -> None:
    m = sample()
    m.kernel.body.ops.reverse()
    with pytest.raises(IRError, match="is used before it is defined"):
        encode(m)
    m = sample()
    m.kernel.loc = Loc("k.py", -1)
    with pytest.raises(IRError, match="cannot be encoded"):
        encode(m)


def all_ops(block: Block) -> list[Op]:
    return [x for op in block.ops for x in (op, *(y for r in op.regions for y in all_ops(r)))]


def relocated(m: Module, file: str) -> Module:
    """`m` with every function and op placed at a line of its own in `file`."""
    m.kernel.loc = Loc(file, 1, 0)
    for line, op in enumerate(all_ops(m.kernel.body), 2):
        op.loc = Loc(file, line, line % 5)
    return m


def test_locations_travel_in_one_table_and_reach_ops_in_regions() -> None:
    m = relocated(sample(), "/home/a/k.py")
    msg = message_of(m)
    assert list(msg.locations.files) == ["/home/a/k.py"]
    back = decode(msg.SerializeToString())
    assert [op.loc for op in all_ops(back.kernel.body)] == [op.loc for op in all_ops(m.kernel.body)]
    assert back.kernel.loc == Loc("/home/a/k.py", 1, 0)
    assert print_module(back) == print_module(m)


def test_key_bytes_name_files_as_the_ptx_does() -> None:
    one, two = encode(relocated(sample(), "/home/a/k.py")), encode(relocated(sample(), "/srv/ci/checkout/k.py"))
    assert one != two and key_bytes(one) == key_bytes(two)
    assert key_bytes(one) != key_bytes(encode(relocated(sample(answer=42), "/home/a/k.py")))
    assert key_bytes(one) != key_bytes(encode(relocated(sample(), "/home/a/other.py")))
    keyed = decode(key_bytes(one))
    assert keyed.kernel.loc == Loc("k.py", 1, 0) and print_module(keyed) == print_module(relocated(sample(), "k.py"))
    for garbage in (b"\xff\xff\xff\xff", encode(sample())[:-3], b"\x0b", b"\x22\x05ab"):
        with pytest.raises(IRDecodeError, match="not a serialized"):
            key_bytes(garbage)


def test_key_bytes_read_only_the_top_level() -> None:
    msg = pb.Module(schema_version=SCHEMA_VERSION)
    for _ in range(6000):
        msg.functions.add()
    with pytest.raises(IRDecodeError, match="more than 5124 functions and module attributes"):
        key_bytes(msg.SerializeToString())


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(modules())
def test_key_bytes_are_the_encoding_with_short_file_names(m: Module) -> None:
    data = encode(m)
    locs = [fn.loc for fn in m.functions] + [op.loc for fn in m.functions for op in all_ops(fn.body)]
    names = short_names(loc.file for loc in locs if loc is not None)
    for fn in m.functions:
        fn.loc = fn.loc and Loc(names[fn.loc.file], fn.loc.line, fn.loc.col)
        for op in all_ops(fn.body):
            op.loc = op.loc and Loc(names[op.loc.file], op.loc.line, op.loc.col)
    keyed = decode(key_bytes(data))
    assert keyed.source is None and print_module(keyed) == print_module(m)


def test_decode_rejects_bad_location_tables() -> None:
    msg = message_of(sample())
    del msg.locations.entries[-1]
    assert "holds 27 numbers, not four per item" in decode_error(msg)
    msg = message_of(sample())
    msg.locations.entries[4] = 0
    assert "not in increasing order (item 0 after 0)" in decode_error(msg)
    msg = message_of(sample())
    msg.locations.entries[1] = 7
    assert "names file 7; the table has 1" in decode_error(msg)


def message_of(m: Module) -> Any:
    return pb.Module.FromString(encode(m))


def decode_error(msg: Any) -> str:
    with pytest.raises(IRDecodeError) as info:
        decode(msg.SerializeToString() if not isinstance(msg, (bytes, str)) else msg)
    return str(info.value)


def test_decode_rejects_garbage_and_truncation() -> None:
    data = encode(sample())
    assert "not a serialized despina.ir.v1.Module" in decode_error(b"\xff\xff\xff\xff")
    assert "not a serialized" in decode_error(data[: len(data) // 2])
    assert "schema version 0" in decode_error(b"")
    assert "expected bytes, got str" in decode_error("module")
    assert print_module(decode(bytearray(data))) == print_module(decode(memoryview(data)))


def test_decode_rejects_other_schema_versions() -> None:
    msg = message_of(sample())
    msg.schema_version = SCHEMA_VERSION + 1
    assert f"schema version {SCHEMA_VERSION + 1} is not the supported version {SCHEMA_VERSION}" in decode_error(msg)


def test_decode_rejects_dangling_value_refs() -> None:
    msg = message_of(sample())
    ops = msg.functions[0].body.ops
    ops[1].operands[0] = 999
    assert "function 'k': op 'splat' operand 0 refers to value %999, which is not defined before it" in decode_error(
        msg
    )
    msg = message_of(sample())
    ops = msg.functions[0].body.ops
    ops[0].operands.append(3)  # arange using the result of the splat after it
    assert "op 'arange' operand 0 refers to value %3" in decode_error(msg)
    msg = message_of(sample())
    loop = next(op for op in msg.functions[0].body.ops if op.name == "for")
    loop.regions[0].ops[0].operands[0] = loop.regions[0].ops[0].operands[0] - 2  # the for's own result
    assert "op 'exp' operand 0 refers to value" in decode_error(msg)


def test_decode_rejects_bad_types_and_attributes() -> None:
    msg = message_of(sample())
    msg.functions[0].body.arg_types[0] = "ptr<fp33>"
    assert "bad type 'ptr<fp33>'" in decode_error(msg)
    msg.functions[0].body.arg_types[0] = "ptr<" * 200 + "fp32" + ">" * 200
    assert "type text longer than" in decode_error(msg)
    msg = message_of(sample(a=1))
    msg.attrs.add(name="a").value.int_value = 2
    assert "attribute 'a' is given twice" in decode_error(msg)
    msg = message_of(sample())
    msg.attrs.add(name="empty")
    assert "an attribute has no value" in decode_error(msg)
    msg = message_of(sample())
    value = msg.attrs.add(name="deep").value
    for _ in range(MAX_ATTR_DEPTH + 1):
        value = value.list_value.items.add()
    value.int_value = 1
    assert "attribute lists nest deeper" in decode_error(msg)


def test_decode_rejects_deep_regions() -> None:
    msg = message_of(sample())
    block = msg.functions[0].body
    for _ in range(MAX_REGION_DEPTH + 1):
        block = block.ops.add(name="if").regions.add()
    assert "nest deeper" in decode_error(msg) or "not a serialized" in decode_error(msg)


def test_decode_does_not_verify() -> None:
    m = sample()
    m.kernel.body.ops.insert(0, Op("frobnicate", [], []))
    back = decode(encode(m))
    assert back.kernel.body.ops[0].name == "frobnicate"
    with pytest.raises(VerificationError, match="unknown op"):
        verify(back)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(modules())
def test_encode_decode_round_trip(m: Module) -> None:
    data = encode(m)
    back = decode(data)
    assert print_module(back) == print_module(m)
    assert module_hash(back) == module_hash(m)
    assert encode(back) == data


def check_decoding(data: bytes) -> None:
    """Only IRDecodeError or VerificationError may come out of untrusted bytes."""
    try:
        m = decode(data)
    except IRDecodeError:
        return
    try:
        verify(m)
    except VerificationError:
        return
    text = print_module(m)
    assert print_module(parse_module(text)) == text


@FUZZ
@given(st.binary(max_size=512))
def test_random_bytes_fail_cleanly(data: bytes) -> None:
    check_decoding(data)
    check_decoding(b"\x08\x01" + data)  # schema version 1, then garbage


@FUZZ
@given(
    modules(max_ops=6),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4),
    st.integers(0, 10**6),
)
def test_mutated_encodings_fail_cleanly(m: Module, flips: list[tuple[int, int]], cut: int) -> None:
    data = bytearray(encode(m))
    check_decoding(bytes(data[: cut % (len(data) + 1)]))
    for where, byte in flips:
        data[where % len(data)] = byte
    check_decoding(bytes(data))


# ---- the generated module ------------------------------------------------------------------


def serialized_descriptor(source: str) -> bytes:
    m = re.search(r"AddSerializedFile\((b'.*?')\)\n", source)
    assert m is not None
    return bytes(ast.literal_eval(m.group(1)))


def test_generation_command_is_recorded() -> None:
    proto = (ROOT / "proto" / "ir.proto").read_text()
    assert f"//   {GENERATE}\n" in proto
    assert f"grpcio-tools {GRPC_TOOLS_VERSION} " in proto
    generated = (ROOT / "proto" / "ir_pb2.py").read_text()
    assert "ValidateProtobufRuntimeVersion" not in generated  # loads on protobuf 5.26 and later


def test_regenerating_ir_pb2_is_a_no_op(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools.protoc")
    steps = [shlex.split(step) for step in GENERATE.split("&&")]
    protoc = next(s for s in steps if s[:3] == ["python", "-m", "grpc_tools.protoc"])
    args = [a if not a.startswith("--python_out=") else f"--python_out={tmp_path}" for a in protoc[1:]]
    subprocess.run([sys.executable, *args], cwd=ROOT, check=True, capture_output=True)
    generated = (tmp_path / "despina" / "proto" / "ir_pb2.py").read_text()
    checked_in = (ROOT / "proto" / "ir_pb2.py").read_text()
    if importlib.metadata.version("grpcio-tools") == GRPC_TOOLS_VERSION:
        assert generated == checked_in
    else:  # another protoc writes other wrapper code around the same descriptor
        assert serialized_descriptor(generated) == serialized_descriptor(checked_in)


def test_the_source_text_travels_beside_the_locations_and_stays_out_of_the_key() -> None:
    """The key holds the line table with each file as the PTX names it, and no source text."""
    m = relocated(sample(), "/home/a/k.py")
    m.source = SourceText("/home/a/k.py", 3, ("@despina.jit", "def k(x, n):", "    pass"))
    back = decode(encode(m))
    assert back.source == m.source and decode(encode(sample())).source is None
    moved = relocated(sample(), "/srv/b/k.py")
    moved.source = SourceText("/srv/b/k.py", 9, ("# another checkout, another text",))
    assert encode(m) != encode(moved) and key_bytes(encode(m)) == key_bytes(encode(moved))
    assert key_bytes(encode(m)) != key_bytes(encode(sample()))  # other lines: other .loc lines in the PTX
    msg = message_of(m)
    msg.source.file = 4
    assert "the source text names file 4; the location table has 1" in decode_error(msg)
