from __future__ import annotations

import math
import pickle
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mutations import MUTATIONS, mutate
from strategies import modules

from despina.compiler.ir.core import IRError, Loc, Module
from despina.compiler.ir.parser import IRParseError, parse_module
from despina.compiler.ir.printer import print_module
from despina.compiler.ir.types import PointerType, TileType, float16, float32, int32
from despina.compiler.ir.verifier import MAX_ATTR_DEPTH, MAX_REGION_DEPTH, VerificationError, verify

SLOW = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))

KERNEL = """\
module {num_warps = 4, version = 1} {
func @helper(%0: fp32) -> (fp32) {names = ["a"]} {
  %1 = exp(%0) : fp32
  return(%1)
}
func @add_kernel(%2: ptr<fp32>, %3: int32) kernel {names = ["x_ptr", "n"]} loc("k.py":3:0) {
  %4 = program_id() {axis = 0} : int32 loc("k.py":4:10)
  %5 = arange() {end = 8, start = 0} : tile<8xint32>
  %6 = splat(%2) {shape = [8]} : tile<8xptr<fp32>>
  %7 = addptr(%6, %5) : tile<8xptr<fp32>>
  %8 = load(%7) : tile<8xfp32>
  %9 = constant() {type = type(int32), value = 0} : int32
  %10 = constant() {type = type(fp32), value = float(-inf)} : fp32
  %11, %12 = for(%9, %3, %4, %10, %8) {num_stages = 2} (
    {
    ^(%13: int32, %14: fp32, %15: tile<8xfp32>):
      %16 = call(%14) {callee = "helper", results = [type(fp32)]} : fp32
      yield(%16, %15)
    }
  ) : fp32, tile<8xfp32> loc("k.py":6:4)
  %17 = reduce(%12) {axis = 0} (
    {
    ^(%18: fp32, %19: fp32):
      %20 = maximum(%18, %19) {propagate_nan = "all"} : fp32
      yield(%20)
    }
  ) : fp32
  store(%7, %12) {cache = "", evict = none}
  device_print(%11, %17) {hex = false, prefix = "caf\\u00e9 \\"q\\"\\n"}
  return()
}
}
"""


def test_round_trip_of_a_kernel() -> None:
    m = parse_module(KERNEL)
    verify(m)
    assert print_module(m) == KERNEL
    assert [f.name for f in m.functions] == ["helper", "add_kernel"]
    assert m.attrs == {"num_warps": 4} and m.version == 1
    kernel = m.kernel
    assert kernel.arg_names == ["x_ptr", "n"] and kernel.loc == Loc("k.py", 3, 0)
    assert [a.type for a in kernel.args] == [PointerType(float32), int32]
    loop = kernel.body.ops[7]
    assert loop.name == "for" and loop.attrs == {"num_stages": 2} and loop.loc == Loc("k.py", 6, 4)
    assert [r.type for r in loop.results] == [float32, TileType((8,), float32)]
    assert loop.regions[0].ops[0].operands[0] is loop.regions[0].args[1]
    assert kernel.body.ops[-2].attrs["prefix"] == 'café "q"\n'


def test_locations_are_optional() -> None:
    m = parse_module(KERNEL)
    bare = print_module(m, locs=False)
    assert "loc(" not in bare
    again = parse_module(bare)
    assert print_module(again, locs=False) == bare
    assert all(op.loc is None for f in again.functions for op in f.walk())


@SLOW
@given(modules())
def test_print_parse_print_is_identity(m: Module) -> None:
    for locs in (True, False):
        text = print_module(m, locs=locs)
        parsed = parse_module(text)
        assert print_module(parsed, locs=locs) == text
    verify(parse_module(print_module(m)))


ATTR_MODULE = "module {{a = {}, version = 1}} {{\n}}\n"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("-12", -12),
        ("18446744073709551615", 2**64 - 1),
        ("1.5", 1.5),
        ("-0.0", -0.0),
        ("1e-05", 1e-05),
        ("float(inf)", math.inf),
        ("float(-inf)", -math.inf),
        ("float(0x1.8000000000000p+1)", 3.0),
        ('"tab\\tquote\\"\\u00e9"', 'tab\tquote"é'),
        ("true", True),
        ("false", False),
        ("none", None),
        ("type(tile<2x4xptr<fp16>>)", TileType((2, 4), PointerType(float16))),
        ('[1, [2.5, "s"], [], type(int32)]', [1, [2.5, "s"], [], int32]),
    ],
)
def test_attribute_values(text: str, value: Any) -> None:
    parsed = parse_module(ATTR_MODULE.format(text)).attrs["a"]
    assert parsed == value and type(parsed) is type(value)
    if isinstance(value, float):
        assert math.copysign(1, parsed) == math.copysign(1, value)


def test_nan_attribute() -> None:
    assert math.isnan(parse_module(ATTR_MODULE.format("float(nan)")).attrs["a"])


def error_of(text: str) -> IRParseError:
    with pytest.raises(IRParseError) as info:
        parse_module(text)
    assert isinstance(info.value, IRError)
    return info.value


