"""Every tutorial page includes its code from examples/ (the snippets extension), and that code runs in
the interpreter and checks itself against NumPy: what a reader copies is what CI ran."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest
from site_helpers import ROOT

TUTORIALS = ROOT / "docs" / "tutorials"
PAGES = sorted(TUTORIALS.glob("0*.md"))
INCLUDE = re.compile(r'^--8<-- "([^"]+)"$', re.MULTILINE)


def included(page: Path) -> list[str]:
    return INCLUDE.findall(page.read_text())


def test_eight_tutorials_each_with_its_code_and_figure() -> None:
    assert [p.stem[:2] for p in PAGES] == [f"0{i}" for i in range(1, 9)]
    for page in PAGES:
        files = included(page)
        assert files and all(f.startswith("examples/") and (ROOT / f).is_file() for f in files), page.name
        assert f"<!-- despina:figure {page.stem} -->" in page.read_text(), page.name


@pytest.mark.parametrize("path", sorted({f for page in PAGES for f in included(page)}))
def test_tutorial_code_runs_in_the_interpreter(path: str, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DESPINA_INTERPRET", "1")
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    runpy.run_path(str(ROOT / path), run_name="__main__")
    out = capsys.readouterr().out
    # Each example asserts its results against NumPy; dropout checks its masks instead.
    assert "interpreted" in out or "in the interpreter" in out
    assert "matches NumPy" in out or "same seed -> same mask" in out
