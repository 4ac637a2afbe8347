"""The viewer in a real browser on a daemon with the real NVPTX backend (llvmlite, nvJitLink; no GPU
needed): every real stage on the page, the kernel's registers and occupancy, SASS when the daemon has
nvdisasm (and why not when it has none), and a kernel traced from a file with its source lines linked
to every stage's lines both ways."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from despina.compiler.backends.nvptx import toolkit
from despina.compiler.ir.codec import encode

from ..conftest import Daemon, unique
from .browser import WebDriverWait, chrome, has_colour
from .test_routes import compile_

pytest.importorskip("llvmlite")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from chrome()


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Daemon, str, str]]:
    """A daemon on the NVPTX backend; the keys of a kernel built with the IR builder (no source) and of one
    traced from a file (tests/frontend/scale_kernel.py)."""
    from frontend.scale_kernel import load_kernel, traced

    d = Daemon(tmp_path_factory.mktemp("viewer-real"), compiler=None)
    ir = encode(traced(load_kernel(tmp_path_factory.mktemp("checkout"))))
    with httpx.Client(base_url=d.http, timeout=120) as http:
        built = compile_(http, salt=unique())
        r = http.post("/v1/compile", json={"ir": base64.b64encode(ir).decode(), "target": "sm_90"})
        assert r.status_code == 200, r.text
    yield d, built, str(r.json()["key"])
    d.stop()


def pane(browser: Any, stage: str) -> Any:
    browser.find_element("css selector", f'.tab[data-tab="{stage}"]').click()
    found = browser.find_element("css selector", f'.pane[data-pane="{stage}"]')
    assert found.is_displayed()
    return found


def test_every_stage_of_a_real_kernel(browser: Any, real: tuple[Daemon, str, str], tmp_path: Path) -> None:
    daemon, key, _ = real
    browser.get(f"{daemon.http}/ui/kernels/{key}")
    WebDriverWait(browser, 30).until(lambda b: b.find_elements("css selector", ".pane"))
    assert "%4 = program_id() {axis = 0} : int32" in pane(browser, "ir").text
    assert "#L0 = blocked<spt=" in pane(browser, "gpuir").text  # the layouts
    assert "define" in pane(browser, "llir").text and "ptx_kernel" in pane(browser, "llir").text
    assert ".visible .entry add_kernel" in pane(browser, "ptx").text
    sass = pane(browser, "sass").text
    if toolkit.find_nvdisasm() is None:
        assert "no nvdisasm" in sass
    else:
        assert "EXIT" in sass
    occupancy = browser.find_element("id", "occupancy").text
    assert "blocks of 128 threads an SM on sm_90" in occupancy and "limited by" in occupancy
    registers = browser.find_element("xpath", "//td[text()='registers a thread']/following-sibling::td").text
    assert registers.isdigit() and int(registers) > 0
    assert browser.find_element("id", "no-source").is_displayed()  # built, not traced: no source to link
    assert not browser.find_elements("css selector", "[data-src]")


def hits(browser: Any, stage: str) -> list[str]:
    """The text of the lit lines of `stage`."""
    return [el.get_attribute("textContent") for el in
            browser.find_elements("css selector", f'.pane[data-pane="{stage}"] .l.hit code')]


def test_a_source_line_lights_up_its_lines_in_every_stage(browser: Any, real: tuple[Daemon, str, str],
                                                          tmp_path: Path) -> None:
    from frontend.scale_kernel import LOAD_LINE, STORE_LINE

    daemon, _, key = real
    browser.get(f"{daemon.http}/ui/kernels/{key}")
    WebDriverWait(browser, 30).until(lambda b: b.find_elements("css selector", ".pane"))
    source = browser.find_element("css selector", f'#source .l[data-line="{LOAD_LINE}"]')
    assert "tl.load(src + offs, mask=mask)" in source.text
    source.click()
    assert "hit" in source.get_attribute("class")
    assert any("load(" in line for line in hits(browser, "ir"))
    assert any("ld.global" in line for line in hits(browser, "ptx"))
    assert not any("st.global" in line for line in hits(browser, "ptx"))
    if toolkit.find_nvdisasm() is not None:
        assert any("LDG" in line for line in hits(browser, "sass"))
    counts = {c.get_attribute("data-count"): c.text for c in browser.find_elements("css selector", "[data-count]")}
    assert counts["ptx"].strip().isdigit() and int(counts["ptx"]) == len(hits(browser, "ptx"))
    ptx = pane(browser, "ptx")
    store = next(el for el in ptx.find_elements("css selector", ".l[data-src]") if "st.global" in el.text)
    store.click()  # and back: a stage line lights up its source line and its siblings in the other stages
    lit = browser.find_elements("css selector", "#source .l.hit")
    assert [el.get_attribute("data-line") for el in lit] == [str(STORE_LINE)]
    assert "hit" in store.get_attribute("class") and any("store(" in line for line in hits(browser, "ir"))
    viewer = browser.find_element("css selector", ".viewer")
    assert has_colour(viewer.screenshot_as_png, (0xFF, 0xF3, 0xB0))  # the lit lines are drawn lit
    (tmp_path / "kernel-real.png").write_bytes(browser.get_screenshot_as_png())
