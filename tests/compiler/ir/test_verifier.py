from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import attr_values, modules, types
from verifier_kit import BAD, POINTER_TO_TILE, PTR, const, fails, helper, kernel, region, yield_

from despina.compiler.ir import verifier
from despina.compiler.ir.builder import Builder
from despina.compiler.ir.core import IR_VERSION, Block, Loc, Module, Op, SourceText, Value
from despina.compiler.ir.ops import OPS
from despina.compiler.ir.types import PointerType, ScalarType, TileType, Type, float32, int1, int8, int32, int64
from despina.compiler.ir.verifier import MAX_REGION_DEPTH, MAX_TILE_NUMEL, VerificationError, verify

# ---- valid modules ------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(modules())
def test_generated_modules_verify(m: Module) -> None:
    verify(m)


def test_region_may_use_enclosing_values_and_calls_a_helper() -> None:
    def build(b: Builder, args: list[Value]) -> None:
        x = const(b, 2.0, float32)
        lo, hi = const(b, 0), const(b, 4)
        body = region(
            b, [int32, float32], lambda b, a: b.create("yield", [b.value("call", [x], callee="h", results=[float32])])
        )
        b.create("for", [lo, hi, lo, x], regions=[body])

    verify(kernel(build, helpers=[helper()]))


# ---- module and function level ------------------------------------------------------------


def test_not_a_module() -> None:
    fails("module", "expected a Module, got str")


@pytest.mark.parametrize("version", [IR_VERSION + 1, 0, True, "1"])
def test_version(version: Any) -> None:
    m = kernel()
    m.version = version
    fails(m, "module: IR version", "is not the supported version")


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        ({"version": 1}, "'version' is reserved"),
        ({"a b": 1}, "module attribute name 'a b' is not an identifier"),
        ({1: 1}, "module attribute name 1 is not an identifier"),
        ({"a": object()}, "object is not an attribute kind"),
        ({"a": 2**64}, "integer outside the int64/uint64 range"),
        ({"a": -(2**63) - 1}, "integer outside the int64/uint64 range"),
        ({"a": "\ud800"}, "lone surrogate"),
        ({"a": "x" * (verifier.MAX_STRING + 1)}, "string longer than"),
        ({"a": [[[[[[[[[1]]]]]]]]]}, "list nested deeper"),
        ({"a": list(range(verifier.MAX_ATTR_LIST + 1))}, "list nested deeper than 8 or longer"),
        ({"a": [1, PointerType(POINTER_TO_TILE)]}, "is not a scalar, pointer or tile type"),
        ({"a": TileType((2048, 1024), float32)}, "holds more than"),
    ],
)
def test_module_attributes(attrs: dict[Any, Any], message: str) -> None:
    m = kernel()
    m.attrs = attrs
    fails(m, message)


def test_valid_module_attributes() -> None:
    m = kernel()
    m.attrs = {"a": [None, True, 2**64 - 1, -(2**63), 1.5, "é", float32, (1, 2)]}
    verify(m)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (SourceText("k.py", 0, ("x",)), "first line must be an integer in [1, "),
        (SourceText("k.py", 1, ("x",) * (verifier.MAX_SOURCE_LINES + 1)), "lines; at most 4096"),
        (SourceText("k.py", 1, ("x" * (verifier.MAX_SOURCE_BYTES + 1),)), "bytes; at most 262144"),
        (SourceText("k.py", 1, ("a\nb",)), "holds a line break"),
        (SourceText("k.py", 1, ("\ud800",)), "lone surrogate"),
        (SourceText("k.py", 1, ["x"]), "is not a SourceText"),  # type: ignore[arg-type]
        (SourceText("x" * (verifier.MAX_STRING + 1), 1, ()), "string longer than"),
        ("text", "str is not a SourceText"),
    ],
)
def test_source_text_bounds(source: Any, message: str) -> None:
    m = kernel()
    m.source = source
    fails(m, message)
    m.source = SourceText("k.py", 3, ("@despina.jit", "def k(x):", "    pass"))
    verify(m)


