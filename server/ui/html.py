"""The viewer's HTML: one page shell, escaping, and the small formats every page shares.

Everything a page shows from a kernel (its name, its stages, its source, an error's message) goes
through `e`, so a kernel named `<script>` is text; the pages also carry a Content-Security-Policy
that runs no inline script and loads nothing from another host.
"""

from __future__ import annotations

import html
import time
from typing import Any

STATIC = "/ui/static"
# Scripts and styles only from this daemon, no inline script or style; inline SVG and data: images are fine.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
           "Cache-Control": "no-store"}


def e(value: Any) -> str:
    """`value` as text that HTML shows as it is, in element content and in quoted attributes alike."""
    return html.escape(str(value), quote=True)


def page(title: str, body: str, *, signed_in: bool = False) -> str:
    """A whole page: `title` (escaped here) and `body` (HTML the caller escaped)."""
    leave = ('<form method="post" action="/ui/logout" class="logout"><button type="submit">Sign out</button></form>'
             if signed_in else "")
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{e(title)} - despina</title>"
            f'<link rel="stylesheet" href="{STATIC}/viewer.css"><script src="{STATIC}/viewer.js" defer></script>'
            f'</head><body><header><a class="brand" href="/ui">despina</a><nav><a href="/ui">Kernels</a>'
            f'<a href="/ui/stats">Statistics</a><a href="/docs">API</a></nav>{leave}</header>'
            f"<main>{body}</main></body></html>\n")


def error_page(status: int, title: str, message: str, *, signed_in: bool = False) -> str:
    """The page for a request the viewer cannot answer (an unknown key, a bad parameter): what happened and
    where to go instead."""
    return page(title, f'<h1 class="error">{status} {e(title)}</h1><p class="message">{e(message)}</p>'
                       '<p><a href="/ui">Back to the kernels</a></p>', signed_in=signed_in)


def size(n: int | float | None) -> str:
    if n is None:
        return ""
    for unit in ("B", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def age(seconds_since_epoch: float, now: float | None = None) -> str:
    """How long ago: 42s, 7m, 3h, 2d."""
    delta = max(0.0, (time.time() if now is None else now) - seconds_since_epoch)
    for unit, length in (("d", 86400), ("h", 3600), ("m", 60)):
        if delta >= length:
            return f"{delta // length:.0f}{unit}"
    return f"{delta:.0f}s"


def seconds(s: float | None) -> str:
    if s is None:
        return ""
    if s < 0.01:
        return f"{s * 1000:.1f} ms"
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.2f} s"


def table(head: list[str], rows: list[list[str]], cls: str = "") -> str:
    """A table of cells the caller escaped (`head` is escaped here)."""
    th = "".join(f"<th>{e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{e(cls)}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'
