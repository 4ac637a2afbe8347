"""The verifier on values and control: SSA scoping, terminators, calls."""

from __future__ import annotations

from collections.abc import Sequence

from verifier_kit import BAD, Build, const, fails, helper, kernel, region, yield_

from despina.compiler.ir.builder import Builder
from despina.compiler.ir.core import Block, Op, Value
from despina.compiler.ir.types import Type, float32, int1, int32
from despina.compiler.ir.verifier import verify

# ---- SSA scoping -----------------------------------------------------------------------------


def test_use_before_definition() -> None:
    def build(b: Builder, a: list[Value]) -> None:
        x = const(b)
        y = b.value("add", [x, x])
        b.block.ops.reverse()
        del y

    fails(kernel(build), "op 'add' (op 0): operand 0 (int32) is not in scope")


def test_op_using_its_own_result() -> None:
    def build(b: Builder, a: list[Value]) -> None:
        op = b.create("add", [a[1], a[1]])
        op.operands[1] = op.result

    fails(kernel(build), "operand 1 (int32) is not in scope")


def test_value_of_another_function() -> None:
    h = helper()
    m = kernel(lambda b, a: b.create("store", [a[0], h.args[0]]), helpers=[h])
    fails(m, "function 'k', op 'store' (op 0): operand 1 (fp32) is not in scope")


def test_value_escaping_its_region() -> None:
    def build(b: Builder, a: list[Value]) -> None:
        inner: list[Value] = []

        def fill(b: Builder, args: list[Value]) -> None:
            inner.append(b.value("add", [args[0], args[0]]))
            b.create("yield")

        lo = const(b)
        b.create("for", [lo, lo, lo], regions=[region(b, [int32], fill)])
        b.value("add", [inner[0], inner[0]])

    fails(kernel(build), "op 'add' (op 2): operand 0 (int32) is not in scope")


def test_value_of_a_sibling_region() -> None:
    def build(b: Builder, a: list[Value]) -> None:
        inner: list[Value] = []

        def then(b: Builder, args: list[Value]) -> None:
            inner.append(const(b))
            b.create("yield", inner)

        c = const(b, True, int1)
        b.create("if", [c], regions=[region(b, [], then), region(b, [], lambda b, _: b.create("yield", inner))])

    fails(kernel(build), "op 'yield' (op 1 > region 1 > op 0): operand 0 (int32) is not in scope")


def test_operand_not_a_value() -> None:
    m = kernel(lambda b, a: b.block.ops.append(Op("neg", [BAD], [int32])))
    fails(m, "operand 0 is 1, not a Value")


def test_same_op_twice() -> None:
    def build(b: Builder, a: list[Value]) -> None:
        b.block.ops.append(b.block.ops[-1]) if const(b) else None

    fails(kernel(build), "the same op object appears twice")


def test_value_defined_twice() -> None:
    def build(b: Builder, a: list[Value]) -> None:
        lo = const(b)
        body = region(b, [int32], yield_())
        b.create("for", [lo, lo, lo], regions=[body])
        b.create("for", [lo, lo, lo], regions=[body])

    fails(kernel(build), "function 'k' (op 2 > region 0): value #0 (int32) is defined twice")


def test_value_owned_by_another_op() -> None:
    def build(b: Builder, a: list[Value]) -> None:
        op = b.create("neg", [a[1]])
        op.results[0] = Value(int32)

    fails(kernel(build), "value #0 is not a Value owned by its op")


# ---- terminators -----------------------------------------------------------------------------


def test_function_body_must_end_with_return() -> None:
    m = kernel()
    m.functions[0].body.ops.clear()
    fails(m, "function 'k': the function body is empty; it must end with 'return'")
    m = kernel(lambda b, a: const(b))
    m.functions[0].body.ops.pop()
    fails(m, "op 'constant' (op 0): the function body must end with 'return', not 'constant'")
    fails(kernel(lambda b, a: b.create("yield")), "must end with 'return', not 'yield'")


