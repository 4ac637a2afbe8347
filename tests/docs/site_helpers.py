"""What the documentation tests share (tests/docs/): the repository root, how to run mkdocs, a built page.
A module of its own name: a second rootless conftest.py would replace tests/conftest.py as `conftest`, which
other test modules import by that name."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def mkdocs_command() -> list[str]:
    """The `mkdocs` script beside this Python when there is one (as a user runs it: its folder, which holds
    the `despina` script too, comes first on sys.path), else `python -m mkdocs`."""
    script = Path(sys.executable).parent / "mkdocs"
    return [str(script)] if script.exists() else [sys.executable, "-m", "mkdocs"]


def html(site: Path, page: str) -> str:
    """The built HTML of `page` (its path under docs/ without `.md`, e.g. 'language/memory')."""
    return (site / page / "index.html").read_text() if page != "index" else (site / "index.html").read_text()
