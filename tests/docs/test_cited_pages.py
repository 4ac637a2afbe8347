"""Every documentation page that a message of despina's cites (`docs/....md` in the source of the
client and the compiler: error messages, warnings, hints) exists, so that no message sends a user to
a page that was moved or never written."""

from __future__ import annotations

import re

from site_helpers import ROOT

CITED = re.compile(r"docs/[A-Za-z0-9_./-]+\.md")


def cited_pages() -> dict[str, list[str]]:
    """Each cited page, with the `file:line`s that cite it."""
    cited: dict[str, list[str]] = {}
    for package in ("client", "compiler"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                for page in CITED.findall(line):
                    cited.setdefault(page, []).append(f"{path.relative_to(ROOT)}:{number}")
    return cited


def test_every_page_a_message_cites_exists() -> None:
    cited = cited_pages()
    assert {"docs/language/index.md", "docs/language/math.md", "docs/language/extern.md"} <= set(cited), cited
    missing = {page: where for page, where in cited.items() if not (ROOT / page).is_file()}
    assert not missing, f"messages cite documentation pages that do not exist: {missing}"
