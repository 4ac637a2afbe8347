"""The kernels page: every kernel of the daemon's memory and disk tiers, searchable, two of them diffable."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from despina.runtime.inventory import parse_when

from .html import age, e, page, seconds, size, table

COLUMNS = ["", "name", "target", "tier", "size", "age", "compile", "hits", "warps", "stages"]


def name_glob(search: str) -> str | None:
    """The name filter for a search: a glob as typed when it has one (`add_*`), else any name holding it."""
    search = search.strip()
    if not search:
        return None
    return search if any(c in search for c in "*?[") else f"*{search}*"


def tier(item: dict[str, Any]) -> str:
    """Where the kernel came from: the tier that answered its first request here, else where it is kept."""
    return str(item.get("origin") or "+".join(item.get("tiers", [])))


def _row(item: dict[str, Any], now: float | None) -> list[str]:
    key = str(item["key"])
    options = item.get("options", {})
    sizes = item.get("sizes", {})
    created = parse_when(str(item["created"]))
    return [
        f'<input type="checkbox" name="k" value="{e(key)}" aria-label="diff {e(item["name"])}">',
        f'<a class="kernel" href="/ui/kernels/{quote(key)}">{e(item["name"] or "(unnamed)")}</a>',
        e(item.get("target", "")),
        e(tier(item)),
        f'<span title="cubin {e(size(sizes.get("cubin")))}">{e(size(sum(sizes.values())))}</span>',
        f'<span title="{e(item.get("created", ""))}">{e(age(created, now))}</span>',
        e(seconds(item.get("compile_seconds"))),
        e(item.get("hits", 0)),
        e(options.get("num_warps", "")),
        e(options.get("num_stages", "")),
    ]


def kernels_page(items: list[dict[str, Any]], search: str = "", target: str = "", targets: tuple[str, ...] = (),
                 now: float | None = None, signed_in: bool = False) -> str:
    """`items` as `CompileService.kernels` lists them; the search form shows `search` and `target`."""
    choices = "".join(f'<option value="{e(t)}"{" selected" if t == target else ""}>{e(t)}</option>'
                      for t in ("", *targets))
    form = (f'<form class="search" method="get" action="/ui"><input id="search" type="search" name="q" '
            f'value="{e(search)}" placeholder="name, or a glob: add_*" autocomplete="off" aria-label="search">'
            f'<select name="target" aria-label="target">{choices}</select><button type="submit">Search</button></form>')
    if items:
        rows = [_row(i, now) for i in items]
        listing = (f'<form method="get" action="/ui/diff">{table(COLUMNS, rows, "kernels")}'
                   '<p><button type="submit" id="diff">Diff the two checked</button></p></form>')
    else:
        listing = ('<p class="empty">No kernel matches.</p>' if search or target else
                   '<p class="empty">This daemon holds no kernel yet: compile one through it (despina.jit with '
                   'DESPINA_SERVER, or POST /v1/compile).</p>')
    return page("Kernels", f'<h1>Kernels <small>{len(items)}</small></h1>{form}{listing}', signed_in=signed_in)
