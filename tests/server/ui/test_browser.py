"""The viewer in a real browser (Debian's headless Chromium through chromedriver) on a real daemon with the
fake backend: the list and its search, a `<script>`-named kernel shown as text, the tabs, a diff picked
from the list, the statistics' plots, and the sign-in of a daemon with a token. Screenshots go to the
test's temporary folder (docs/viewer/ holds copies)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ..conftest import Daemon, unique
from .browser import WebDriverWait, chrome, has_colour, pixels
from .test_routes import EVIL, compile_

NAME = f"saxpy_{unique()[:6]}"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from chrome()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="module")
def viewer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("viewer"))
    with httpx.Client(base_url=d.http, timeout=30) as http:
        compile_(http, name=NAME, warps=4)
        compile_(http, name=NAME, warps=8)
        compile_(http, name=NAME, warps=4)  # a memory hit, for the statistics
        compile_(http, fake_name=EVIL, salt=EVIL)
    yield d
    d.stop()


def shot(browser: Any, shots: Path, name: str) -> bytes:
    png: bytes = browser.get_screenshot_as_png()
    (shots / f"{name}.png").write_bytes(png)
    width, height, _ = pixels(png)
    assert (width, height) == (browser.execute_script("return innerWidth"), browser.execute_script("return innerHeight"))
    return png


def visible_rows(browser: Any) -> list[str]:
    return [r.find_element("css selector", ".kernel").text
            for r in browser.find_elements("css selector", "table.kernels tbody tr") if r.is_displayed()]


def test_list_and_live_search(browser: Any, viewer: Daemon, shots: Path) -> None:
    browser.get(viewer.http + "/")  # redirected to the viewer
    assert browser.current_url == viewer.http + "/ui"
    assert sorted(visible_rows(browser)) == sorted([NAME, NAME, EVIL])
    shot(browser, shots, "kernels")
    browser.find_element("id", "search").send_keys("script")
    assert visible_rows(browser) == [EVIL]  # filtered as typed, before the form is sent


def test_a_kernel_named_script_renders_as_text(browser: Any, viewer: Daemon) -> None:
    from selenium.common.exceptions import NoAlertPresentException  # selenium: imported where chrome() found it

    browser.get(viewer.http + "/ui")
    browser.find_element("link text", EVIL).click()
    heading = WebDriverWait(browser, 10).until(lambda b: b.find_elements("id", "name"))[0]
    assert heading.text == EVIL and heading.is_displayed()
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018 (reading it is the check: an alert would be open)
    assert browser.execute_script("return document.querySelectorAll('script').length") == 1


def test_stage_tabs(browser: Any, viewer: Daemon, shots: Path) -> None:
    browser.get(viewer.http + "/ui?q=" + NAME)
    browser.find_element("link text", NAME).click()
    WebDriverWait(browser, 10).until(lambda b: b.find_elements("css selector", ".pane"))
    pane = {p.get_attribute("data-pane"): p for p in browser.find_elements("css selector", ".pane")}
    assert pane["ir"].is_displayed() and not pane["ptx"].is_displayed()
    browser.find_element("css selector", '.tab[data-tab="ptx"]').click()
    assert pane["ptx"].is_displayed() and not pane["ir"].is_displayed()
    assert "fake PTX for " + NAME in pane["ptx"].text
    browser.find_element("css selector", '.tab[data-tab="sass"]').click()
    assert pane["sass"].find_element("css selector", ".na").text  # why there is no SASS, said on the page
    browser.find_element("id", "side-by-side").click()
    assert all(p.is_displayed() for p in pane.values())
    browser.find_element("css selector", '.tab[data-tab="ir"]').click()
    shot(browser, shots, "kernel-fake")


def test_diff_of_two_checked_kernels(browser: Any, viewer: Daemon, shots: Path) -> None:
    browser.get(viewer.http + "/ui?q=" + NAME)
    for box in browser.find_elements("css selector", 'input[name="k"]'):
        box.click()
    browser.find_element("id", "diff").click()
    WebDriverWait(browser, 10).until(lambda b: "/ui/diff?k=" in b.current_url, browser.page_source[-3000:])
    changed = browser.find_element("css selector", "table.facts tr.chg")
    assert changed.text.split() == ["num_warps", "4", "8"] or changed.text.split() == ["num_warps", "8", "4"]
    assert has_colour(changed.screenshot_as_png, (0xFD, 0xEC, 0xC8))  # the changed row is marked
    browser.find_element("css selector", '.tab[data-tab="ptx"]').click()
    rows = browser.find_elements("css selector", '.pane[data-pane="ptx"] tr.chg')
    assert len(rows) == 1 and "warps" in rows[0].text
    shot(browser, shots, "diff")


def test_statistics_plots(browser: Any, viewer: Daemon, shots: Path) -> None:
    deadline = time.monotonic() + 15  # the daemon samples every 5 s; the plots need two samples
    while True:
        browser.get(viewer.http + "/ui/stats")
        plots = browser.find_elements("css selector", "svg.plot")
        if len(plots) == 3 or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert [p.get_attribute("aria-label") for p in plots] == [
        "share of compile answers by tier", "compiles and workers", "compile latency histogram"]
    assert browser.find_element("id", "hit-ratio").text.startswith("1 of 4 compile answers came from a cache")
    bars = browser.find_elements("css selector", "svg rect.bar")
    assert sum(int(b.find_element("css selector", "title").get_attribute("textContent").split(": ")[1])
               for b in bars) == 3  # three compiles
    shot(browser, shots, "stats")


def test_sign_in_with_the_token(browser: Any, tmp_path: Path, shots: Path) -> None:
    d = Daemon(tmp_path, token="t0ken")
    try:
        with httpx.Client(base_url=d.http, timeout=30) as http:
            compile_(http, d.headers(), name=NAME)
        browser.get(d.http + "/ui")
        assert "/ui/login" in browser.current_url and NAME not in browser.page_source
        browser.find_element("id", "token").send_keys("wrong")
        browser.find_element("id", "sign-in").click()
        error = WebDriverWait(browser, 10).until(lambda b: b.find_elements("id", "login-error"))[0]
        assert error.is_displayed() and NAME not in browser.page_source
        shot(browser, shots, "login")
        browser.find_element("id", "token").send_keys("t0ken")
        browser.find_element("id", "sign-in").click()
        WebDriverWait(browser, 10).until(lambda b: b.current_url == d.http + "/ui")
        assert visible_rows(browser) == [NAME]
        assert browser.get_cookies()[0]["httpOnly"] is True
    finally:
        d.stop()