def test_function_count() -> None:
    fails(Module([]), "1 to")
    m = kernel(helpers=[helper("h1"), helper("h2")])
    verifier_limit = verifier.MAX_FUNCTIONS
    try:
        verifier.MAX_FUNCTIONS = 2
        fails(m, "a module holds 1 to 2 functions")
    finally:
        verifier.MAX_FUNCTIONS = verifier_limit


def test_exactly_one_kernel() -> None:
    fails(Module([helper()]), "exactly one kernel function, found 0")
    h = helper()
    h.kernel = True
    h.result_types = []
    h.body.ops[0].operands = []
    fails(kernel(helpers=[h]), "exactly one kernel function, found 2: ['h', 'k']")


def test_function_names() -> None:
    fails(kernel(helpers=[helper("k")]), "two functions are named 'k'")
    for name in ("a b", "", "a.b", "_", "1k", "k" * 1025):
        fails(kernel(helpers=[helper(name)]), f"function name {name[:80]!r} cannot be a GPU symbol")
    for name in ("WARP_SZ", "vprintf", "global_smem", "__nv_expf", "__despina_assert"):
        fails(kernel(helpers=[helper(name)]), f"function name {name!r} is taken by PTX, libdevice")


def test_function_signature() -> None:
    m = kernel()
    m.functions[0].arg_names = ["only_one"]
    fails(m, "function 'k': arg_names must name each of the 2 arguments")
    m.functions[0].arg_names = ["a", BAD]
    fails(m, "arg_names must name each")
    m = kernel()
    m.functions[0].kernel = BAD
    fails(m, "'kernel' must be a bool")
    m = kernel()
    m.functions[0].body = BAD
    fails(m, "the body is not a Block")
    m = kernel()
    m.functions[0].loc = Loc("k.py", -1)
    fails(m, "location line/column must be integers")
    fails(
        kernel(helpers=[helper(result_types=(TileType((2**21,), float32),))]),
        "function 'h': result type: tile<2097152xfp32> holds more than",
    )


def test_kernel_returns_nothing() -> None:
    m = kernel(lambda b, a: b.create("return", [a[1]]))
    m.functions[0].result_types = [int32]
    fails(m, "the kernel returns nothing")


# ---- ops -------------------------------------------------------------------------------------


def test_unknown_op() -> None:
    m = kernel(lambda b, a: b.block.ops.append(Op("frobnicate", [], [])))
    fails(m, "function 'k', op 'frobnicate' (op 0): unknown op")


def test_result_types_must_match_the_type_rule() -> None:
    m = kernel(lambda b, a: b.block.ops.append(Op("add", [a[1], a[1]], [int64])))
    fails(m, "op 'add' (op 0): result types (int64) differ from the type rule's (int32)")
    m = kernel(lambda b, a: b.block.ops.append(Op("add", [a[1], a[1]], [int32, int32])))
    fails(m, "result types (int32, int32) differ from the type rule's (int32)")
    m = kernel(lambda b, a: b.block.ops.append(Op("add", [a[1], a[0]], [int32])))
    fails(m, "'add' needs operands of one type")


def test_type_rule_failures_on_hostile_attributes_are_verification_errors() -> None:
    m = kernel(lambda b, a: b.block.ops.append(Op("splat", [a[1]], [int32], {"shape": []})))
    fails(m, "op 'splat' (op 0): attribute 'shape' must be a non-empty list of positive integers")


def test_unknown_attribute() -> None:
    m = kernel(lambda b, a: b.block.ops.append(Op("load", [a[0]], [float32], {"axis": 0})))
    fails(m, "op 'load' (op 0): unknown attribute 'axis' (allowed: cache, evict, volatile)")
    m = kernel(lambda b, a: b.block.ops.append(Op("add", [a[1], a[1]], [int32], {"x": 0})))
    fails(m, "unknown attribute 'x' (allowed: none)")


