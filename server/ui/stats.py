"""The statistics page: the counters /v1/stats gives, the share of compile answers each cache tier gave
and the compiles over the last hour (from the sampler), and the compile latency histogram."""

from __future__ import annotations

import time
from typing import Any

from ..metrics import TIERS, Metrics
from . import svg
from .html import e, page, table
from .sampler import Snapshot


def latency_buckets(metrics: Metrics) -> list[tuple[str, int]]:
    """Compilations by time taken, one (label, count) a bucket of despina_compile_seconds."""
    cumulative = [(s.labels["le"], int(s.value)) for family in metrics.compile_seconds.collect()
                  for s in family.samples if s.name.endswith("_bucket")]
    out, before = [], 0
    for le, count in cumulative:
        bound = float(le)
        label = "more" if bound == float("inf") else (f"{bound * 1000:.0f}ms" if bound < 1 else f"{bound:g}s")
        out.append((label, count - before))
        before = count
    return out


def hit_ratios(snaps: list[Snapshot]) -> dict[str, list[tuple[float, float]]]:
    """Each tier's share of the compile answers given between one snapshot and the next (none where there were none)."""
    series: dict[str, list[tuple[float, float]]] = {t: [] for t in TIERS}
    for a, b in zip(snaps, snaps[1:]):
        deltas = {t: b.answers[t] - a.answers[t] for t in TIERS}
        total = sum(deltas.values())
        if total > 0:
            for t in TIERS:
                series[t].append((b.t, deltas[t] / total))
    return series


def activity(snaps: list[Snapshot]) -> dict[str, list[tuple[float, float]]]:
    """Compiles finished between snapshots, compiles running at each, and the compile workers alive."""
    return {"compiles": [(b.t, float(b.compiles - a.compiles)) for a, b in zip(snaps, snaps[1:])],
            "in flight": [(s.t, float(s.in_flight)) for s in snaps],
            "workers": [(s.t, float(s.workers)) for s in snaps]}


def _value(v: Any) -> str:
    if isinstance(v, dict):
        return e(", ".join(f"{k} {x}" for k, x in v.items()) or "none")
    if isinstance(v, list):
        return e(", ".join(map(str, v)) or "none")
    return e(v)


def _ago(seconds: float) -> str:
    return f"{seconds / 60:.0f} min ago" if seconds >= 60 else f"{seconds:.0f} s ago"


def stats_page(stats: dict[str, Any], snaps: list[Snapshot], latency: list[tuple[str, int]], interval_s: float,
               now: float | None = None, signed_in: bool = False) -> str:
    now = time.time() if now is None else now
    hits = stats.get("hits", {})
    answered = sum(hits.values())
    cached = answered - hits.get("compiled", 0)
    summary = (f'<p id="hit-ratio">{cached} of {answered} compile answers came from a cache '
               f'({cached / answered:.0%}).</p>' if answered else '<p id="hit-ratio">No compile answered yet.</p>')
    if len(snaps) >= 2:
        t0, t1 = snaps[0].t, snaps[-1].t
        span = _ago(now - t0)
        ratio = svg.lines("share of compile answers by tier", hit_ratios(snaps), t0, t1, 1.0, "100%", span, "now")
        act = activity(snaps)
        top = max([v for points in act.values() for _, v in points] + [1.0])
        work = svg.lines("compiles and workers", act, t0, t1, top, f"{top:g}", span, "now")
        plots = f'<h2>Cache answers by tier</h2>{ratio}<h2>Compiles and workers</h2>{work}'
    else:
        plots = (f'<p class="na">The plots over time need two samples; the daemon takes one every {interval_s:g} s.'
                 "</p>")
    histogram = svg.bars("compile latency histogram", latency)
    counters = table(["counter", "value"], [[e(k), _value(v)] for k, v in stats.items()], "counters")
    body = (f'<h1>Statistics</h1>{summary}{plots}<h2>Compile latency</h2>{histogram}'
            f'<h2>Counters</h2>{counters}')
    return page("Statistics", body, signed_in=signed_in)
