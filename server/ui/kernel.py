"""One kernel's page: its facts and resources, its source with the specialization, and every stage in
tabs beside the source, each stage line linked to the source line it came from (and back).

The line table is the one `GET /v1/kernels/{key}/lines` serves:
`{"source": {"file", "first_line", "text": [...]} | None, "stages": {"ptx": {"<stage line>": <source line>}}}`
(a stage absent when its lines are not known); without it the page shows no links.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple
from urllib.parse import quote

from despina.compiler.backends.nvptx.occupancy import occupancy

from .html import e, page, seconds, size, table

STAGES = {"ir": "Tile IR", "gpuir": "GPU IR", "llir": "LLVM IR", "ptx": "PTX", "sass": "SASS"}
MAX_LINES = 20_000  # of one stage on a page; the whole text is a link away


class Shown(NamedTuple):
    """One stage as the page shows it: its text, or None and why there is none."""

    text: str | None
    note: str = ""


def _capability(target: str) -> int | None:
    digits = target[3:5] if target.startswith("sm_") else ""
    return int(digits) if digits.isdigit() else None


def occupancy_text(m: dict[str, Any]) -> str:
    registers, target = m.get("registers"), str(m.get("target", ""))
    threads = m.get("num_threads") or 32 * int(m.get("num_warps") or 0)
    capability = _capability(target)
    if not isinstance(registers, int) or registers <= 0 or not threads or capability is None:
        return "unknown (the backend reported no register count)"
    o = occupancy(capability, registers, int(threads), int(m.get("shared") or 0))
    return (f"{o.blocks} blocks of {threads} threads an SM on {target}: {o.warps} of {o.max_warps} warps "
            f"({o.fraction:.0%}), limited by {o.limit}")


def resources(m: dict[str, Any]) -> str:
    """Registers, spills, shared memory and occupancy, from the kernel's metadata."""
    def known(k: str, fmt: Any = str) -> str:
        return e(fmt(m[k])) if k in m else '<span class="na">not reported</span>'

    rows = [
        ["registers a thread", known("registers")],
        ["spills", e(f"{m['spill_stores']} bytes stored, {m['spill_loads']} bytes loaded")
         if "spill_stores" in m and "spill_loads" in m else '<span class="na">not reported</span>'],
        ["stack", known("stack", lambda v: f"{v} bytes")],
        ["shared memory", known("shared", size)],
        ["threads a block", e(m.get("num_threads") or 32 * int(m.get("num_warps") or 0))],
        ["occupancy", f'<span id="occupancy">{e(occupancy_text(m))}</span>'],
    ]
    return f'<section class="resources"><h2>Resources</h2>{table(["", ""], rows, "facts")}</section>'


def specialization(ir: str | None) -> str:
    """The tile IR's module attributes (what the kernel was specialized on) and the kernel's signature."""
    if ir is None:
        return ""
    shown = [line for line in ir.splitlines()[:50] if line.startswith(("module", "func"))]
    if not shown:
        return ""
    return f'<section class="spec"><h2>Specialization</h2><pre>{e(chr(10).join(shown))}</pre></section>'


def source(lines: dict[str, Any]) -> str:
    src = lines.get("source")
    if not src:
        why = (f"the daemon could not read its line maps: {lines['error']}" if lines.get("error") else
               "the daemon keeps the source lines only of kernels whose IR carries them")
        return ('<section class="source"><h2>Source</h2><p class="na" id="no-source">The source is not available '
                f"for this kernel: {e(why)}.</p></section>")
    first = int(src.get("first_line", 1))
    rows = "".join(f'<div class="l s" data-line="{first + i}"><span class="n">{first + i}</span><code>{e(t)}</code></div>'
                   for i, t in enumerate(src.get("text", [])))
    return (f'<section class="source"><h2>Source <small>{e(src.get("file", ""))}</small></h2>'
            f'<div class="code" id="source">{rows}</div></section>')


