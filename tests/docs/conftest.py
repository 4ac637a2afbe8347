"""The documentation site, built once per session with `mkdocs build --strict` (tests/docs/)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def mkdocs_command() -> list[str]:
    """The `mkdocs` script beside this Python when there is one (as a user runs it: its folder, which holds
    the `despina` script too, comes first on sys.path), else `python -m mkdocs`."""
    script = Path(sys.executable).parent / "mkdocs"
    return [str(script)] if script.exists() else [sys.executable, "-m", "mkdocs"]


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([*mkdocs_command(), "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    return out


def html(site: Path, page: str) -> str:
    """The built HTML of `page` (its path under docs/ without `.md`, e.g. 'language/memory')."""
    return (site / page / "index.html").read_text() if page != "index" else (site / "index.html").read_text()
