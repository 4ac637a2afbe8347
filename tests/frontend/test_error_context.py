"""The context an error message gives beyond the failing line: the calls that led into a @jit helper
(each with its line and caret), and what to use instead of a library function called on a tile.

Lines are found by their `# E:<case>` marker, as in test_errors.py.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import despina
import despina.language as tl

from .error_kit import compile_error

X = np.zeros(16, np.float32)
LINES = open(__file__).read().splitlines()


def located(case: str, at: str) -> tuple[str, str, str]:
    """The `file:line:col` of the `at` text on the line marked `# E:<case>`, and the excerpt lines
    (the stripped line, the caret under `at`) that a message shows for it."""
    found = [i for i, line in enumerate(LINES) if re.search(rf"# E:{case}(\s|$)", line)]
    assert len(found) == 1, f"marker # E:{case} must mark exactly one line"
    line = LINES[found[0]]
    col = line.index(at)
    indent = len(line) - len(line.lstrip())
    return f"{__file__}:{found[0] + 1}:{col + 1}", "    " + line.strip(), "    " + " " * (col - indent) + "^"


# ---- errors inside @jit helpers ------------------------------------------------------------------


@despina.jit
def innermost(x):
    return x + undefined_name  # E:undefined  # noqa: F821


@despina.jit
def middle(x):
    y = innermost(x)  # E:callinner
    return y


@despina.jit
def nested_helpers_kernel(x_ptr):
    offs = tl.arange(0, 16)
    tl.store(x_ptr + offs, middle(tl.load(x_ptr + offs)))  # E:callmiddle


def test_an_error_in_a_nested_helper_shows_every_call_that_led_there(trace):
    err = compile_error(trace, nested_helpers_kernel, X)
    error_at, error_line, error_caret = located("undefined", "undefined_name")
    inner_at, inner_line, inner_caret = located("callinner", "innermost(x)")
    kernel_at, kernel_line, kernel_caret = located("callmiddle", "middle(")
    assert str(err).split("\n") == [
        f"in helper 'innermost' of kernel 'nested_helpers_kernel' at {error_at}: name 'undefined_name' is not defined; "
        "assign it before this line (a name first assigned inside a run-time loop, or in only one branch of a "
        "run-time `if`, does not exist after it)",
        error_line, error_caret,
        f"called from helper 'middle' at {inner_at}", inner_line, inner_caret,
        f"called from kernel 'nested_helpers_kernel' at {kernel_at}", kernel_line, kernel_caret,
    ]
    assert (err.kernel, err.function, f"{err.file}:{err.line}:{err.col + 1}") == (
        "nested_helpers_kernel", "innermost", error_at)
    assert [(s.caller, s.is_kernel) for s in err.call_sites] == [("middle", False), ("nested_helpers_kernel", True)]


@despina.jit
def bad_combine(a, b):
    return a + b + tl.no_such_builtin(a)  # E:combine


@despina.jit
def combine_kernel(x_ptr):
    offs = tl.arange(0, 16)
    tl.store(x_ptr, tl.reduce(tl.load(x_ptr + offs), 0, bad_combine))  # E:reducecall


def test_an_error_in_a_combine_function_shows_the_reduction_that_called_it(trace):
    text = str(compile_error(trace, combine_kernel, X))
    error_at, error_line, error_caret = located("combine", "tl.no_such_builtin")
    call_at, call_line, call_caret = located("reducecall", "tl.reduce(")
    lines = text.split("\n")
    assert lines[0].startswith(f"in helper 'bad_combine' of kernel 'combine_kernel' at {error_at}: "), text
    assert "has no attribute 'no_such_builtin'" in lines[0]
    assert lines[1:] == [error_line, error_caret, f"called from kernel 'combine_kernel' at {call_at}", call_line,
                         call_caret]


@despina.jit
def argument_error_kernel(x_ptr):
    tl.store(x_ptr, middle(undefined_arg))  # E:argerror  # noqa: F821


def test_an_error_in_the_arguments_of_a_helper_call_stays_in_the_caller(trace):
    text = str(compile_error(trace, argument_error_kernel, X))
    at, line, caret = located("argerror", "undefined_arg")
    assert text.split("\n")[0].startswith(f"in kernel 'argument_error_kernel' at {at}: name 'undefined_arg'"), text
    assert text.split("\n")[1:] == [line, caret]


# ---- library functions called on tiles -----------------------------------------------------------


@despina.jit
def library_call_kernel(x_ptr, WHICH: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    if WHICH == "np.sqrt":
        y = np.sqrt(x)  # E:np.sqrt
    elif WHICH == "math.exp":
        y = math.exp(x)  # E:math.exp
    elif WHICH == "np.maximum":
        y = np.maximum(x, 0.0)  # E:np.maximum
    elif WHICH == "np.where":
        y = np.where(x > 0, x, 0.0)  # E:np.where
    elif WHICH == "np.abs":
        y = np.abs(x)  # E:np.abs
    elif WHICH == "np.absolute":
        y = np.absolute(x)  # E:np.absolute
    else:
        y = math.gcd(x, 2)  # E:math.gcd
    tl.store(x_ptr + tl.arange(0, 16), y)


@pytest.mark.parametrize(("call", "builtin"), [
    ("np.sqrt", "sqrt"), ("math.exp", "exp"), ("np.maximum", "maximum"), ("np.where", "where"), ("np.abs", "abs"),
    ("np.absolute", "abs"),
])
def test_a_library_function_with_a_tl_builtin_of_its_name_suggests_the_builtin(trace, call, builtin):
    err = compile_error(trace, library_call_kernel, X, WHICH=call)
    at, line, caret = located(call, call + "(")
    library = call.partition(".")[0].replace("np", "numpy")
    assert str(err).split("\n") == [
        f"in kernel 'library_call_kernel' at {at}: {call}() is a {library} function and cannot take a tensor; "
        f"use tl.{builtin}, despina's builtin that works on tiles",
        line, caret,
    ]


def test_a_library_function_without_a_tl_builtin_says_library_functions_cannot_take_tensors(trace):
    err = compile_error(trace, library_call_kernel, X, WHICH="math.gcd")
    at, _, _ = located("math.gcd", "math.gcd(")
    assert str(err).split("\n")[0] == (
        f"in kernel 'library_call_kernel' at {at}: math.gcd() is a math function, and library functions cannot take "
        "tensors: they run in Python while the kernel compiles, before a tile has values. Use the tl builtins (see "
        "docs/language/math.md) or write the computation as a @despina.jit function")


def sqrt(x):
    return x


@despina.jit
def own_function_kernel(x_ptr):
    tl.store(x_ptr, sqrt(tl.load(x_ptr)))  # E:ownsqrt


def test_the_users_own_function_is_still_told_to_be_decorated_even_if_tl_has_its_name(trace):
    at, _, _ = located("ownsqrt", "sqrt(")
    assert str(compile_error(trace, own_function_kernel, X)).split("\n")[0] == (
        f"in kernel 'own_function_kernel' at {at}: 'sqrt' is not a @despina.jit function and cannot take tensor "
        "arguments; decorate it with @despina.jit")


# ---- misspelt names, and the page of the language reference to read ------------------------------


@despina.jit
def misspelt_name_kernel(x_ptr, WHICH: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    if WHICH == "tl":
        y = tl.sqroot(x)  # E:tl
    elif WHICH == "tl.math":
        y = tl.math.expp(x)  # E:tl.math
    elif WHICH == "libdevice":
        y = tl.extra.cuda.libdevice.powww(x, x)  # E:libdevice
    else:
        y = np.sqroot(x)  # E:numpy
    tl.store(x_ptr + tl.arange(0, 16), y)


@pytest.mark.parametrize(("which", "at", "message"), [
    ("tl", "tl.sqroot", "'despina.language' has no attribute 'sqroot' (did you mean 'sqrt'?); despina.language's "
     "names are listed in docs/language/index.md (the language reference)"),
    ("tl.math", "tl.math.expp", "'despina.language.math' has no attribute 'expp' (did you mean 'exp'?); "
     "despina.language.math's names are listed in docs/language/math.md (the language reference)"),
    ("libdevice", "tl.extra", "'despina.language.extra.cuda.libdevice' has no attribute 'powww' (did you mean 'pow'?); "
     "despina.language.extra.cuda.libdevice's names are listed in docs/language/extern.md (the language reference)"),
    ("numpy", "np.sqroot", "'numpy' has no attribute 'sqroot' (did you mean 'sqrt'?); check the spelling"),
])
def test_a_misspelt_module_name_suggests_the_closest_and_the_page_that_lists_them(trace, which, at, message):
    where, _, _ = located(which, at)
    head = str(compile_error(trace, misspelt_name_kernel, X, WHICH=which)).split("\n")[0]
    assert head == f"in kernel 'misspelt_name_kernel' at {where}: {message}"


@despina.jit
def unsupported_syntax_kernel(x_ptr):
    values = [v for v in range(4)]  # E:listcomp
    tl.store(x_ptr, values[0])


def test_unsupported_syntax_names_the_language_reference_page(trace):
    where, _, _ = located("listcomp", "[v for")
    head = str(compile_error(trace, unsupported_syntax_kernel, X)).split("\n")[0]
    assert head == (f"in kernel 'unsupported_syntax_kernel' at {where}: ListComp is not supported in a kernel; see "
                    "docs/language/index.md (the language reference) for what is")