def test_return_types_must_match_the_function() -> None:
    fails(
        kernel(helpers=[helper(build=lambda b, a: b.create("return"))]),
        "function 'h', op 'return' (op 0): returns () but the function returns (fp32)",
    )
    h = helper(build=lambda b, a: b.create("return", [b.value("cast", a, to=int32)]))
    fails(kernel(helpers=[h]), "returns (int32) but the function returns (fp32)")


def test_terminator_must_be_last() -> None:
    def build(b: Builder, a: list[Value]) -> None:
        b.create("return")
        const(b)
        b.create("return")

    fails(kernel(build), "op 'return' (op 0): a terminator must be the last op of its block")


def test_regions_end_with_yield() -> None:
    def build(b: Builder, a: list[Value]) -> None:
        lo = const(b)
        c = const(b, True, int1)
        b.block.ops.append(
            Op("for", [lo, lo, lo], [], regions=[region(b, [int32], lambda b, _: b.create("condition", [c]))])
        )

    fails(kernel(build), "op 'condition' (op 2 > region 0 > op 0): the region must end with 'yield', not 'condition'")

    def returns(b: Builder, a: list[Value]) -> None:
        lo = const(b)
        b.block.ops.append(Op("for", [lo, lo, lo], [], regions=[region(b, [int32], lambda b, _: b.create("return"))]))

    fails(kernel(returns), "the region must end with 'yield', not 'return'")

    def empty(b: Builder, a: list[Value]) -> None:
        lo = const(b)
        b.block.ops.append(Op("for", [lo, lo, lo], [], regions=[Block([int32])]))

    fails(kernel(empty), "function 'k' (op 1 > region 0): the region is empty; it must end with 'yield'")


def test_while_before_region_ends_with_condition() -> None:
    def build(b: Builder, a: list[Value]) -> None:
        before = region(b, [], yield_())
        after = region(b, [], yield_())
        b.block.ops.append(Op("while", [], [], regions=[before, after]))

    fails(kernel(build), "op 'yield' (op 0 > region 0 > op 0): the region must end with 'condition', not 'yield'")

    def good(b: Builder, a: list[Value]) -> None:
        before = region(b, [], lambda b, _: b.create("condition", [const(b, False, int1)]))
        b.create("while", [], regions=[before, region(b, [], yield_())])

    verify(kernel(good))


# ---- calls -----------------------------------------------------------------------------------


def call(name: str, *args: Value, results: Sequence[Type] = (float32,)) -> Build:
    return lambda b, a: b.create(
        "call", list(args) or [const(b, 1.0, float32)], {"callee": name, "results": list(results)}
    )


def test_call_unknown_callee() -> None:
    fails(kernel(call("nope")), "op 'call' (op 1): calls 'nope', which is not a function of the module")


def test_call_argument_types() -> None:
    fails(kernel(lambda b, a: call("h", a[1])(b, a), helpers=[helper()]), "passes (int32) to 'h(fp32)'")


def test_call_result_types() -> None:
    fails(
        kernel(call("h", results=[int32]), helpers=[helper()]), "expects results (int32) from 'h', which returns (fp32)"
    )


def test_recursion() -> None:
    direct = helper("h", build=lambda b, a: b.create("return", [b.value("call", a, callee="h", results=[float32])]))
    fails(kernel(helpers=[direct]), "recursion is not supported: h -> h")
    f = helper("f", build=lambda b, a: b.create("return", [b.value("call", a, callee="g", results=[float32])]))
    g = helper("g", build=lambda b, a: b.create("return", [b.value("call", a, callee="f", results=[float32])]))
    fails(kernel(call("f"), helpers=[f, g]), "recursion is not supported: f -> g -> f")
    chain = helper("g", build=lambda b, a: b.create("return", [b.value("call", a, callee="h", results=[float32])]))
    verify(kernel(call("g"), helpers=[helper(), chain]))
