"""The viewer's pages rendered without a browser or a daemon: every value escaped, pages with stages
or the line table missing, the diff, the plots."""

from __future__ import annotations

import re

from despina.server.ui.diff import diff_page, line_diff
from despina.server.ui.html import e, error_page
from despina.server.ui.kernel import MAX_LINES, Shown, kernel_page
from despina.server.ui.listing import kernels_page, name_glob
from despina.server.ui.sampler import Snapshot
from despina.server.ui.stats import hit_ratios, stats_page
from despina.server.ui.svg import bars

EVIL = "<script>alert(1)</script>"
KEY = "ab" * 32


def info(name: str = "add_kernel", key: str = KEY, **metadata: object) -> dict[str, object]:
    return {"key": key, "name": name, "target": "sm_90", "created": "2026-11-24T10:00:00.000Z",
            "last_used": "2026-11-24T10:05:00.000Z", "hits": 3, "options": {"num_warps": 4, "num_stages": 3},
            "sizes": {"ir": 100, "ptx": 2000, "cubin": 4096}, "tiers": ["memory"], "origin": "compiled",
            "compile_seconds": 0.25, "metadata": {"name": name, "target": "sm_90", "num_warps": 4, **metadata}}


def test_a_kernel_named_script_is_text_everywhere() -> None:
    shown = {"ir": Shown(f"module {{}} {{\nfunc @{EVIL}() kernel {{\n}}"), "ptx": Shown(f"// {EVIL}\nret;")}
    lines = {"source": {"file": EVIL, "first_line": 1, "text": [f"def {EVIL}():"]}, "stages": {}}
    pages = [kernel_page(info(EVIL), shown, lines), kernels_page([info(EVIL)], EVIL),
             diff_page(info(EVIL), info(EVIL, "cd" * 32), shown, shown), error_page(404, EVIL, EVIL)]
    for html in pages:
        assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        assert re.findall(r"<script[^>]*>", html) == ['<script src="/ui/static/viewer.js" defer>']
    assert e('" onmouseover="x') == "&quot; onmouseover=&quot;x"


def test_missing_stages_and_no_line_table_say_so() -> None:
    shown = {"ir": Shown("module {} {\n}"), "sass": Shown(None, "this daemon has no nvdisasm to disassemble its cubin")}
    html = kernel_page(info(), shown, {"source": None, "stages": {}})
    assert 'id="no-source"' in html and "The source is not available" in html
    assert "this daemon has no nvdisasm" in html
    assert 'data-pane="llir" hidden><p class="na">not produced</p>' in html
    assert "data-src" not in html  # nothing to link
    assert "unknown (the backend reported no register count)" in html
    broken = kernel_page(info(), shown, {"source": None, "stages": {}, "error": f"its line maps are not JSON {EVIL}"})
    assert "could not read its line maps: its line maps are not JSON &lt;script&gt;" in broken


def test_stage_lines_link_to_their_source_lines() -> None:
    shown = {"ir": Shown("a\nb\nc"), "ptx": Shown("x\ny")}
    lines = {"source": {"file": "k.py", "first_line": 10, "text": ["def k():", "    x = 1"]},
             "stages": {"ir": {"2": 11, "3": 11}, "ptx": {"1": 10}}}
    html = kernel_page(info(), shown, lines)
    assert '<div class="l s" data-line="10"><span class="n">10</span><code>def k():</code></div>' in html
    assert '<div class="l" id="ir-2" data-src="11">' in html and '<div class="l" id="ir-3" data-src="11">' in html
    assert '<div class="l" id="ptx-1" data-src="10">' in html and 'id="ir-1" data-src' not in html


def test_resources_and_occupancy_from_the_metadata() -> None:
    m = {"registers": 40, "spill_stores": 8, "spill_loads": 4, "stack": 16, "shared": 16384, "num_threads": 256}
    html = kernel_page(info(**m), {}, {"source": None, "stages": {}})
    assert "8 bytes stored, 4 bytes loaded" in html and "16.0 KiB" in html
    # 40 registers: 1280 a warp, 12 warps a sub-partition -> 48 warps, 6 blocks of 8
    assert "6 blocks of 256 threads an SM on sm_90: 48 of 64 warps (75%), limited by registers" in html


def test_a_long_stage_is_cut_with_a_link_to_all_of_it() -> None:
    html = kernel_page(info(), {"ptx": Shown("\n".join(["nop;"] * (MAX_LINES + 5)))}, {"source": None, "stages": {}})
    assert f"The first {MAX_LINES} of {MAX_LINES + 5} lines" in html and f"/ui/kernels/{KEY}/ptx.txt" in html
    assert f'id="ptx-{MAX_LINES}"' in html and f'id="ptx-{MAX_LINES + 1}"' not in html


def test_search_is_a_glob_or_a_substring() -> None:
    assert name_glob("add") == "*add*" and name_glob("add_*") == "add_*" and name_glob("  ") is None
    assert "No kernel matches" in kernels_page([], "zzz") and "holds no kernel yet" in kernels_page([])
    html = kernels_page([info()], "add", "sm_90", ("sm_80", "sm_90"))
    assert '<option value="sm_90" selected>' in html and f'href="/ui/kernels/{KEY}"' in html
    assert ">compiled<" in html and "250 ms" in html


def test_line_diff_shows_changed_lines_with_context() -> None:
    left = "\n".join(f"line {i}" for i in range(20))
    right = left.replace("line 10", "line ten") + "\nline 20"
    rows, removed, added = line_diff(left, right)
    assert (removed, added) == (1, 2)
    assert '<tr class="chg"><td class="n">11</td><td class="t"><code>line 10</code></td><td class="n">11</td>' in rows
    assert "<code>line 7</code>" in rows and "<code>line 6</code>" not in rows  # three lines of context
    same = diff_page(info(), info(key="cd" * 32, registers=40), {"ptx": Shown("a")}, {"ptx": Shown("a")})
    assert "identical (1 lines)" in same and '<tr class="chg"><th>registers</th><td></td><td>40</td></tr>' in same


def test_hit_ratio_series_and_plots() -> None:
    def snap(t: float, memory: int, compiled: int) -> Snapshot:
        return Snapshot(t, {"memory": memory, "disk": 0, "redis": 0, "compiled": compiled}, compiled, 0, 0, 1, 0, 0)

    snaps = [snap(0, 0, 0), snap(5, 3, 1), snap(10, 3, 1), snap(15, 4, 1)]
    ratios = hit_ratios(snaps)
    assert ratios["memory"] == [(5, 0.75), (15, 1.0)] and ratios["compiled"] == [(5, 0.25), (15, 0.0)]
    stats = {"requests": 5, "hits": {"memory": 4, "disk": 0, "redis": 0, "compiled": 1}, "errors": {}}
    html = stats_page(stats, snaps, [("50ms", 1), ("more", 0)], 5.0, now=20)
    assert "4 of 5 compile answers came from a cache (80%)" in html and html.count("<svg") == 3
    assert 'aria-label="share of compile answers by tier"' in html and "<polyline" in html
    assert "need two samples" in stats_page(stats, snaps[:1], [], 5.0)
    assert bars("h", [("1s", 2), ("2s", 0)]).count('class="bar"') == 2