@pytest.mark.parametrize(
    ("name", "operands", "attrs", "message"),
    [
        ("program_id", [], {"axis": True}, "attribute 'axis' must be int, got True"),
        ("splat", [1], {"shape": "8"}, "attribute 'shape' must be ints"),
        ("splat", [1], {"shape": [8.0]}, "attribute 'shape' must be ints"),
        ("cmp", [1, 1], {"pred": 3}, "attribute 'pred' must be str"),
        ("cast", [1], {"to": "fp32"}, "attribute 'to' must be type"),
        ("call", [], {"callee": 3, "results": []}, "attribute 'callee' must be str"),
        ("call", [], {"callee": "h", "results": [1]}, "attribute 'results' must be types"),
        ("load", [0], {"volatile": 1}, "attribute 'volatile' must be bool"),
        ("load", [0], {"cache": 1}, "attribute 'cache' must be str or none"),
        ("constant", [], {"value": "1", "type": int32}, "attribute 'value' must be bool or int or float"),
        ("constant", [], {"value": 2**70, "type": int32}, "attribute 'value': integer outside the int64/uint64 range"),
        ("constant", [], {"value": 1, "type": object()}, "attribute 'type': object is not an attribute kind"),
    ],
)
def test_attribute_kinds(name: str, operands: list[int], attrs: dict[str, Any], message: str) -> None:
    m = kernel(lambda b, a: b.block.ops.append(Op(name, [a[i] for i in operands], [], attrs)))
    fails(m, f"op '{name}' (op 0): {message}")


@pytest.mark.parametrize(
    ("name", "operands", "attrs", "message"),
    [
        ("maximum", [2, 2], {"propagate_nan": True}, "attribute 'propagate_nan' must be str, got True"),
        ("maximum", [2, 2], {"propagate_nan": "ALL"}, "attribute 'propagate_nan' must be one of 'none', 'all', got 'ALL'"),
        ("cmp", [1, 1], {"pred": "lte"}, "attribute 'pred' must be one of 'eq', 'ne', 'lt', 'le', 'gt', 'ge', got 'lte'"),
        ("cmp", [1, 1], {}, "missing attribute 'pred'"),
        ("atomic_cas", [0, 2, 2], {"sem": "acq_rel"}, "missing attribute 'scope'"),
        ("load", [0], {"evict": "evict_sometimes"}, "attribute 'evict' must be one of"),
        ("cast", [1], {"to": float32, "rounding": "rtn"}, "attribute 'rounding' must be one of 'rtne', 'rtz', got 'rtn'"),
    ],
)
def test_attribute_values(name: str, operands: list[int], attrs: dict[str, Any], message: str) -> None:
    m = kernel(lambda b, a: b.block.ops.append(Op(name, [a[i] for i in operands], [], attrs)), (PTR, int32, float32))
    fails(m, f"op '{name}' (op 0): {message}")


@pytest.mark.parametrize("mode", ["none", "all"])
def test_float_maximum_with_either_nan_mode_verifies(mode: str) -> None:
    """What `tl.maximum(x, y, propagate_nan=...)` writes: refused by the daemon once ('must be bool')."""
    verify(kernel(lambda b, a: b.value("maximum", [a[2], a[2]], propagate_nan=mode), (PTR, int32, float32)))


@pytest.mark.parametrize(
    ("value", "ty", "message"),
    [
        (300, int8, "constant 300 does not fit in int8"),
        (-129, int8, "does not fit"),
        (2**32, ScalarType("uint32"), "does not fit"),
        (1.5, int32, "needs an integer value"),
        (True, int32, "needs an integer value"),
        (True, float32, "needs a number"),
        (2, int1, "does not fit"),
    ],
)
def test_constant_values(value: Any, ty: Type, message: str) -> None:
    fails(kernel(lambda b, a: const(b, value, ty)), message)


