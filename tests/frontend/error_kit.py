"""What the kernel-error tests share: each failing kernel marks its offending line with a `# E:<case>`
comment, and `expect_in` finds that line in the test's file and checks the whole header, the quoted
line and the caret."""

from __future__ import annotations

import re

import pytest

import despina


def expect_in(path: str, err: despina.CompilationError, kernel: str, case: str, at: str, *fragments: str,
              helper: str | None = None) -> None:
    """`err` points at the `at` text of the line marked `# E:<case>` in `path` and says each of `fragments`; with
    `helper`, that line is in that @jit helper and the calls that led there follow, ending in the kernel
    (tests/frontend/test_error_context.py checks each of those calls)."""
    lines_of_file = open(path).read().splitlines()
    marker = re.compile(rf"# E:{case}(\s|$)")
    found = [i for i, line in enumerate(lines_of_file) if marker.search(line)]
    assert len(found) == 1, f"marker # E:{case} must mark exactly one line"
    line = lines_of_file[found[0]]
    col = line.index(at) + 1
    text = str(err)
    lines = text.split("\n")
    head, quoted, caret = lines[:3]
    where = f"at {path}:{found[0] + 1}:{col}: "
    if helper is None:
        assert len(lines) == 3, text
        assert head.startswith(f"in kernel '{kernel}' {where}"), text
    else:
        assert head.startswith(f"in helper '{helper}' of kernel '{kernel}' {where}"), text
        assert len(lines) % 3 == 0 and lines[-3].startswith(f"called from kernel '{kernel}' at {path}:"), text
    assert quoted == "    " + line.strip()
    indent = len(line) - len(line.lstrip())
    assert caret == "    " + " " * (col - 1 - indent) + "^", text
    for fragment in fragments:
        assert fragment in head, f"{fragment!r} not in {head!r}"
    assert (err.kernel, err.file, err.line, err.col + 1) == (kernel, path, found[0] + 1, col)


def compile_error(trace, kernel, *args, **kwargs) -> despina.CompilationError:
    with pytest.raises(despina.CompilationError) as info:
        trace(kernel, *args, **kwargs)
    return info.value
