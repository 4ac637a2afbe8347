"""Line maps and line-table debug info: each stage's lines point at the source line they came from
(`asm["lines"]`), the PTX carries `.loc` directives naming the file by its base name, and the code
is the same as without line info; one kernel from two checkouts is one cubin."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

from frontend.scale_kernel import LOAD_LINE, STORE_LINE, load_kernel, traced  # noqa: E402

from despina.compiler.backends.nvptx import compile_module  # noqa: E402
from despina.compiler.backends.nvptx.cubin import sections  # noqa: E402
from despina.compiler.backends.nvptx.lines import llir_lines, names_file, ptx_lines  # noqa: E402
from despina.compiler.ir.codec import encode, key_bytes  # noqa: E402
from despina.compiler.ir.core import Loc  # noqa: E402
from despina.compiler.ir.filenames import short_names  # noqa: E402


def lines_with(text: str, needle: str) -> set[int]:
    return {i for i, line in enumerate(text.splitlines(), 1) if needle in line}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return compile_module(traced(load_kernel(tmp_path_factory.mktemp("lines"))), target="sm_90")


def stage_map(kernel: Any, stage: str) -> dict[int, int]:
    return {int(k): v for k, v in json.loads(kernel.asm["lines"])["stages"][stage].items()}


@pytest.mark.parametrize("stage, load, store", [
    ("ir", "= load(", "store("), ("gpuir", "= load(", "store("), ("llir", "ld.global", "st.global"),
    ("ptx", "ld.global", "st.global")])
def test_the_load_and_store_lines_of_every_stage_map_to_their_source_lines(compiled: Any, stage: str, load: str,
                                                                          store: str) -> None:
    text, lines = compiled.asm[stage], stage_map(compiled, stage)
    loads, stores = lines_with(text, load), lines_with(text, store)
    assert loads and stores
    assert {lines.get(i) for i in loads} == {LOAD_LINE}
    assert {lines.get(i) for i in stores} == {STORE_LINE}
    assert set(lines.values()) <= set(range(6, 11))  # the def line (a kernel's prologue) to the store


def test_the_ptx_names_the_file_by_its_base_name_and_no_folder(compiled: Any, tmp_path: Path) -> None:
    ptx = compiled.asm["ptx"]
    assert re.findall(r'^\s*\.file\s+\d+\s+"([^"]*)"', ptx, re.M) == ["scale.py"]
    assert re.search(r"^\s*\.loc\s+1\s+9\s+\d+", ptx, re.M)  # the load's line
    folder = str(tmp_path.parent).encode()
    assert folder not in compiled.cubin and folder not in ptx.encode()
    assert ".debug_line" in {s.name for s in sections(compiled.cubin)}  # nvJitLink kept the line table


def _instructions(ptx: str) -> list[str]:
    """The PTX without what line info adds: `.loc`, `.file`, the labels around them, debug sections."""
    skip = re.compile(r"^\s*(\.loc|\.file|\$L__|\.section\s+\.debug)")
    return [line for line in ptx.splitlines() if not skip.match(line)]


def _code(cubin: bytes) -> dict[str, bytes]:
    return {s.name: cubin[s.offset: s.offset + s.size] for s in sections(cubin) if s.name.startswith(".text.")}


def test_line_info_changes_no_instruction(compiled: Any, tmp_path: Path) -> None:
    plain = compile_module(traced(load_kernel(tmp_path)), target="sm_90", line_info=False)
    assert ".loc" not in plain.asm["ptx"] and ".file" not in plain.asm["ptx"]
    assert json.loads(plain.asm["lines"])["stages"]["ptx"] == {}
    assert _instructions(plain.asm["ptx"]) == _instructions(compiled.asm["ptx"])
    assert _code(plain.cubin) == _code(compiled.cubin) != {}  # the SASS, byte for byte


def test_two_checkouts_give_one_key_and_one_cubin(tmp_path: Path) -> None:
    a, b = traced(load_kernel(tmp_path / "one" / "pkg")), traced(load_kernel(tmp_path / "two" / "src" / "pkg"))
    assert a.kernel.loc is not None and b.kernel.loc is not None and a.kernel.loc.file != b.kernel.loc.file
    assert encode(a) != encode(b) and key_bytes(encode(a)) == key_bytes(encode(b))
    ka, kb = compile_module(a, target="sm_80"), compile_module(b, target="sm_80")
    assert ka.asm["ptx"] == kb.asm["ptx"] and ka.cubin == kb.cubin


def test_files_are_named_by_the_shortest_tail_that_tells_them_apart() -> None:
    names = short_names(["/x/a/k.py", "/y/b/k.py", "/x/a/helpers.py", "/x/a/k.py"])
    assert names == {"/x/a/k.py": "a/k.py", "/y/b/k.py": "b/k.py", "/x/a/helpers.py": "helpers.py"}
    assert names_file("a/k.py", "/x/a/k.py") and not names_file("b/k.py", "/x/a/k.py")
    assert names_file("k.py", "/x/a/k.py") and not names_file("k.py", "/x/a/kk.py")


def test_maps_keep_only_the_source_file_s_lines() -> None:
    llir = ('define void @k() !dbg !4 {\n  %a = add i32 0, 1, !dbg !7\n  %b = add i32 0, 2, !dbg !8\n}\n'
            '!1 = !DIFile(filename: "k.py", directory: "")\n!2 = !DIFile(filename: "other.py", directory: "")\n'
            '!4 = distinct !DISubprogram(name: "k", file: !1, line: 3, unit: !0)\n'
            '!5 = !DILexicalBlockFile(scope: !4, file: !2, discriminator: 0)\n'
            '!7 = !DILocation(line: 5, column: 2, scope: !4)\n!8 = !DILocation(line: 40, scope: !5)\n')
    assert llir_lines(llir, "/src/k.py") == {2: 5}
    ptx = '\t.loc\t1 5 2\n\tadd.s32 %r1, %r2, 1;\n\t.loc\t2 40 0\n\tadd.s32 %r3, %r2, 2;\n$L__tmp0:\n\t.file\t1 "k.py"\n'
    assert ptx_lines(ptx + '\t.file\t2 "other.py"\n', "/src/k.py") == {2: 5}


def test_a_file_name_no_ptx_string_can_hold_is_written_with_underscores(tmp_path: Path) -> None:
    m = traced(load_kernel(tmp_path))
    odd = str(tmp_path / 'a"b\n.entry x\\é.py')
    m.source = None  # the maps then point into the kernel's file
    for fn in m.functions:
        fn.loc = fn.loc and Loc(odd, fn.loc.line, fn.loc.col)
        for op in fn.walk():
            op.loc = op.loc and Loc(odd, op.loc.line, op.loc.col)
    k = compile_module(m, target="sm_90")  # a quote in a .file directive would be a PTX syntax error
    assert re.findall(r'^\s*\.file\s+\d+\s+"([^"]*)"', k.asm["ptx"], re.M) == ["a_b_.entry x__.py"]
    loads = lines_with(k.asm["ptx"], "ld.global")
    assert {stage_map(k, "ptx").get(i) for i in loads} == {LOAD_LINE}