def test_error_names_line_column_and_what_was_expected() -> None:
    text = KERNEL.replace("%5 = arange() {end = 8, start = 0}", "%5 = arange() {end = 8, start 0}")
    e = error_of(text)
    assert (e.line, e.col) == (8, 33)
    assert str(e).startswith("8:33: expected '='")
    copy = pickle.loads(pickle.dumps(e))
    assert (str(copy), copy.line, copy.col) == (str(e), 8, 33)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("%1 = exp(%0) : fp32", "%1 = exp(%0) : fp64", "'exp' has result types (fp32) by its type rule, not (fp64)"),
        ("%1 = exp(%0) : fp32", "%1 = exp(%0)", "'exp' has result types (fp32) by its type rule, not ()"),
        ("%1 = exp(%0) : fp32", "%1 = frobnicate(%0) : fp32", "unknown op 'frobnicate'"),
        ("%1 = exp(%0) : fp32", "%1 = exp(%7) : fp32", "value %7 is not defined before this use"),
        ("%1 = exp(%0) : fp32", "%1 = exp(%1) : fp32", "value %1 is not defined before this use"),
        ("%1 = exp(%0) : fp32", "%0 = exp(%0) : fp32", "value %0 is defined twice"),
        ("%1 = exp(%0) : fp32", "%1, %99 = exp(%0) : fp32", "'exp' has 1 results, but 2 are named"),
        ("%1 = exp(%0) : fp32", "%1 = exp(%0) : flt32", "bad type 'flt32'"),
        ("%1 = exp(%0) : fp32", "%1 = exp(%0) : tile<4xfp32", "unterminated or overlong type"),
        ("%1 = exp(%0) : fp32", "%1 = exp(%0) : tile<0xfp32>", "bad type 'tile<0xfp32>'"),
        ("%1 = exp(%0) : fp32", "%1 = exp(%0) # : fp32", "unexpected character '#'"),
        ("{axis = 0}", "{axis = 0, axis = 1}", "attribute 'axis' is given twice"),
        ("{axis = 0}", "{axis = 7}", "'program_id' axis must be 0, 1 or 2"),
        ("{axis = 0}", "{axis = float(0xzz)}", "expected a hexadecimal float"),
        ("{axis = 0}", "{axis = 1" + "0" * 5000 + "}", "is too long"),
        ("{axis = 0}", '{axis = "\\x"}', "bad string literal"),
        ("{axis = 0}", "{axis = )}", "expected an attribute value"),
        ("{shape = [8]}", "{shape = []}", "attribute 'shape' must be a non-empty list"),
        ('loc("k.py":4:10)', 'loc("k.py":-4:10)', "expected a line or column number"),
        ('loc("k.py":4:10)', "loc(k.py:4:10)", "expected a quoted file name"),
        ('{names = ["x_ptr", "n"]}', '{names = "x_ptr"}', "a function's attributes are exactly"),
        ("{num_warps = 4, version = 1}", "{num_warps = 4}", "integer 'version'"),
        ("func @helper", "func helper", "expected a function name like @kernel"),
        ("yield(%16, %15)", "yield(%16, %15, %17)", "value %17 is not defined before this use"),
        ("%17 = reduce(%12)", "%17 = reduce(%16)", "value %16 is not in scope here"),
        ("^(%18: fp32, %19: fp32):", "^(%18: fp32, %19: fp32)", "expected ':' after the region's arguments"),
        ("%2: ptr<fp32>, %3: int32", "%2: ptr<fp32> %3: int32", "expected ',' or ')'"),
    ],
)
def test_errors(old: str, new: str, message: str) -> None:
    assert old in KERNEL
    assert message in str(error_of(KERNEL.replace(old, new, 1)))


def test_an_escaping_region_value_is_out_of_scope() -> None:
    text = KERNEL.replace("%17 = reduce(%12)", "%17 = reduce(%15)")
    assert "value %15 is not in scope here" in str(error_of(text))


def test_values_of_another_function_are_out_of_scope() -> None:
    text = KERNEL.replace("%8 = load(%7)", "%8 = load(%7, %1)")
    assert "value %1 is not in scope here" in str(error_of(text))


def test_trailing_text_and_truncation() -> None:
    assert "expected the end of the text" in str(error_of(KERNEL + "module"))
    assert "expected an op or '}', found the end of the text" in str(error_of(KERNEL[: KERNEL.index("  store(")]))
    assert "expected 'module'" in str(error_of(""))
    raw: Any = b"module"
    assert "expected text" in str(error_of(raw))


def test_nesting_limits() -> None:
    deep = "module {a = " + "[" * (MAX_ATTR_DEPTH + 1) + "]" * (MAX_ATTR_DEPTH + 1) + ", version = 1} {\n}\n"
    assert "attribute lists nest deeper" in str(error_of(deep))
    ok = "module {a = " + "[" * MAX_ATTR_DEPTH + "]" * MAX_ATTR_DEPTH + ", version = 1} {\n}\n"
    assert parse_module(ok).attrs["a"] is not None
    regions = "".join(
        f"%c{i} = constant() {{type = type(int1), value = true}} : int1\nif(%c{i}) ({{\n^():\n"
        for i in range(MAX_REGION_DEPTH + 1)
    )
    closes = "yield()\n}, {\n^():\nyield()\n})\n" * (MAX_REGION_DEPTH + 1)
    text = "module {version = 1} {\nfunc @k() kernel {names = []} {\n" + regions + closes + "return()\n}\n}\n"
    assert "regions nest deeper" in str(error_of(text))
    assert "type text" not in str(error_of(ATTR_MODULE.format("type(" + "ptr<" * 300 + "fp32" + ">" * 300 + ")")))


@SLOW
@given(modules(max_ops=6), st.lists(MUTATIONS, min_size=1, max_size=3))
def test_mutated_text_fails_cleanly(m: Module, mutations: list[tuple[str, int, str]]) -> None:
    text = mutate(print_module(m), mutations)
    try:
        parsed = parse_module(text)
    except IRParseError:
        return
    try:
        verify(parsed)
    except VerificationError:
        return
    assert print_module(parse_module(print_module(parsed))) == print_module(parsed)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_random_text_fails_cleanly(text: str) -> None:
    with pytest.raises(IRParseError):
        parse_module(text)
