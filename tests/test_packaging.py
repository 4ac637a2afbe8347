"""The distribution lists every package of the source tree, so that a regular (not editable)
install imports: a folder with an `__init__.py` that pyproject.toml does not name is left out of
the wheel, and `import despina` then fails there."""

from __future__ import annotations

from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11 on

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_folder_is_in_the_distribution() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = set()
    for name, folder in config["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([name, *rel.parts]))
    assert found - listed == set(), "pyproject.toml [tool.setuptools] packages misses these"
