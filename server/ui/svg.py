"""Small plots as inline SVG, drawn on the server: lines over time and a histogram. No plotting library,
no script; colours come from the stylesheet (classes s0, s1, ...)."""

from __future__ import annotations

from .html import e

W, H = 560, 180
LEFT, RIGHT, TOP, BOTTOM = 44, 10, 10, 36


def _frame(label: str, y_top: str, x_left: str, x_right: str, inner: str, legend: str = "") -> str:
    x0, x1, y0, y1 = LEFT, W - RIGHT, TOP, H - BOTTOM
    axes = (f'<line class="axis" x1="{x0}" y1="{y1}" x2="{x1}" y2="{y1}"/>'
            f'<line class="axis" x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}"/>'
            f'<text class="tick" x="{x0 - 4}" y="{y0 + 8}" text-anchor="end">{e(y_top)}</text>'
            f'<text class="tick" x="{x0 - 4}" y="{y1}" text-anchor="end">0</text>'
            f'<text class="tick" x="{x0}" y="{y1 + 14}">{e(x_left)}</text>'
            f'<text class="tick" x="{x1}" y="{y1 + 14}" text-anchor="end">{e(x_right)}</text>')
    return (f'<svg class="plot" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{e(label)}">'
            f"<title>{e(label)}</title>{axes}{inner}{legend}</svg>")


def lines(label: str, series: dict[str, list[tuple[float, float]]], t0: float, t1: float, y_max: float,
          y_top: str, x_left: str, x_right: str) -> str:
    """One polyline a series of (time, value) points between `t0` and `t1` and 0 and `y_max`, with a legend."""
    x0, x1, y0, y1 = LEFT, W - RIGHT, TOP, H - BOTTOM
    span, top = max(t1 - t0, 1e-9), max(y_max, 1e-9)
    inner, legend = [], []
    for n, (name, points) in enumerate(series.items()):
        xy = [(x0 + (t - t0) / span * (x1 - x0), y1 - min(v, top) / top * (y1 - y0)) for t, v in points]
        if len(xy) == 1:
            inner.append(f'<circle class="s{n}" cx="{xy[0][0]:.1f}" cy="{xy[0][1]:.1f}" r="2"/>')
        elif xy:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
            inner.append(f'<polyline class="s{n}" points="{path}"><title>{e(name)}</title></polyline>')
        lx = x0 + n * 110
        legend.append(f'<rect class="s{n} key" x="{lx}" y="{H - 12}" width="10" height="4"/>'
                      f'<text class="tick" x="{lx + 14}" y="{H - 7}">{e(name)}</text>')
    return _frame(label, y_top, x_left, x_right, "".join(inner), "".join(legend))


def bars(label: str, counts: list[tuple[str, int]]) -> str:
    """A histogram: one bar a (bucket label, count), the label under it."""
    x0, x1, y0, y1 = LEFT, W - RIGHT, TOP, H - BOTTOM
    top = max((c for _, c in counts), default=0) or 1
    width = (x1 - x0) / max(len(counts), 1)
    inner = []
    for n, (name, count) in enumerate(counts):
        h = count / top * (y1 - y0)
        x = x0 + n * width
        inner.append(f'<rect class="bar" x="{x + 2:.1f}" y="{y1 - h:.1f}" width="{width - 4:.1f}" height="{h:.1f}">'
                     f"<title>{e(name)}: {count}</title></rect>"
                     f'<text class="tick" x="{x + width / 2:.1f}" y="{y1 + 14}" text-anchor="middle">{e(name)}</text>')
        if count:
            inner.append(f'<text class="tick" x="{x + width / 2:.1f}" y="{y1 - h - 2:.1f}" '
                         f'text-anchor="middle">{count}</text>')
    return _frame(label, str(top), "", "", "".join(inner))