@pytest.mark.parametrize(
    ("value", "ty"),
    [(True, int1), (-1, int1), (255, ScalarType("uint8")), (-128, int8), (3, float32), (1.5, TileType((2,), float32))],
)
def test_constant_values_in_range(value: Any, ty: Type) -> None:
    verify(kernel(lambda b, a: const(b, value, ty)))


def test_rule_limits_like_program_id_axis() -> None:
    m = kernel(lambda b, a: b.block.ops.append(Op("program_id", [], [int32], {"axis": 3})))
    fails(m, "'program_id' axis must be 0, 1 or 2, got 3")


def test_op_location() -> None:
    def build(b: Builder, a: list[Value]) -> None:
        b.loc = Loc("k.py", 2**32)
        const(b)

    fails(kernel(build), "op 'constant' (op 0) at k.py:4294967296:0: location line/column")


def test_op_region_count() -> None:
    m = kernel(lambda b, a: b.block.ops.append(Op("add", [a[1], a[1]], [int32], regions=[Block()])))
    fails(m, "op 'add' (op 0): takes 0 regions, got 1")
    m = kernel(lambda b, a: b.block.ops.append(Op("for", [a[1], a[1], a[1]], [])))
    fails(m, "takes 1 regions, got 0")


# ---- limits ----------------------------------------------------------------------------------


def nested_ifs(depth: int) -> Module:
    def fill(b: Builder, level: int) -> None:
        if level < depth:
            c = const(b, True, int1)
            b.create("if", [c], regions=[region(b, [], lambda b, _: fill(b, level + 1)), region(b, [], yield_())])
        b.create("yield") if level else b.create("return")

    return kernel(lambda b, a: fill(b, 0))


def test_nesting_depth() -> None:
    verify(nested_ifs(MAX_REGION_DEPTH))
    fails(nested_ifs(MAX_REGION_DEPTH + 1), f"regions nest deeper than {MAX_REGION_DEPTH}")


def test_op_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verifier, "MAX_OPS", 3)
    verify(kernel(lambda b, a: [const(b) for _ in range(2)]))
    fails(kernel(lambda b, a: [const(b) for _ in range(3)]), "op 'return' (op 3): the module holds more than 3 ops")


def test_operand_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verifier, "MAX_OPERANDS", 2)
    fails(kernel(lambda b, a: b.create("device_print", [a[1]] * 3)), "operands must be a list of at most 2 values")
    fails(kernel(arg_types=[int32] * 3), "the function body has more than 2 arguments")


def test_tile_size() -> None:
    verify(kernel(lambda b, a: b.value("splat", [a[1]], shape=[1024, 1024])))
    fails(
        kernel(lambda b, a: b.value("splat", [a[1]], shape=[2048, 1024])),
        f"tile<2048x1024xint32> holds more than {MAX_TILE_NUMEL} elements",
    )
    fails(kernel(lambda b, a: b.value("arange", start=0, end=2**40)), "holds more than")
    fails(kernel(lambda b, a: b.value("splat", [a[1]], shape=[1] * 9)), "must have 1 to 8 dimensions")


def test_tile_types_name_no_layout() -> None:
    """Layouts are the backend's (GPU IR); a tile IR module that names one is refused."""

    def build(b: Builder, a: list[Value]) -> None:
        tile = b.value("splat", [a[1]], shape=[64])
        tile.type = TileType((64,), int32, "blocked<spt=[1]>")

    fails(kernel(build), "tile<64xint32, blocked<spt=[1]>> names a layout: layouts exist only in the GPU IR")


def test_pointer_types() -> None:
    fails(kernel(arg_types=[PointerType(PointerType(PointerType(PointerType(PTR))))]), "pointers nest deeper than 4")
    fails(kernel(arg_types=[PointerType(float32, 256)]), "address space 256 is not in [0, 255]")
    fails(kernel(arg_types=[PointerType(POINTER_TO_TILE)]), "is not a scalar, pointer or tile type")
    verify(kernel(arg_types=[PointerType(float32, 3), PointerType(PTR)]))


