"""benchmarks/tutorial_figures.py: its dry run (the interpreter, tiny sizes, every kernel checked against
NumPy, figures drawn and discarded) and its SVG charts; the timed run needs a GPU host with Triton."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from site_helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import tutorial_cases  # noqa: E402
import tutorial_plot  # noqa: E402

SCRIPT = ROOT / "benchmarks" / "tutorial_figures.py"
SVG = "{http://www.w3.org/2000/svg}"


def test_dry_run_checks_every_tutorial_and_writes_nothing() -> None:
    figures = ROOT / "docs" / "tutorials" / "figures"
    before = sorted(figures.iterdir()) if figures.exists() else []
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run"], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for tutorial in tutorial_cases.TUTORIALS:
        assert f"{tutorial.name}: drawn and discarded" in proc.stdout
        for size in tutorial.dry_sizes:
            assert f"{tutorial.name} {size}: despina checked" in proc.stdout
    assert (sorted(figures.iterdir()) if figures.exists() else []) == before


def test_every_tutorial_page_has_its_figure_case() -> None:
    pages = sorted(p.stem for p in (ROOT / "docs" / "tutorials").glob("0*.md"))
    assert [t.name for t in tutorial_cases.TUTORIALS] == pages
    assert all(t.sizes and t.dry_sizes and t.unit in tutorial_cases.UNITS for t in tutorial_cases.TUTORIALS)


def test_unknown_tutorial_is_refused() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--only", "09-nothing"], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2 and "unknown tutorial(s) 09-nothing; choose from 01-vector-add" in proc.stderr


def test_chart_draws_each_series_and_skips_missing_points() -> None:
    xs = [4096, 16384, 65536]
    svg = tutorial_plot.line_chart("Vector addition", "elements", "GB/s", xs,
                                   {"despina": [100.0, 400.0, 900.0], "triton": [110.0, None, 950.0], "torch": [None] * 3})
    root = ET.fromstring(svg)
    assert len(root.findall(f"{SVG}polyline")) == 2  # torch has no point to join
    assert len(root.findall(f"{SVG}circle")) == 5
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert {"4Ki", "16Ki", "64Ki", "GB/s", "elements", "despina", "triton", "torch: no data", "1000"} <= set(texts)


def test_chart_needs_a_size() -> None:
    with pytest.raises(ValueError, match="at least one size"):
        tutorial_plot.line_chart("t", "x", "GB/s", [], {})
