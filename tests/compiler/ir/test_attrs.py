"""Op attribute schemas: what they accept, and that the text and wire forms keep every value they allow."""

from __future__ import annotations

from typing import Any

import pytest

from despina.compiler.ir.attrs import KINDS, Attr, attrs_error, enum, optional, required
from despina.compiler.ir.codec import decode, encode
from despina.compiler.ir.core import Block, Function, Module, Op
from despina.compiler.ir.ops import OPS
from despina.compiler.ir.parser import parse_module
from despina.compiler.ir.printer import print_module
from despina.compiler.ir.types import PointerType, TileType, float32, int32

SAMPLES: dict[str, list[Any]] = {
    "int": [0, -3, 2**63 + 5],
    "float": [0.5, -1e30],
    "bool": [True, False],
    "str": ["", "x"],
    "none": [None],
    "type": [float32, PointerType(int32), TileType((4, 2), float32)],
    "ints": [[], [1, 2]],
    "types": [[], [float32, TileType((8,), int32)]],
}


def allowed_values(spec: Attr) -> list[Any]:
    values = [v for kind in spec.kinds if kind != "str" for v in SAMPLES[kind]]
    return values + (list(spec.choices) if spec.choices else SAMPLES["str"] if "str" in spec.kinds else [])


def test_samples_cover_every_kind() -> None:
    assert set(SAMPLES) == set(KINDS)


@pytest.mark.parametrize("op", sorted(OPS))
def test_text_and_wire_forms_keep_every_value_the_schema_allows(op: str) -> None:
    """The printer/parser and the protobuf codec must give back each value unchanged and still
    acceptable to the schema (an int must not come back a float, a type not as its text)."""
    attrs = {f"{key}_{i}": value for key, spec in OPS[op].attrs.items() for i, value in enumerate(allowed_values(spec))}
    body = Block()
    body.ops.append(Op("return", [], []))
    module = Module([Function("k", body, [], [], True)], attrs)
    for back in (parse_module(print_module(module)).attrs, decode(encode(module)).attrs):
        assert back == attrs
        for name, value in back.items():
            key = name.rsplit("_", 1)[0]
            assert type(value) is type(attrs[name]), name
            assert OPS[op].attrs[key].error(value) is None, (name, value)


def test_errors_name_the_attribute_and_what_it_may_hold() -> None:
    schema = {"mode": enum("none", "all"), "axis": required("int"), "n": optional("int", "none")}
    assert attrs_error(schema, {"axis": 0}) is None
    assert attrs_error(schema, {"axis": 0, "n": None, "mode": "all"}) is None
    assert attrs_error(schema, {}) == "missing attribute 'axis'"
    assert attrs_error(schema, {"axis": True}) == "attribute 'axis' must be int, got True"
    assert attrs_error(schema, {"axis": 0, "mode": False}) == "attribute 'mode' must be str, got False"
    assert attrs_error(schema, {"axis": 0, "mode": "ALL"}) == "attribute 'mode' must be one of 'none', 'all', got 'ALL'"
    assert attrs_error(schema, {"axis": 0, "x": 1}) == "unknown attribute 'x' (allowed: mode, axis, n)"


def test_an_unknown_kind_is_refused_when_the_schema_is_written() -> None:
    with pytest.raises(ValueError, match="attribute kinds must be among"):
        Attr(("integer",))