def test_error_path_names_nested_ops() -> None:
    def build(b: Builder, a: list[Value]) -> None:
        b.loc = Loc("user.py", 12, 5)
        lo = const(b)

        def fill(b: Builder, args: list[Value]) -> None:
            b.block.ops.append(Op("add", [args[0], args[0]], [int64], loc=Loc("user.py", 13, 9)))
            b.create("yield")

        b.create("for", [lo, lo, lo], regions=[region(b, [int32], fill)])

    message = fails(kernel(build))
    assert message == (
        "function 'k', op 'add' (op 1 > region 0 > op 0) at user.py:13:9: "
        "result types (int64) differ from the type rule's (int32)"
    )


# ---- hostile ops -----------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(sorted(OPS)),
    st.lists(types(), max_size=4),
    st.lists(st.integers(0, 3), max_size=4),
    st.dictionaries(st.sampled_from(sorted({a for d in OPS.values() for a in d.attrs}) + ["x"]), attr_values(2), max_size=4),
    st.lists(types(), max_size=2),
    st.integers(0, 2),
)
def test_hostile_ops_fail_cleanly(
    name: str, arg_types: list[Type], picks: list[int], attrs: dict[str, Any], result_types: list[Type], n_regions: int
) -> None:
    def build(b: Builder, args: list[Value]) -> None:
        operands = [args[i % len(args)] for i in picks] if args else []
        regions = [region(b, [], yield_()) for _ in range(n_regions)]
        b.block.ops.append(Op(name, operands, result_types, attrs, regions))

    try:
        verify(kernel(build, arg_types=arg_types))
    except VerificationError:
        pass


# ---- objects of the wrong kind -----------------------------------------------------------


def test_objects_of_the_wrong_kind() -> None:
    fails(Module([BAD]), "module: 1 is not a Function")
    m = kernel(helpers=[helper()])
    m.functions[0].result_types = BAD
    fails(m, "function 'h': result_types must be a list of types")
    m = kernel(lambda b, a: b.create("return") and b.block.ops.insert(0, BAD))
    fails(m, "function 'k' (op 0): 1 is not an Op")
    m = kernel(lambda b, a: const(b))
    m.kernel.body.ops[0].attrs = BAD
    fails(m, "op 'constant' (op 0): attributes must be a dict")
    m = kernel(lambda b, a: b.block.ops.append(Op("for", [a[1], a[1], a[1]], [], regions=[BAD])))
    fails(m, "function 'k' (op 0 > region 0): the region is not a Block")


def test_result_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verifier, "MAX_OPERANDS", 1)
    fails(
        kernel(lambda b, a: b.create("split", [a[0]]), arg_types=[TileType((4, 2), float32)]), "has more than 1 results"
    )


F8, I8, I16 = TileType((8,), float32), TileType((8,), int32), TileType((16,), int32)


@pytest.mark.parametrize(
    ("operand_types", "attrs", "message"),
    [
        ([F8, TileType((8,), float32)], {"axis": 0}, "'gather' needs an integer operand"),
        ([F8, TileType((8, 2), int32)], {"axis": 0}, "'gather' needs a source and an index tile of one rank"),
        ([TileType((8, 2), float32), TileType((4, 4), int32)], {"axis": 0}, "must match the source"),
        ([F8, I8], {"axis": 1}, "'gather' axis 1 is out of range for rank 1"),
        ([float32, int32], {"axis": 0}, "'gather' needs a source and an index tile of one rank"),
        ([F8], {"num_bins": 4}, "'histogram' needs an integer operand"),
        ([TileType((2, 4), int32)], {"num_bins": 4}, "'histogram' needs a 1-D tile"),
        ([I8], {"num_bins": 0}, "num_bins must be a positive integer"),
        ([I8, I8], {"num_bins": 4}, "'histogram' mask must be int1"),
    ],
)
def test_gather_and_histogram_type_rules(operand_types: list[Type], attrs: dict[str, Any], message: str) -> None:
    name = "gather" if "axis" in attrs else "histogram"

    def build(b: Builder, a: list[Value]) -> None:
        b.block.ops.append(Op(name, list(a), [I8], attrs))

    fails(kernel(build, operand_types), message)


