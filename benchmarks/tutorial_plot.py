"""A line chart as plain SVG, for the tutorials' figures: no plotting library needed on the GPU host,
and the page shows it without any script.

    svg = line_chart("Vector addition", "elements", "GB/s", [4096, 16384], {"despina": [90.1, 310.4]})
"""

from __future__ import annotations

import math
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 640, 400
LEFT, RIGHT, TOP, BOTTOM = 70, 140, 40, 60
COLORS = {"despina": "#3f51b5", "triton": "#e65100", "torch": "#2e7d32"}


def _label(value: float) -> str:
    """4096 -> 4Ki, 1048576 -> 1Mi; other numbers as they are."""
    for power, suffix in ((30, "Gi"), (20, "Mi"), (10, "Ki")):
        if value >= 1 << power and value % (1 << power) == 0:
            return f"{int(value) >> power}{suffix}"
    return f"{value:g}"


def _nice_max(top: float) -> tuple[float, float]:
    """An axis maximum at or above `top` and its tick step (1, 2 or 5 times a power of ten)."""
    if top <= 0:
        return 1.0, 0.25
    raw = top / 5
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return step * math.ceil(top / step), step


def line_chart(title: str, x_label: str, unit: str, xs: list[int], series: dict[str, list[float | None]]) -> str:
    """`series[name][i]` is the value at `xs[i]` (None: no point). The x axis is logarithmic when the
    sizes grow geometrically, as the tutorials' sizes do."""
    if not xs:
        raise ValueError("a chart needs at least one size")
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    positions = [math.log2(x) for x in xs] if min(xs) > 0 else [float(x) for x in xs]
    lo, hi = min(positions), max(positions)
    span = hi - lo or 1.0

    def px(i: int) -> float:
        return LEFT + (positions[i] - lo) / span * plot_w if len(xs) > 1 else LEFT + plot_w / 2

    values = [v for vs in series.values() for v in vs if v is not None]
    y_max, step = _nice_max(max(values, default=0.0))

    def py(v: float) -> float:
        return TOP + plot_h - v / y_max * plot_h

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
           f'height="{HEIGHT}" font-family="sans-serif" font-size="12">',
           f"<title>{escape(title)}</title>",
           f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
           f'<text x="{LEFT}" y="22" font-size="14" font-weight="bold">{escape(title)}</text>']
    ticks = round(y_max / step)
    for t in range(ticks + 1):
        v = t * step
        out.append(f'<line x1="{LEFT}" y1="{py(v):.1f}" x2="{LEFT + plot_w}" y2="{py(v):.1f}" stroke="#e0e0e0"/>')
        out.append(f'<text x="{LEFT - 6}" y="{py(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    for i, x in enumerate(xs):
        out.append(f'<text x="{px(i):.1f}" y="{TOP + plot_h + 18}" text-anchor="middle">{_label(x)}</text>')
    out.append(f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{LEFT + plot_w}" y2="{TOP + plot_h}" stroke="#444"/>')
    out.append(f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}" stroke="#444"/>')
    out.append(f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 18}" text-anchor="middle">{escape(x_label)}</text>')
    out.append(f'<text x="18" y="{TOP + plot_h / 2}" text-anchor="middle" '
               f'transform="rotate(-90 18 {TOP + plot_h / 2})">{escape(unit)}</text>')
    for n, (name, vs) in enumerate(series.items()):
        color = COLORS.get(name, "#757575")
        points = [(px(i), py(v)) for i, v in enumerate(vs) if v is not None]
        if len(points) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
            out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        out += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"/>' for x, y in points]
        ly = TOP + 10 + 20 * n
        out.append(f'<line x1="{WIDTH - RIGHT + 15}" y1="{ly}" x2="{WIDTH - RIGHT + 35}" y2="{ly}" stroke="{color}" '
                   'stroke-width="2"/>')
        label = name if points else f"{name}: no data"  # every point failed: the JSON says why
        out.append(f'<text x="{WIDTH - RIGHT + 40}" y="{ly + 4}">{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
