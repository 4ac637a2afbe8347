"""Every error a user can cause in a kernel: `despina.CompilationError` naming the kernel and
`file:line:column`, showing the source line with a caret under the column, and saying what to do.

Each failing kernel marks its offending line with a `# E:<case>` comment; the test finds that
line in this file and checks the whole header, the quoted line and the caret.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import despina
import despina.language as tl

X = np.zeros(16, np.float32)
LINES = open(__file__).read().splitlines()


def expect(err: despina.CompilationError, kernel: str, case: str, at: str, *fragments: str,
           helper: str | None = None) -> None:
    """`err` points at the `at` text of the line marked `# E:<case>` and says each of `fragments`; with
    `helper`, that line is in that @jit helper and the calls that led there follow, ending in the kernel
    (tests/frontend/test_error_context.py checks each of those calls)."""
    marker = re.compile(rf"# E:{case}(\s|$)")
    found = [i for i, line in enumerate(LINES) if marker.search(line)]
    assert len(found) == 1, f"marker # E:{case} must mark exactly one line"
    line = LINES[found[0]]
    col = line.index(at) + 1
    text = str(err)
    lines = text.split("\n")
    head, quoted, caret = lines[:3]
    where = f"at {__file__}:{found[0] + 1}:{col}: "
    if helper is None:
        assert len(lines) == 3, text
        assert head.startswith(f"in kernel '{kernel}' {where}"), text
    else:
        assert head.startswith(f"in helper '{helper}' of kernel '{kernel}' {where}"), text
        assert len(lines) % 3 == 0 and lines[-3].startswith(f"called from kernel '{kernel}' at {__file__}:"), text
    assert quoted == "    " + line.strip()
    indent = len(line) - len(line.lstrip())
    assert caret == "    " + " " * (col - 1 - indent) + "^", text
    for fragment in fragments:
        assert fragment in head, f"{fragment!r} not in {head!r}"
    assert (err.kernel, err.file, err.line, err.col + 1) == (kernel, __file__, found[0] + 1, col)


def compile_error(trace, kernel, *args, **kwargs) -> despina.CompilationError:
    with pytest.raises(despina.CompilationError) as info:
        trace(kernel, *args, **kwargs)
    return info.value


# ---- unsupported syntax ----------------------------------------------------------------------


@despina.jit
def lambda_kernel(x_ptr):
    f = lambda v: v + 1  # E:lambda  # noqa: E731
    tl.store(x_ptr, f(1.0))


@despina.jit
def with_kernel(x_ptr):
    with open("f"):  # E:with
        pass


@despina.jit
def comprehension_kernel(x_ptr):
    values = [i for i in range(4)]  # E:comprehension
    tl.store(x_ptr, values[0])


@despina.jit
def try_kernel(x_ptr):
    try:  # E:try
        tl.store(x_ptr, 1.0)
    except ValueError:
        pass


@despina.jit
def matmul_operator_kernel(x_ptr):
    a = tl.zeros((16, 16), tl.float32)
    tl.store(x_ptr + tl.arange(0, 16), tl.sum(a @ a, 1))  # E:matmul


@pytest.mark.parametrize(("kernel", "case", "at", "fragment"), [
    (lambda_kernel, "lambda", "lambda", "Lambda is not supported in a kernel"),
    (with_kernel, "with", "with", "With is not supported in a kernel"),
    (comprehension_kernel, "comprehension", "[i for", "ListComp is not supported in a kernel"),
    (try_kernel, "try", "try", "Try is not supported in a kernel"),
    (matmul_operator_kernel, "matmul", "a @ a", "use tl.dot"),
])
def test_unsupported_syntax(trace, kernel, case, at, fragment):
    expect(compile_error(trace, kernel, X), kernel.__name__, case, at, fragment)


@despina.jit
def declaration_kernel(x_ptr):
    y: tl.float32  # E:declaration  # noqa: F842
    tl.store(x_ptr, 1.0)


def test_declaration_without_value(trace):
    expect(compile_error(trace, declaration_kernel, X), "declaration_kernel", "declaration", "y: tl",
           "a declaration without a value is not supported; assign a value")


@despina.jit
def annotated_constexpr_kernel(x_ptr, n):
    BLOCK: tl.constexpr = n * 2  # E:annotated
    tl.store(x_ptr, BLOCK)


def test_constexpr_annotation_on_a_runtime_value(trace):
    expect(compile_error(trace, annotated_constexpr_kernel, X, 3), "annotated_constexpr_kernel", "annotated", "n * 2",
           "must be known at compile time", "tl.constexpr parameters")


@despina.jit
def augassign_subscript_kernel(x_ptr):
    t = (1, 2)
    t[0] += 1  # E:augsubscript
    tl.store(x_ptr, t[0])


def test_augmented_assignment_to_a_subscript(trace):
    expect(compile_error(trace, augassign_subscript_kernel, X), "augassign_subscript_kernel", "augsubscript", "t[0]",
           "only names can be targets of augmented assignment", "assign to a name")


@despina.jit
def subscript_store_kernel(x_ptr):
    x = tl.zeros((16,), tl.float32)
    x[0] = 1.0  # E:subscriptstore
    tl.store(x_ptr + tl.arange(0, 16), x)


def test_assignment_into_a_tile(trace):
    expect(compile_error(trace, subscript_store_kernel, X), "subscript_store_kernel", "subscriptstore", "x[0]",
           "assignment to Subscript is not supported", "tl.where")


@despina.jit
def unpack_tensor_kernel(x_ptr):
    a, b = tl.arange(0, 16)  # E:unpacktensor
    tl.store(x_ptr, a + b)


@despina.jit
def unpack_count_kernel(x_ptr):
    a, b = (1, 2, 3)  # E:unpackcount
    tl.store(x_ptr, a + b)


def test_unpacking_errors(trace):
    expect(compile_error(trace, unpack_tensor_kernel, X), "unpack_tensor_kernel", "unpacktensor", "a, b",
           "cannot unpack tensor of type tile<16xint32> into 2 names", "tl.split")
    expect(compile_error(trace, unpack_count_kernel, X), "unpack_count_kernel", "unpackcount", "a, b",
           "cannot unpack 3 values into 2 names")


@despina.jit
def return_in_loop_kernel(x_ptr, n):
    for _i in range(n):
        return  # E:returnloop
    tl.store(x_ptr, 1.0)


def test_return_inside_a_runtime_loop(trace):
    expect(compile_error(trace, return_in_loop_kernel, X, 3), "return_in_loop_kernel", "returnloop", "return",
           "return inside a loop is not supported", "use a mask")


@despina.jit
def kernel_returns_value(x_ptr):
    return tl.load(x_ptr)


def test_kernel_returning_a_value(trace):
    err = compile_error(trace, kernel_returns_value, X)
    line = next(i for i, text in enumerate(LINES) if text.startswith("def kernel_returns_value")) + 1
    assert err.line == line and err.col == 0
    assert "a kernel cannot return a value; store results through a pointer" in str(err)


@despina.jit
def nested_tuple_helper(x):
    return (x, (x, x))  # E:nestedtuple


@despina.jit
def nested_tuple_kernel(x_ptr):
    a, b = nested_tuple_helper(tl.load(x_ptr))
    tl.store(x_ptr, a)


def test_returning_nested_tuples(trace):
    expect(compile_error(trace, nested_tuple_kernel, X), "nested_tuple_kernel", "nestedtuple", "return",
           "nested tuples cannot be returned from a @jit function; return a flat tuple", helper="nested_tuple_helper")


@despina.jit
def recursive_helper(x):
    return recursive_helper(x)  # E:recursion


@despina.jit
def recursion_kernel(x_ptr):
    tl.store(x_ptr, recursive_helper(1.0))


def test_recursion(trace):
    expect(compile_error(trace, recursion_kernel, X), "recursion_kernel", "recursion", "recursive_helper(x)",
           "'recursive_helper' calls itself", "rewrite it as a loop", helper="recursive_helper")


@despina.jit
def assert_kernel(x_ptr, N: tl.constexpr):
    assert N % 16 == 0, "N must be a multiple of 16"  # E:assert
    tl.store(x_ptr, 1.0)


def test_failed_compile_time_assert(trace):
    expect(compile_error(trace, assert_kernel, X, N=8), "assert_kernel", "assert", "assert",
           "assertion failed at compile time: N must be a multiple of 16")


# ---- names, globals, attributes --------------------------------------------------------------

NOT_CONSTEXPR = 16


@despina.jit
def global_kernel(x_ptr):
    tl.store(x_ptr + tl.arange(0, NOT_CONSTEXPR), 1.0)  # E:global


def test_non_constexpr_global(trace):
    expect(compile_error(trace, global_kernel, X), "global_kernel", "global", "NOT_CONSTEXPR",
           "global 'NOT_CONSTEXPR' (int) is not a constexpr", "NOT_CONSTEXPR = tl.constexpr(...)",
           "pass it as an argument instead")


@despina.jit
def undefined_kernel(x_ptr):
    tl.store(x_ptr, undefined_name)  # E:undefined  # noqa: F821


def test_undefined_name(trace):
    expect(compile_error(trace, undefined_kernel, X), "undefined_kernel", "undefined", "undefined_name",
           "name 'undefined_name' is not defined", "assign it before this line")


@despina.jit
def unknown_tl_kernel(x_ptr):
    tl.store(x_ptr, tl.does_not_exist(1.0))  # E:unknowntl


def test_unknown_tl_name(trace):
    expect(compile_error(trace, unknown_tl_kernel, X), "unknown_tl_kernel", "unknowntl", "tl.does_not_exist",
           "'despina.language' has no attribute 'does_not_exist'",
           "; despina.language's names are listed in docs/language/index.md (the language reference)")


@despina.jit
def unknown_attr_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, x.nonexistent)  # E:unknownattr


def test_unknown_attribute_of_a_tensor(trace):
    expect(compile_error(trace, unknown_attr_kernel, X), "unknown_attr_kernel", "unknownattr", "x.nonexistent",
           "tensor of type fp32 has no attribute 'nonexistent'")


@despina.jit
def tuple_index_kernel(x_ptr, i):
    t = (1.0, 2.0)
    tl.store(x_ptr, t[i])  # E:tupleindex


def test_runtime_index_into_a_tuple(trace):
    expect(compile_error(trace, tuple_index_kernel, X, 1), "tuple_index_kernel", "tupleindex", "i]",
           "a tuple index must be a constexpr", "tl.constexpr")


@despina.jit
def fstring_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.static_print(f"x is {x}")  # E:fstring


def test_fstring_of_a_tensor(trace):
    expect(compile_error(trace, fstring_kernel, X), "fstring_kernel", "fstring", 'f"x is',
           "f-strings can only format constexprs; use tl.device_print")


@despina.jit
def in_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, x in (1.0, 2.0))  # E:in


def test_in_on_tensors(trace):
    expect(compile_error(trace, in_kernel, X), "in_kernel", "in", "x in", "'In' cannot compare tensors; use == or !=")


@despina.jit
def range_call_kernel(x_ptr):
    r = range(4)  # E:rangecall  # noqa: F841
    tl.store(x_ptr, 1.0)


def test_range_outside_a_loop(trace):
    expect(compile_error(trace, range_call_kernel, X), "range_call_kernel", "rangecall", "range(4)",
           "range() can only be the iterable of a `for` loop")


def plain_python(x):
    return x + 1


@despina.jit
def plain_call_kernel(x_ptr):
    tl.store(x_ptr, plain_python(tl.load(x_ptr)))  # E:plaincall


@despina.jit
def builtin_call_kernel(x_ptr):
    tl.store(x_ptr, int(tl.load(x_ptr)))  # E:builtincall


def test_calling_python_functions_with_tensors(trace):
    expect(compile_error(trace, plain_call_kernel, X), "plain_call_kernel", "plaincall", "plain_python(",
           "'plain_python' is not a @despina.jit function", "decorate it with @despina.jit")
    expect(compile_error(trace, builtin_call_kernel, X), "builtin_call_kernel", "builtincall", "int(",
           "Python's int() cannot take a tensor", ".to(dtype)")


@despina.jit
def two_arg_helper(a, b):
    return a + b


@despina.jit
def helper_arity_kernel(x_ptr):
    tl.store(x_ptr, two_arg_helper(1.0))  # E:helperarity


@despina.jit
def constexpr_param_helper(x, N: tl.constexpr):
    return x * N


@despina.jit
def helper_constexpr_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, constexpr_param_helper(x, x))  # E:helperconstexpr


def test_wrong_arguments_to_a_jit_helper(trace):
    expect(compile_error(trace, helper_arity_kernel, X), "helper_arity_kernel", "helperarity", "two_arg_helper(",
           "'two_arg_helper' takes (a, b)", "missing a required argument: 'b'")
    expect(compile_error(trace, helper_constexpr_kernel, X), "helper_constexpr_kernel", "helperconstexpr",
           "constexpr_param_helper(", "parameter 'N' of 'constexpr_param_helper' is a tl.constexpr but got a run-time tensor")


# ---- control flow ----------------------------------------------------------------------------


@despina.jit
def break_runtime_loop_kernel(x_ptr, n):
    for _i in range(n):
        break  # E:breakdynamic
    tl.store(x_ptr, 1.0)


@despina.jit
def break_runtime_cond_kernel(x_ptr, n):
    for i in tl.static_range(4):
        if n > i:
            break  # E:breakcond
    tl.store(x_ptr, 1.0)


def test_break_where_it_is_not_defined(trace):
    expect(compile_error(trace, break_runtime_loop_kernel, X, 3), "break_runtime_loop_kernel", "breakdynamic", "break",
           "'break' is supported only in loops unrolled at compile time", "use a mask")
    expect(compile_error(trace, break_runtime_cond_kernel, X, 3), "break_runtime_cond_kernel", "breakcond", "break",
           "'break' under a run-time condition is not supported", "use a mask")


@despina.jit
def tile_if_kernel(x_ptr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    if x > 0:  # E:tileif
        x = -x
    tl.store(x_ptr + tl.arange(0, 16), x)


def test_if_on_a_tile(trace):
    expect(compile_error(trace, tile_if_kernel, X), "tile_if_kernel", "tileif", "x > 0",
           "an `if` condition must be a scalar, got tile<16xint1>; use tl.where for tiles")


@despina.jit
def one_sided_return_helper(x):
    if x > 0:  # E:onesided
        return x
    return -x


@despina.jit
def one_sided_return_kernel(x_ptr):
    tl.store(x_ptr, one_sided_return_helper(tl.load(x_ptr)))


@despina.jit
def both_sided_return_helper(x):
    if x > 0:  # E:bothsided
        return x
    else:
        return -x


@despina.jit
def both_sided_return_kernel(x_ptr):
    tl.store(x_ptr, both_sided_return_helper(tl.load(x_ptr)))


def test_returning_values_under_a_runtime_if(trace):
    expect(compile_error(trace, one_sided_return_kernel, X), "one_sided_return_kernel", "onesided", "if",
           "returning values from inside a run-time `if` is not supported", "assign the value and return it at the end",
           helper="one_sided_return_helper")
    expect(compile_error(trace, both_sided_return_kernel, X), "both_sided_return_kernel", "bothsided", "if",
           "returning values from inside a run-time `if` is not supported", "assign the value and return it at the end",
           helper="both_sided_return_helper")


@despina.jit
def branch_constexpr_kernel(x_ptr, n):
    mode = "a"
    if n > 0:  # E:branchconstexpr
        mode = "b"
    tl.store(x_ptr, 1.0 if mode == "a" else 2.0)


def test_constexpr_differing_between_runtime_branches(trace):
    expect(compile_error(trace, branch_constexpr_kernel, X, 1), "branch_constexpr_kernel", "branchconstexpr", "if",
           "'mode' takes different compile-time values in the two branches", "same constexpr on both sides")


@despina.jit
def branch_type_kernel(x_ptr, n):
    y = tl.zeros((16,), tl.float32)
    if n > 0:  # E:branchtype
        y = tl.zeros((16,), tl.int32)
    tl.store(x_ptr + tl.arange(0, 16), y)


@despina.jit
def branch_shape_kernel(x_ptr, n):
    y = tl.zeros((16,), tl.float32)
    if n > 0:  # E:branchshape
        y = tl.zeros((32,), tl.float32)
    tl.store(x_ptr + tl.arange(0, 16), y)


def test_type_and_shape_mismatch_between_branches(trace):
    expect(compile_error(trace, branch_type_kernel, X, 1), "branch_type_kernel", "branchtype", "if",
           "'y' is tile<16xint32> after the `if` branch but tile<16xfp32> after the `else` branch",
           "convert one side (e.g. with .to())")
    expect(compile_error(trace, branch_shape_kernel, X, 1), "branch_shape_kernel", "branchshape", "if",
           "'y' is tile<32xfp32> after the `if` branch but tile<16xfp32> after the `else` branch")


@despina.jit
def loop_type_kernel(x_ptr, n):
    acc = tl.zeros((16,), tl.int32)
    for _i in range(n):  # E:looptype
        acc = acc + 0.5
    tl.store(x_ptr + tl.arange(0, 16), acc)


@despina.jit
def loop_shape_kernel(x_ptr, n):
    acc = tl.zeros((16,), tl.float32)
    while n > 0:  # E:loopshape
        acc = tl.zeros((32,), tl.float32)
        n -= 1
    tl.store(x_ptr + tl.arange(0, 16), acc)


def test_loop_carried_type_and_shape_changes(trace):
    expect(compile_error(trace, loop_type_kernel, X, 2), "loop_type_kernel", "looptype", "for",
           "'acc' enters the loop as tile<16xint32> but the body makes it tile<16xfp32>",
           "give it that type before the loop")
    expect(compile_error(trace, loop_shape_kernel, X, 2), "loop_shape_kernel", "loopshape", "while",
           "'acc' enters the loop as tile<16xfp32> but the body makes it tile<32xfp32>")


@despina.jit
def chained_literals_kernel(x_ptr, n):
    a = 0
    b = 0
    c = 0
    for _i in range(n):
        c = c + b
        b = b + a
        a = a + 0.5
    tl.store(x_ptr, a + b + c)


def test_chained_weak_loop_values_settle(device):
    out = device.zeros(1, "fp32")
    chained_literals_kernel[(1,)](out, 4)
    a = b = c = 0.0
    for _ in range(4):
        c, b, a = c + b, b + a, a + 0.5
    assert device.get(out)[0] == a + b + c


@despina.jit
def loop_tuple_kernel(x_ptr, n):
    acc = (0, 0)
    for i in range(n):  # E:looptuple
        acc = (acc[0] + i, acc[1] + 1)
    tl.store(x_ptr, acc[0])


@despina.jit
def branch_tuple_kernel(x_ptr, n):
    pair = (tl.load(x_ptr), 1)
    if n > 0:  # E:branchtuple
        pair = (pair[0] + 1, 2)
    tl.store(x_ptr, pair[0])


def test_tuples_changed_under_runtime_control_flow(trace):
    expect(compile_error(trace, loop_tuple_kernel, X, 3), "loop_tuple_kernel", "looptuple", "for",
           "'acc' changes inside a run-time loop but only tensors and numbers can be carried",
           "unpack tuples into separate variables")
    expect(compile_error(trace, branch_tuple_kernel, X, 3), "branch_tuple_kernel", "branchtuple", "if",
           "'pair' takes different compile-time values in the two branches", "unpack tuples into separate variables")


@despina.jit
def for_else_kernel(x_ptr, n):
    for _i in range(n):  # E:forelse
        pass
    else:
        pass


@despina.jit
def while_else_kernel(x_ptr, n):
    while n > 0:  # E:whileelse
        n -= 1
    else:
        pass


def test_loop_else(trace):
    expect(compile_error(trace, for_else_kernel, X, 1), "for_else_kernel", "forelse", "for",
           "for-else is not supported in kernels", "flag")
    expect(compile_error(trace, while_else_kernel, X, 1), "while_else_kernel", "whileelse", "while",
           "while-else is not supported in kernels", "flag")


@despina.jit
def iterate_tile_kernel(x_ptr):
    for _v in tl.arange(0, 16):  # E:iteratetile
        pass


@despina.jit
def loop_target_kernel(x_ptr, n):
    for _i, _j in range(n):  # E:looptarget
        pass


@despina.jit
def loop_bound_kernel(x_ptr, n):
    for _i in range(n * 1.5):  # E:loopbound
        pass


def test_loop_headers(trace):
    expect(compile_error(trace, iterate_tile_kernel, X), "iterate_tile_kernel", "iteratetile", "tl.arange",
           "a kernel loop iterates over range(...), tl.range(...), tl.static_range(...) or a constexpr tuple, not tensor")
    expect(compile_error(trace, loop_target_kernel, X, 3), "loop_target_kernel", "looptarget", "_i, _j",
           "the loop variable must be a single name")
    expect(compile_error(trace, loop_bound_kernel, X, 3), "loop_bound_kernel", "loopbound", "range(",
           "loop bounds must be integer scalars, got fp32", "convert")


@despina.jit
def while_constexpr_kernel(x_ptr, N: tl.constexpr):
    while N > 0:  # E:whileconstexpr
        pass


@despina.jit
def while_tile_kernel(x_ptr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    while x > 0:  # E:whiletile
        x -= 1


def test_while_conditions(trace):
    expect(compile_error(trace, while_constexpr_kernel, X, N=2), "while_constexpr_kernel", "whileconstexpr", "N > 0",
           "a `while` condition must depend on run-time values", "tl.static_range")
    expect(compile_error(trace, while_tile_kernel, X), "while_tile_kernel", "whiletile", "x > 0",
           "a `while` condition must be a scalar, got tile<16xint1>", "tl.max")


# ---- the language's errors, reported at the call --------------------------------------------


@despina.jit
def runtime_arange_kernel(x_ptr, n):
    offs = tl.arange(0, n)  # E:arangeruntime
    tl.store(x_ptr + offs, 1.0)


@despina.jit
def pow2_kernel(x_ptr):
    offs = tl.arange(0, 12)  # E:pow2
    tl.store(x_ptr + offs, 1.0)


@despina.jit
def empty_arange_kernel(x_ptr):
    offs = tl.arange(8, 8)  # E:emptyarange
    tl.store(x_ptr + offs, 1.0)


@despina.jit
def huge_tile_kernel(x_ptr):
    z = tl.zeros((2048, 1024), tl.float32)  # E:hugetile
    tl.store(x_ptr, tl.sum(z))


@despina.jit
def static_range_runtime_kernel(x_ptr, n):
    for _i in tl.static_range(n):  # E:staticruntime
        pass


def test_non_constexpr_where_a_constexpr_is_required(trace):
    expect(compile_error(trace, runtime_arange_kernel, X, 16), "runtime_arange_kernel", "arangeruntime", "tl.arange",
           "arange's end must be a constexpr integer, got a run-time int32 value", "tl.constexpr parameter")
    expect(compile_error(trace, static_range_runtime_kernel, X, 3), "static_range_runtime_kernel", "staticruntime",
           "tl.static_range", "static_range bounds must be constexpr integers", "use tl.range")


def test_tile_shape_rules(trace):
    expect(compile_error(trace, pow2_kernel, X), "pow2_kernel", "pow2", "tl.arange",
           "arange's length dimensions must be powers of two, got [12]", "next_power_of_2", "mask")
    expect(compile_error(trace, empty_arange_kernel, X), "empty_arange_kernel", "emptyarange", "tl.arange",
           "arange's end (8) must be greater than its start (8)")
    expect(compile_error(trace, huge_tile_kernel, X), "huge_tile_kernel", "hugetile", "tl.zeros",
           "has 2097152 elements; a tile holds at most 1048576", "split the work")


@despina.jit
def shape_mismatch_kernel(x_ptr):
    a = tl.arange(0, 16)
    b = tl.arange(0, 32)
    tl.store(x_ptr + a, a + b)  # E:shapemismatch


@despina.jit
def broadcast_to_kernel(x_ptr):
    a = tl.arange(0, 16)
    tl.store(x_ptr + a, tl.sum(tl.broadcast_to(a, (16, 8)), 1))  # E:broadcastto


@despina.jit
def broadcast_down_kernel(x_ptr):
    tl.store(x_ptr, tl.sum(tl.broadcast_to(tl.zeros((4, 8), tl.float32), (1, 8))))  # E:broadcastdown


def test_shape_mismatch(trace):
    expect(compile_error(trace, broadcast_down_kernel, X), "broadcast_down_kernel", "broadcastdown", "tl.broadcast_to",
           "cannot broadcast shape [4, 8] to [1, 8]; each dimension must match or be 1")
    expect(compile_error(trace, shape_mismatch_kernel, X), "shape_mismatch_kernel", "shapemismatch", "a + b",
           "shapes [16] and [32] are incompatible for broadcasting", "x[:, None]")
    expect(compile_error(trace, broadcast_to_kernel, X), "broadcast_to_kernel", "broadcastto", "tl.broadcast_to",
           "shapes [16] and [16, 8] are incompatible for broadcasting", "x[:, None]")


@despina.jit
def float_bitwise_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, x & 1)  # E:floatbitwise


@despina.jit
def float_invert_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, ~x)  # E:floatinvert


@despina.jit
def float_shift_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, x << 1)  # E:floatshift


@despina.jit
def literal_range_kernel(x_ptr):
    x = tl.load(x_ptr).to(tl.int8)
    tl.store(x_ptr, x + 300)  # E:literalrange


@despina.jit
def ptr_mul_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr * 2))  # E:ptrmul


@despina.jit
def ptr_float_offset_kernel(x_ptr):
    tl.store(x_ptr + 1.5, 1.0)  # E:ptrfloat


@despina.jit
def str_operand_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, x + "a")  # E:stroperand


@despina.jit
def huge_literal_kernel(x_ptr):
    tl.store(x_ptr, tl.full((), 2**70, tl.int64))  # E:hugeliteral


@despina.jit
def fma_int_kernel(x_ptr):
    a = tl.arange(0, 16)
    tl.store(x_ptr + a, tl.fma(a, a, a))  # E:fmaint


@despina.jit
def math_ptr_kernel(x_ptr):
    tl.store(x_ptr, tl.exp(x_ptr))  # E:mathptr


@despina.jit
def math_tuple_kernel(x_ptr):
    tl.store(x_ptr, tl.exp((1.0, 2.0)))  # E:mathtuple


def test_dtype_mismatch(trace):
    expect(compile_error(trace, float_bitwise_kernel, X), "float_bitwise_kernel", "floatbitwise", "x & 1",
           "'&' needs integer operands, got fp32", ".to(")
    expect(compile_error(trace, float_invert_kernel, X), "float_invert_kernel", "floatinvert", "~x",
           "'~' needs an integer tensor, got fp32", ".to(")
    expect(compile_error(trace, float_shift_kernel, X), "float_shift_kernel", "floatshift", "x << 1",
           "'<<' needs integer operands, got fp32", ".to(")
    expect(compile_error(trace, literal_range_kernel, X), "literal_range_kernel", "literalrange", "x + 300",
           "integer literal 300 does not fit in the tensor's type int8", ".to(")
    expect(compile_error(trace, ptr_mul_kernel, X), "ptr_mul_kernel", "ptrmul", "x_ptr * 2",
           "expected a numeric tensor, got ptr<fp32>", "pointers support only + and - of integer offsets")
    expect(compile_error(trace, ptr_float_offset_kernel, X), "ptr_float_offset_kernel", "ptrfloat", "x_ptr + 1.5",
           "pointer offsets must be integers, got fp32", ".to(tl.int32)")
    expect(compile_error(trace, str_operand_kernel, X), "str_operand_kernel", "stroperand", 'x + "a"',
           "cannot use str value 'a' as a kernel value")
    expect(compile_error(trace, huge_literal_kernel, X), "huge_literal_kernel", "hugeliteral", "tl.full",
           "does not fit in 64 bits")
    expect(compile_error(trace, fma_int_kernel, X), "fma_int_kernel", "fmaint", "tl.fma",
           "fma needs floating-point operands, got int32", ".to(tl.float32)")
    expect(compile_error(trace, math_ptr_kernel, X), "math_ptr_kernel", "mathptr", "tl.exp",
           "exp needs a numeric tensor, got ptr<fp32>")
    expect(compile_error(trace, math_tuple_kernel, X), "math_tuple_kernel", "mathtuple", "tl.exp",
           "expected a tensor or a number, got tuple")


@despina.jit
def cast_target_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr).to("float32"))  # E:casttarget


@despina.jit
def bitcast_width_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr).to(tl.int16, bitcast=True))  # E:bitcastwidth


@despina.jit
def ptr_cast_kernel(x_ptr):
    tl.store(x_ptr, x_ptr.to(tl.int32))  # E:ptrcast


@despina.jit
def rounding_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr).to(tl.float16, fp_downcast_rounding="up"))  # E:rounding


def test_cast_errors(trace):
    expect(compile_error(trace, cast_target_kernel, X), "cast_target_kernel", "casttarget", "tl.load",
           "cast target must be a dtype such as tl.float32, got 'float32'")
    expect(compile_error(trace, bitcast_width_kernel, X), "bitcast_width_kernel", "bitcastwidth", "tl.load",
           "cannot bitcast fp32 (32 bits) to int16 (16 bits)", "same width")
    expect(compile_error(trace, ptr_cast_kernel, X), "ptr_cast_kernel", "ptrcast", "x_ptr.to",
           "pointers cast only to and from int64, not int32")
    expect(compile_error(trace, rounding_kernel, X), "rounding_kernel", "rounding", "tl.load",
           "fp_downcast_rounding must be 'rtne' or 'rtz', got 'up'")


@despina.jit
def load_non_pointer_kernel(x_ptr):
    tl.store(x_ptr, tl.load(1.0))  # E:loadnonptr


@despina.jit
def cache_modifier_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr, cache_modifier=".xx"))  # E:cachemod


@despina.jit
def eviction_kernel(x_ptr):
    tl.store(x_ptr, 1.0, eviction_policy="never")  # E:eviction


@despina.jit
def boundary_check_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr, boundary_check=(0,)))  # E:boundary


@despina.jit
def other_without_mask_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr, other=0.0))  # E:otherwithoutmask


def test_load_store_errors(trace):
    expect(compile_error(trace, load_non_pointer_kernel, X), "load_non_pointer_kernel", "loadnonptr", "tl.load(1",
           "tl.load needs a pointer or a tile of pointers, got 1.0")
    expect(compile_error(trace, cache_modifier_kernel, X), "cache_modifier_kernel", "cachemod", "tl.load(x",
           "cache_modifier must be one of '', '.ca', '.cg'", "got '.xx'")
    expect(compile_error(trace, eviction_kernel, X), "eviction_kernel", "eviction", "tl.store",
           "eviction_policy must be one of '', 'evict_normal', 'evict_first', 'evict_last', got 'never'")
    expect(compile_error(trace, boundary_check_kernel, X), "boundary_check_kernel", "boundary", "tl.load(x",
           "boundary_check and padding_option belong to block pointers (tl.make_block_ptr)", "mask")
    expect(compile_error(trace, other_without_mask_kernel, X), "other_without_mask_kernel", "otherwithoutmask",
           "tl.load(x", "tl.load got `other` without a `mask`; pass the mask")


@despina.jit
def atomic_sem_kernel(x_ptr):
    tl.atomic_add(x_ptr, 1.0, sem="strong")  # E:atomicsem


@despina.jit
def atomic_scope_kernel(x_ptr):
    tl.atomic_add(x_ptr, 1.0, scope="world")  # E:atomicscope


@despina.jit
def atomic_float_and_kernel(x_ptr):
    tl.atomic_and(x_ptr, 1.0)  # E:atomicfloatand


@despina.jit
def atomic_ptr_ptr_kernel(x_ptr):
    p = x_ptr.to(tl.pointer_type(tl.pointer_type(tl.float32)))
    tl.atomic_xchg(p, x_ptr)  # E:atomicptrptr


def test_atomic_errors(trace):
    expect(compile_error(trace, atomic_sem_kernel, X), "atomic_sem_kernel", "atomicsem", "tl.atomic_add",
           "sem must be 'relaxed', 'acquire', 'release' or 'acq_rel', got 'strong'")
    expect(compile_error(trace, atomic_scope_kernel, X), "atomic_scope_kernel", "atomicscope", "tl.atomic_add",
           "scope must be 'gpu', 'cta' or 'sys', got 'world'")
    expect(compile_error(trace, atomic_float_and_kernel, X), "atomic_float_and_kernel", "atomicfloatand",
           "tl.atomic_and", "tl.atomic_and needs integer pointers, got ptr<fp32>")
    expect(compile_error(trace, atomic_ptr_ptr_kernel, X), "atomic_ptr_ptr_kernel", "atomicptrptr", "tl.atomic_xchg",
           "tl.atomic_xchg needs pointers to numbers, got ptr<ptr<fp32>>")


@despina.jit
def program_axis_kernel(x_ptr):
    tl.store(x_ptr, tl.program_id(3))  # E:programaxis


@despina.jit
def reduce_axis_kernel(x_ptr):
    tl.store(x_ptr, tl.sum(tl.arange(0, 16), axis=1))  # E:reduceaxis


@despina.jit
def reduce_scalar_kernel(x_ptr):
    tl.store(x_ptr, tl.sum(tl.load(x_ptr), axis=0))  # E:reducescalar


@despina.jit
def xor_sum_float_kernel(x_ptr):
    tl.store(x_ptr, tl.xor_sum(tl.load(x_ptr + tl.arange(0, 16)), 0))  # E:xorsumfloat


@despina.jit
def pair_combine(a, b, c, d):
    return a + c


@despina.jit
def combine_count_kernel(x_ptr):
    a = tl.arange(0, 16)
    s, t = tl.reduce((a, a), 0, pair_combine)  # E:combinecount
    tl.store(x_ptr, s)


def test_reduction_errors(trace):
    expect(compile_error(trace, program_axis_kernel, X), "program_axis_kernel", "programaxis", "tl.program_id",
           "axis must be the constexpr 0, 1 or 2, got 3")
    expect(compile_error(trace, reduce_axis_kernel, X), "reduce_axis_kernel", "reduceaxis", "tl.sum",
           "axis 1 is out of range for a tile of rank 1")
    expect(compile_error(trace, reduce_scalar_kernel, X), "reduce_scalar_kernel", "reducescalar", "tl.sum",
           "sum needs tiles, got fp32")
    expect(compile_error(trace, xor_sum_float_kernel, X), "xor_sum_float_kernel", "xorsumfloat", "tl.xor_sum",
           "xor_sum needs an integer tile, got tile<16xfp32>")
    expect(compile_error(trace, combine_count_kernel, X), "combine_count_kernel", "combinecount", "tl.reduce",
           "the combine function must return 2 value(s), got 1")


@despina.jit
def dot_rank_kernel(x_ptr):
    a = tl.zeros((16,), tl.float32)
    tl.store(x_ptr, tl.sum(tl.dot(a, a)))  # E:dotrank


@despina.jit
def dot_inner_kernel(x_ptr):
    a = tl.zeros((16, 32), tl.float32)
    tl.store(x_ptr, tl.sum(tl.dot(a, a)))  # E:dotinner


@despina.jit
def dot_precision_kernel(x_ptr):
    a = tl.zeros((16, 16), tl.float32)
    tl.store(x_ptr, tl.sum(tl.dot(a, a, input_precision="fp8")))  # E:dotprecision


def test_dot_errors(trace):
    expect(compile_error(trace, dot_rank_kernel, X), "dot_rank_kernel", "dotrank", "tl.dot",
           "dot needs two 2-D (or two 3-D batched) tiles, got tile<16xfp32> and tile<16xfp32>")
    expect(compile_error(trace, dot_inner_kernel, X), "dot_inner_kernel", "dotinner", "tl.dot",
           "dot: the inner dimensions differ: [16, 32] @ [16, 32]", "tl.trans")
    expect(compile_error(trace, dot_precision_kernel, X), "dot_precision_kernel", "dotprecision", "tl.dot",
           "input_precision must be one of ('tf32', 'tf32x3', 'ieee'), got 'fp8'")


@despina.jit
def permute_kernel(x_ptr):
    z = tl.zeros((2, 4, 8), tl.float32)
    tl.store(x_ptr, tl.sum(tl.permute(z, (0, 0, 1))))  # E:permute


@despina.jit
def trans_3d_kernel(x_ptr):
    z = tl.zeros((2, 4, 8), tl.float32)
    tl.store(x_ptr, tl.sum(tl.trans(z)))  # E:trans3d


@despina.jit
def cat_scalar_kernel(x_ptr):
    tl.store(x_ptr, tl.cat(1.0, 2.0))  # E:catscalar


@despina.jit
def split_kernel(x_ptr):
    a, b = tl.split(tl.zeros((16, 4), tl.float32))  # E:split
    tl.store(x_ptr, tl.sum(a))


@despina.jit
def index_count_kernel(x_ptr):
    a = tl.arange(0, 16)
    tl.store(x_ptr, tl.sum(a[:, :]))  # E:indexcount


@despina.jit
def index_kind_kernel(x_ptr):
    a = tl.arange(0, 16)
    tl.store(x_ptr, a[3])  # E:indexkind


def test_shape_op_errors(trace):
    expect(compile_error(trace, permute_kernel, X), "permute_kernel", "permute", "tl.permute",
           "[0, 0, 1] is not a permutation of the 3 dimensions of tile<2x4x8xfp32>")
    expect(compile_error(trace, trans_3d_kernel, X), "trans_3d_kernel", "trans3d", "tl.trans",
           "trans without dims needs a 2-D tile, got tile<2x4x8xfp32>; pass the permutation")
    expect(compile_error(trace, cat_scalar_kernel, X), "cat_scalar_kernel", "catscalar", "tl.cat",
           "cat needs tiles, got scalars")
    expect(compile_error(trace, split_kernel, X), "split_kernel", "split", "tl.split",
           "split needs a last dimension of size 2, got tile<16x4xfp32>", "tl.reshape")
    expect(compile_error(trace, index_count_kernel, X), "index_count_kernel", "indexcount", "a[:, :]",
           "too many indices for a tile of shape [16]")
    expect(compile_error(trace, index_kind_kernel, X), "index_kind_kernel", "indexkind", "a[3]",
           "tiles support only `None` and `:` in an index, got 3; use tl.split, tl.reshape or a mask")


@despina.jit
def reshape_count_kernel(x_ptr):
    tl.store(x_ptr, tl.sum(tl.reshape(tl.arange(0, 16), (8, 4))))  # E:reshapecount


@despina.jit
def expand_axis_kernel(x_ptr):
    tl.store(x_ptr, tl.sum(tl.expand_dims(tl.arange(0, 16), 2)))  # E:expandaxis


@despina.jit
def dot_acc_kernel(x_ptr):
    a = tl.zeros((16, 16), tl.float32)
    tl.store(x_ptr, tl.sum(tl.dot(a, a, tl.zeros((16, 32), tl.float32))))  # E:dotacc


@despina.jit
def store_tile_scalar_kernel(x_ptr):
    tl.store(x_ptr, tl.zeros((16,), tl.float32))  # E:storetile


@despina.jit
def builtin_arity_kernel(x_ptr):
    tl.store(x_ptr + tl.arange(16), 1.0)  # E:builtinarity


@despina.jit
def builtin_keyword_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr, msk=None))  # E:builtinkeyword


def test_more_shape_rules(trace):
    expect(compile_error(trace, reshape_count_kernel, X), "reshape_count_kernel", "reshapecount", "tl.reshape",
           "cannot reshape tile<16xint32> (16 elements) to [8, 4]; the number of elements must stay the same")
    expect(compile_error(trace, expand_axis_kernel, X), "expand_axis_kernel", "expandaxis", "tl.expand_dims",
           "expand_dims axes [2] are out of range for a result of rank 2; use -2 to 1")
    expect(compile_error(trace, dot_acc_kernel, X), "dot_acc_kernel", "dotacc", "tl.dot",
           "dot: acc has shape [16, 32] but the product of [16, 16] and [16, 16] has [16, 16]")
    expect(compile_error(trace, store_tile_scalar_kernel, X), "store_tile_scalar_kernel", "storetile", "tl.store",
           "tl.store got a tile<16xfp32> value for a single pointer", "ptr + tl.arange(...)")


def test_wrong_arguments_to_a_builtin(trace):
    expect(compile_error(trace, builtin_arity_kernel, X), "builtin_arity_kernel", "builtinarity", "tl.arange",
           "arange() missing 1 required positional argument: 'end'")
    expect(compile_error(trace, builtin_keyword_kernel, X), "builtin_keyword_kernel", "builtinkeyword", "tl.load(x",
           "load() got an unexpected keyword argument 'msk'")


@despina.jit
def static_assert_kernel(x_ptr, N: tl.constexpr):
    tl.static_assert(N > 4, "N must exceed 4")  # E:staticassert


@despina.jit
def static_assert_runtime_kernel(x_ptr, n):
    tl.static_assert(n > 4)  # E:staticassertruntime


@despina.jit
def device_print_kernel(x_ptr):
    tl.device_print(tl.load(x_ptr))  # E:deviceprint


@despina.jit
def hint_float_kernel(x_ptr):
    tl.store(x_ptr, tl.multiple_of(tl.load(x_ptr), 16))  # E:hintfloat


@despina.jit
def nan_mode_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, tl.maximum(x, x, propagate_nan="sometimes"))  # E:nanmode


def test_debug_and_hint_errors(trace):
    expect(compile_error(trace, static_assert_kernel, X, N=2), "static_assert_kernel", "staticassert",
           "tl.static_assert", "static_assert failed: N must exceed 4")
    expect(compile_error(trace, static_assert_runtime_kernel, X, 3), "static_assert_runtime_kernel",
           "staticassertruntime", "tl.static_assert", "static_assert needs a constexpr condition; use tl.device_assert")
    expect(compile_error(trace, device_print_kernel, X), "device_print_kernel", "deviceprint", "tl.device_print",
           "device_print's first argument must be a constexpr string")
    expect(compile_error(trace, hint_float_kernel, X), "hint_float_kernel", "hintfloat", "tl.multiple_of",
           "multiple_of applies to integer values (offsets), got fp32")
    expect(compile_error(trace, nan_mode_kernel, X), "nan_mode_kernel", "nanmode", "tl.maximum",
           "propagate_nan must be tl.PropagateNan.NONE or .ALL, got 'sometimes'")


@despina.jit
def truth_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, 1.0 if (x, 1) == (x + 1, 1) else 2.0)  # E:truth


@despina.jit
def iterate_kernel(x_ptr):
    tl.store(x_ptr, tl.maximum(*tl.arange(0, 2)))  # E:iterate


@despina.jit
def scalar_len_kernel(x_ptr):
    tl.store(x_ptr, len(tl.load(x_ptr)))  # E:scalarlen


def test_tensor_python_protocols(trace):
    expect(compile_error(trace, truth_kernel, X), "truth_kernel", "truth", "(x, 1) ==",
           "a tensor has no Python truth value at trace time", "tl.where")
    expect(compile_error(trace, iterate_kernel, X), "iterate_kernel", "iterate", "tl.maximum",
           "a tensor cannot be iterated", "tl.split")
    expect(compile_error(trace, scalar_len_kernel, X), "scalar_len_kernel", "scalarlen", "len(",
           "len() of a scalar tensor", ".shape")


# ---- errors outside a kernel body ------------------------------------------------------------


def test_builtins_outside_a_kernel():
    with pytest.raises(RuntimeError, match="can only be called inside a @despina.jit kernel"):
        tl.arange(0, 16)


def test_jit_needs_a_def():
    kernel = despina.jit(lambda x: x)
    with pytest.raises(TypeError, match="@jit needs a plain `def` function"):
        kernel.source  # noqa: B018


_NO_FILE = """
import despina
import despina.language as tl

@despina.jit
def nowhere_kernel(x_ptr):
    tl.store(x_ptr, 1.0)
"""


def test_kernel_defined_where_there_is_no_source_file(monkeypatch):
    # As with `python -c` or an exec()'d string: Python keeps no source to read back.
    scope: dict = {}
    exec(compile(_NO_FILE, "<string>", "exec"), scope)
    monkeypatch.setenv("DESPINA_INTERPRET", "1")
    with pytest.raises(despina.CompilationError) as info:
        scope["nowhere_kernel"][(1,)](X)
    err, text = info.value, str(info.value)
    assert (err.kernel, err.file, err.line) == ("nowhere_kernel", "<string>", 5)
    assert text.startswith("in kernel 'nowhere_kernel' at <string>:5:1: cannot read the kernel's source code"), text
    assert "Define the kernel in a .py file" in text
    assert err.__cause__ is None and err.__suppress_context__


def test_calling_a_kernel_directly():
    with pytest.raises(RuntimeError, match=r"launch it as lambda_kernel\[grid\]\(...\)"):
        lambda_kernel(X)
