"""Every error a user can cause in a kernel: `despina.CompilationError` naming the kernel and
`file:line:column`, showing the source line with a caret under the column, and saying what to do.

Each failing kernel marks its offending line with a `# E:<case>` comment; the test finds that
line in this file and checks the whole header, the quoted line and the caret.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import despina
import despina.language as tl

from .error_kit import compile_error, expect_in

X = np.zeros(16, np.float32)
expect = functools.partial(expect_in, __file__)


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
    line = next(i for i, text in enumerate(open(__file__).read().splitlines(), 1)
                if text.startswith("def kernel_returns_value"))
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
