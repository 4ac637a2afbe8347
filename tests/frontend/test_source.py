"""The source text a module carries for a viewer (`Module.source`): the kernel and its helpers of the
same file, or the kernel alone when that span is past the bounds, cut to the bounds at worst."""

from __future__ import annotations

from pathlib import Path

from despina.compiler.ir.verifier import MAX_SOURCE_LINES, verify

from .scale_kernel import KERNEL, load_kernel, traced

HELPER = '''\
import despina
import despina.language as tl


@despina.jit
def triple(x):
    return x * 3.0
'''
CALLER = '''

@despina.jit
def scale_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, triple(tl.load(src + offs, mask=offs < n)), mask=offs < n)
'''


def test_the_kernel_s_own_lines(tmp_path: Path) -> None:
    m = traced(load_kernel(tmp_path))
    assert m.source is not None and m.source.file == str(tmp_path / "scale.py")
    assert (m.source.first_line, m.source.lines) == (5, tuple(KERNEL.splitlines()[4:]))
    verify(m)


def test_a_helper_of_the_same_file_is_shown_with_the_kernel(tmp_path: Path) -> None:
    m = traced(load_kernel(tmp_path, HELPER + CALLER))
    assert m.source is not None and m.source.first_line == 5
    assert m.source.lines[0] == "@despina.jit" and m.source.lines[1] == "def triple(x):"
    assert m.source.lines[-1].lstrip().startswith("tl.store(")


def test_a_span_past_the_bounds_keeps_the_kernel_alone(tmp_path: Path) -> None:
    m = traced(load_kernel(tmp_path, HELPER + "\n" * MAX_SOURCE_LINES + CALLER))
    assert m.source is not None and m.source.lines[1].startswith("def scale_kernel(")
    assert m.source.first_line == len((HELPER + "\n" * MAX_SOURCE_LINES).splitlines()) + 3
    verify(m)


def test_a_kernel_past_the_bounds_is_cut_to_them(tmp_path: Path) -> None:
    long = KERNEL.replace("    mask = offs < n\n", "    mask = offs < n\n" + "    # a comment\n" * MAX_SOURCE_LINES)
    m = traced(load_kernel(tmp_path, long))
    assert m.source is not None and m.source.first_line == 5 and len(m.source.lines) == MAX_SOURCE_LINES
    assert m.source.lines[-1] == "    # a comment"
    verify(m)
