"""Two kernels side by side (two autotune configs, two targets): their facts, then each stage as a line
diff showing the changed lines with three lines of context."""

from __future__ import annotations

import difflib
from typing import Any
from urllib.parse import quote

from .html import e, page
from .kernel import MAX_LINES, STAGES, Shown, occupancy_text

CONTEXT = 3
COLUMNS = '<colgroup><col class="n"><col><col class="n"><col></colgroup>'  # fixed widths, whatever row comes first
FACTS = ("name", "target", "num_warps", "num_stages", "registers", "spill_stores", "spill_loads", "stack", "shared",
         "compile_seconds")


def _fact(info: dict[str, Any], name: str) -> str:
    m = info.get("metadata", {})
    return str(info.get(name, m.get(name, "")))


def facts(a: dict[str, Any], b: dict[str, Any]) -> str:
    rows = []
    for name in FACTS:
        x, y = _fact(a, name), _fact(b, name)
        rows.append(f'<tr class="{"same" if x == y else "chg"}"><th>{e(name)}</th><td>{e(x)}</td><td>{e(y)}</td></tr>')
    x, y = occupancy_text(a.get("metadata", {})), occupancy_text(b.get("metadata", {}))
    rows.append(f'<tr class="{"same" if x == y else "chg"}"><th>occupancy</th><td>{e(x)}</td><td>{e(y)}</td></tr>')
    head = "".join(f'<th><a href="/ui/kernels/{quote(str(i["key"]))}">{e(str(i["key"])[:16])}</a></th>' for i in (a, b))
    return f'<table class="facts diff"><thead><tr><th></th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _cell(n: int | None, text: str | None) -> str:
    if n is None:
        return '<td class="n"></td><td class="t"></td>'
    return f'<td class="n">{n}</td><td class="t"><code>{e(text)}</code></td>'


def line_diff(left: str, right: str) -> tuple[str, int, int]:
    """The side-by-side rows of the changed parts of two texts, and how many lines were removed and added."""
    a, b = left.splitlines()[:MAX_LINES], right.splitlines()[:MAX_LINES]
    rows: list[str] = []
    removed = added = 0
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(CONTEXT):
        rows.append(f'<tr class="hunk"><td colspan="4">lines {group[0][1] + 1} and {group[0][3] + 1}</td></tr>')
        for op, i1, i2, j1, j2 in group:
            removed += (i2 - i1) if op != "equal" else 0
            added += (j2 - j1) if op != "equal" else 0
            cls = {"equal": "eq", "replace": "chg", "delete": "del", "insert": "ins"}[op]
            for k in range(max(i2 - i1, j2 - j1)):
                i, j = i1 + k, j1 + k
                left_cell = _cell(i + 1, a[i]) if i < i2 else _cell(None, None)
                right_cell = _cell(j + 1, b[j]) if j < j2 else _cell(None, None)
                rows.append(f'<tr class="{cls}">{left_cell}{right_cell}</tr>')
    return "".join(rows), removed, added


def _pane(stage: str, x: Shown, y: Shown, visible: bool) -> tuple[str, str]:
    hidden = "" if visible else " hidden"
    if x.text is None or y.text is None:
        notes = "; ".join(f"{side}: {s.note}" for side, s in (("left", x), ("right", y)) if s.text is None)
        return "", f'<div class="pane" data-pane="{stage}"{hidden}><p class="na">{e(notes)}</p></div>'
    rows, removed, added = line_diff(x.text, y.text)
    if not rows:
        lines = x.text.count("\n") + 1
        return "=", f'<div class="pane" data-pane="{stage}"{hidden}><p class="same">identical ({lines} lines)</p></div>'
    return (f"-{removed} +{added}", f'<div class="pane" data-pane="{stage}"{hidden}><table class="linediff">{COLUMNS}'
                                    f"<tbody>{rows}</tbody></table></div>")


def diff_page(a: dict[str, Any], b: dict[str, Any], left: dict[str, Shown], right: dict[str, Shown],
              signed_in: bool = False) -> str:
    """`a` and `b` as `CompileService.describe` gives them, and their stages."""
    tabs, panes = [], []
    for n, (stage, label) in enumerate(STAGES.items()):
        count, pane = _pane(stage, left.get(stage, Shown(None, "not produced")),
                            right.get(stage, Shown(None, "not produced")), n == 0)
        tabs.append(f'<button type="button" class="tab{" on" if n == 0 else ""}" data-tab="{stage}">{label}'
                    f'<b class="count">{e(count)}</b></button>')
        panes.append(pane)
    body = (f'<h1>Diff <small>{e(a.get("name", ""))} and {e(b.get("name", ""))}</small></h1>{facts(a, b)}'
            f'<section class="stages"><div class="tabs" role="tablist">{"".join(tabs)}</div>'
            f'<div class="panes">{"".join(panes)}</div></section>')
    return page("Diff", body, signed_in=signed_in)