def test_gather_and_histogram_result_types() -> None:
    def build(b: Builder, a: list[Value]) -> None:
        assert b.value("gather", [a[0], a[1]], axis=0).type == TileType((16,), float32)
        assert b.value("histogram", [a[2]], num_bins=32).type == TileType((32,), int32)

    verify(kernel(build, [F8, I16, I8]))


@pytest.mark.parametrize(
    ("operand_types", "attrs", "message"),
    [
        ([F8], {"symbol": "printf", "result": float32}, "calls libdevice functions (__nv_...), got 'printf'"),
        ([F8], {"symbol": "__nv_sinf", "result": F8}, "result must be a scalar type"),
        ([F8, I16], {"symbol": "__nv_powif", "result": float32}, "operands must share a shape"),
        ([], {"symbol": "__nv_sinf", "result": float32}, "takes at least one operand"),
        ([PTR], {"symbol": "__nv_sinf", "result": float32}, "needs scalar elements"),
    ],
)
def test_extern_elementwise_type_rule(operand_types: list[Type], attrs: dict[str, Any], message: str) -> None:
    def build(b: Builder, a: list[Value]) -> None:
        b.block.ops.append(Op("extern_elementwise", list(a), [F8], attrs))

    fails(kernel(build, operand_types), message)


def test_extern_elementwise_result_type() -> None:
    def build(b: Builder, a: list[Value]) -> None:
        out = b.value("extern_elementwise", [a[0], a[1]], symbol="__nv_ldexpf", result=float32)
        assert out.type == F8

    verify(kernel(build, [F8, I8]))


_ASM = {"asm": "mov.b32 $0, $1;", "constraints": "=r,r", "pure": True, "pack": 1}


@pytest.mark.parametrize(
    ("operand_types", "attrs", "message"),
    [
        ([], {**_ASM, "results": [int32]}, "'inline_asm' takes at least one operand"),
        ([F8, I16], {**_ASM, "results": [int32]}, "operands must share a shape"),
        ([TileType((8,), int1)], {**_ASM, "results": [int32]}, "operands cannot be int1"),
        ([I8], {**_ASM, "results": []}, "results must list one or more scalar types other than int1"),
        ([I8], {**_ASM, "results": [F8]}, "results must list one or more scalar types other than int1"),
        ([I8], {**_ASM, "pack": 3, "results": [int32]}, "pack must be a power of two, got 3"),
    ],
)
def test_inline_asm_type_rule(operand_types: list[Type], attrs: dict[str, Any], message: str) -> None:
    def build(b: Builder, a: list[Value]) -> None:
        b.block.ops.append(Op("inline_asm", list(a), [I8], attrs))

    fails(kernel(build, operand_types), message)


def test_inline_asm_results() -> None:
    def build(b: Builder, a: list[Value]) -> None:
        op = b.create("inline_asm", [a[0]], {**_ASM, "pack": 4, "results": [int32, float32]})
        assert [r.type for r in op.results] == [I8, F8]

    verify(kernel(build, [F8]))


def _descriptor_load(operands: list[Value], attrs: dict[str, Any]) -> Callable[[Builder, list[Value]], None]:
    def build(b: Builder, a: list[Value]) -> None:
        b.block.ops.append(Op("descriptor_load", operands or [a[0], *(const(b, 8, int64),) * 3,
                                                             *(const(b, 0, int32),) * 2],
                              [TileType((8, 16), float32)], {"shape": [8, 16], "padding": "zero", **attrs}))
    return build