def stage_lines(stage: str, text: str, links: dict[str, int]) -> str:
    out = []
    for n, line in enumerate(text.splitlines()[:MAX_LINES], 1):
        src = links.get(str(n))
        attr = f' data-src="{int(src)}"' if isinstance(src, int) else ""
        out.append(f'<div class="l" id="{stage}-{n}"{attr}><span class="n">{n}</span><code>{e(line)}</code></div>')
    return "".join(out)


def _pane(key: str, stage: str, shown: Shown, links: dict[str, int], visible: bool) -> str:
    hidden = "" if visible else " hidden"
    if shown.text is None:
        body = f'<p class="na">{e(shown.note)}</p>'
    else:
        count = shown.text.count("\n") + 1
        cut = (f'<p class="na">The first {MAX_LINES} of {count} lines; <a href="/ui/kernels/{quote(key)}/{stage}.txt">'
               "the whole text</a>.</p>" if count > MAX_LINES else "")
        body = f'{cut}<div class="code">{stage_lines(stage, shown.text, links)}</div>'
    return f'<div class="pane" data-pane="{stage}"{hidden}>{body}</div>'


def stages(key: str, shown: dict[str, Shown], lines: dict[str, Any]) -> str:
    table_ = lines.get("stages") or {}
    first = next((s for s in STAGES if shown.get(s, Shown(None)).text is not None), "ir")
    tabs = "".join(f'<button type="button" class="tab{" on" if s == first else ""}" data-tab="{s}">{label}'
                   f'<b class="count" data-count="{s}"></b></button>' for s, label in STAGES.items())
    panes = "".join(_pane(key, s, shown.get(s, Shown(None, "not produced")), table_.get(s) or {}, s == first)
                    for s in STAGES)
    return (f'<section class="stages"><div class="tabs" role="tablist">{tabs}'
            '<button type="button" class="toggle" id="side-by-side">Side by side</button></div>'
            f'<div class="panes">{panes}</div></section>')


def facts(info: dict[str, Any]) -> str:
    m = info.get("metadata", {})
    rows = [["key", f"<code>{e(info['key'])}</code>"], ["target", e(info.get("target", ""))],
            ["options", e(", ".join(f"{k}={v}" for k, v in info.get("options", {}).items()))],
            ["tier", e(info.get("origin") or "+".join(info.get("tiers", [])))], ["created", e(info.get("created", ""))],
            ["last used", e(info.get("last_used", ""))], ["hits", e(info.get("hits", 0))],
            ["compile time", e(seconds(m.get("compile_seconds")))],
            ["stage sizes", e(", ".join(f"{k} {size(v)}" for k, v in info.get("sizes", {}).items()))]]
    return f'<section class="about">{table(["", ""], rows, "facts")}</section>'


def others(key: str, same_name: list[dict[str, Any]]) -> str:
    links = [f'<li><a href="/ui/diff?k={quote(key)}&amp;k={quote(str(o["key"]))}">{e(o["name"])} '
             f'{e(", ".join(f"{k}={v}" for k, v in o.get("options", {}).items()))} {e(o.get("target", ""))} '
             f'<code>{e(str(o["key"])[:12])}</code></a></li>' for o in same_name if o["key"] != key]
    if not links:
        return ""
    return f'<section class="others"><h2>Diff with</h2><ul>{"".join(links)}</ul></section>'


def kernel_page(info: dict[str, Any], shown: dict[str, Shown], lines: dict[str, Any],
                same_name: Sequence[dict[str, Any]] = (), signed_in: bool = False) -> str:
    """`info` as `CompileService.describe` gives it, each stage's text (or why there is none), the line
    table, and the other kernels of the same name (to diff with)."""
    ir = shown.get("ir", Shown(None)).text
    body = (f'<h1 id="name">{e(info.get("name") or "(unnamed)")}</h1><div class="top">{facts(info)}'
            f'{resources(info.get("metadata", {}))}{specialization(ir)}</div><div class="viewer">{source(lines)}{stages(str(info["key"]), shown, lines)}</div>'
            f'{others(str(info["key"]), list(same_name))}')
    return page(str(info.get("name") or "kernel"), body, signed_in=signed_in)
