from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from strategies import modules

from despina.compiler.ir.core import IRError, Loc, Module, Op
from despina.compiler.ir.hashing import canonical_bytes, line_table, module_hash
from despina.compiler.ir.parser import parse_module
from despina.compiler.ir.printer import print_module
from despina.compiler.ir.types import TileType, float16, int32

# Builds the same module in this process and in fresh interpreters.
BUILD = textwrap.dedent(
    """
    from despina.compiler.ir.builder import Builder
    from despina.compiler.ir.core import Block, Function, Loc, Module
    from despina.compiler.ir.types import PointerType, float32, int32

    def build(file="k.py"):
        body = Block([PointerType(float32), int32], ["x", "n"])
        b = Builder(body)
        b.loc = Loc(file, 3, 4)
        offs = b.value("arange", start=0, end=64)
        ptrs = b.value("addptr", [b.value("splat", [body.args[0]], shape=[64]), offs])
        mask = b.value("cmp", [offs, b.value("splat", [body.args[1]], shape=[64])], pred="lt")
        x = b.value("load", [ptrs, mask])
        b.create("store", [ptrs, b.value("mul", [x, x]), mask])
        b.create("return")
        kernel = Function("square", body, ["x", "n"], [], True, Loc(file, 1, 0))
        return Module([kernel], {"num_warps": 4, "signature": "*fp32,i32"})
    """
)


def build(file: str = "k.py") -> Module:
    scope: dict[str, object] = {}
    exec(BUILD, scope)
    make: Any = scope["build"]
    return make(file)


def test_canonical_bytes_are_the_text_then_the_line_table() -> None:
    m = build("/home/user/src/k.py")
    assert canonical_bytes(m) == (print_module(m, locs=False) + line_table(m)).encode()
    assert b"loc(" not in canonical_bytes(m) and b"/home" not in canonical_bytes(m)
    assert line_table(m).startswith("// k.py:1:0\n// k.py:3:4\n")  # the kernel, then its ops
    assert len(module_hash(m)) == 64 and int(module_hash(m), 16) >= 0


def test_hash_is_stable_across_processes() -> None:
    program = BUILD + "\nfrom despina.compiler.ir.hashing import module_hash\nprint(module_hash(build()))\n"
    hashes = set()
    for seed in ("0", "1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, check=True)
        hashes.add(out.stdout.strip())
    assert hashes == {module_hash(build())}


def test_checkouts_and_value_hints_do_not_change_the_hash_but_lines_do() -> None:
    """The PTX names a file by the tail of its path and carries each op's line: one kernel from two
    checkouts is one hash; the same kernel at other lines or in another file is another."""
    a, b = build("/home/user/src/k.py"), build("/srv/ci/checkout/k.py")
    assert module_hash(a) == module_hash(b)
    for op in b.kernel.walk():
        for r in op.results:
            r.hint = "renamed"
    assert module_hash(a) == module_hash(b)
    assert module_hash(build("/home/user/src/other.py")) != module_hash(a)
    b.kernel.body.ops[0].loc = Loc("/srv/ci/checkout/k.py", 4, 4)
    assert module_hash(a) != module_hash(b)


def change_attribute(m: Module) -> None:
    m.kernel.body.ops[0].attrs["end"] = 32
    m.kernel.body.ops[0].results[0].type = TileType((32,), int32)


def change_type(m: Module) -> None:
    m.kernel.args[1].type = float16


def change_op(m: Module) -> None:
    m.kernel.body.ops[-3].name = "add"


def change_module_attribute(m: Module) -> None:
    m.attrs["num_warps"] = 8


def change_argument_name(m: Module) -> None:
    m.kernel.arg_names[0] = "y"


def add_op(m: Module) -> None:
    m.kernel.body.ops.insert(0, Op("barrier", [], []))


@pytest.mark.parametrize(
    "change", [change_attribute, change_type, change_op, change_module_attribute, change_argument_name, add_op]
)
def test_hash_changes_with_the_module(change: Callable[[Module], None]) -> None:
    m = build()
    before = module_hash(m)
    change(m)
    assert module_hash(m) != before


def test_unprintable_module_is_an_ir_error() -> None:
    m = build()
    m.attrs["bad"] = object()
    with pytest.raises(IRError, match="no canonical form"):
        canonical_bytes(m)
    m = build()
    m.kernel.body.ops.reverse()
    with pytest.raises(IRError, match="no canonical form"):
        module_hash(m)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(modules())
def test_parsed_module_hashes_like_the_original(m: Module) -> None:
    assert module_hash(parse_module(print_module(m))) == module_hash(m)
    for op in m.kernel.walk():
        op.loc = Loc("moved.py", 99, 1)
    assert module_hash(parse_module(print_module(m))) == module_hash(m)