def test_descriptor_load() -> None:
    verify(kernel(_descriptor_load([], {})))
    verify(kernel(_descriptor_load([], {"padding": "nan", "cache": ".cg"})))
    fails(kernel(_descriptor_load([], {"padding": "pad"})), "'padding' must be one of 'zero', 'nan'")
    fails(kernel(_descriptor_load([], {"shape": [8, 16, 2]})), "a rank-3 block takes 9 operands (base, 3 shape, 2 strides, 3 offsets), got 6")


@pytest.mark.parametrize("operands,message", [
    (lambda b, a: [a[1], *(const(b, 8, int64),) * 3, *(const(b, 0, int32),) * 2], "base must be a pointer to scalars"),
    (lambda b, a: [a[0], *(const(b, 8, int32),) * 3, *(const(b, 0, int32),) * 2], "shape must be int64 scalars"),
    (lambda b, a: [a[0], *(const(b, 8, int64),) * 3, *(const(b, 0, int64),) * 2], "offsets must be int32 scalars"),
])
def test_descriptor_load_operands(operands: Callable[[Builder, list[Value]], list[Value]], message: str) -> None:
    def build(b: Builder, a: list[Value]) -> None:
        b.block.ops.append(Op("descriptor_load", operands(b, a), [TileType((8, 16), float32)],
                              {"shape": [8, 16], "padding": "zero"}))
    fails(kernel(build), message)


def test_nan_padding_needs_floats() -> None:
    def build(b: Builder, a: list[Value]) -> None:
        base = b.value("bitcast", [a[0]], to=PointerType(int32))
        b.block.ops.append(Op("descriptor_load", [base, *(const(b, 8, int64),) * 3, *(const(b, 0, int32),) * 2],
                              [TileType((8, 16), int32)], {"shape": [8, 16], "padding": "nan"}))
    fails(kernel(build), "padding 'nan' needs floating-point elements, got int32")


def _descriptor_store(value: Callable[[Builder], Value], scalars: Callable[[Builder], list[Value]] | None = None,
                      attrs: dict[str, Any] | None = None) -> Module:
    """A kernel storing `value` through a descriptor of a1 (fp32) with `scalars` (shape, strides, offsets) of a
    2-D block by default."""
    def build(b: Builder, a: list[Value]) -> None:
        parts = scalars(b) if scalars else [*(const(b, 8, int64),) * 3, *(const(b, 0, int32),) * 2]
        b.block.ops.append(Op("descriptor_store", [a[0], *parts, value(b)], [], attrs or {}))
    return kernel(build)


def _tile(ty: Type) -> Callable[[Builder], Value]:
    return lambda b: b.constant(0, ty)


def test_descriptor_store() -> None:
    verify(_descriptor_store(_tile(TileType((8, 16), float32))))
    verify(_descriptor_store(_tile(TileType((32,), float32)), lambda b: [const(b, 8, int64), const(b, 0, int32)]))
    fails(_descriptor_store(_tile(TileType((8, 16), int32))), "value must be a tile of fp32, the base's elements")
    fails(_descriptor_store(lambda b: const(b, 0, float32)), "value (its last operand) must be a tile, got fp32")
    fails(_descriptor_store(_tile(TileType((2, 8, 16), float32))),
          "a rank-3 block takes 10 operands (base, 3 shape, 2 strides, 3 offsets, 1 value), got 7")
    fails(_descriptor_store(_tile(TileType((8, 16), float32)),
                            lambda b: [*(const(b, 8, int64),) * 3, *(const(b, 0, int64),) * 2]),
          "'descriptor_store' offsets must be int32 scalars")
    fails(_descriptor_store(_tile(TileType((8, 16), float32)), attrs={"cache": ".cg"}), "unknown attribute 'cache'")
