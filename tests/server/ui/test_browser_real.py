"""The viewer in a real browser on a daemon with the real NVPTX backend (llvmlite, nvJitLink; no GPU
needed): every real stage on the page, the kernel's registers and occupancy, SASS when the daemon has
nvdisasm (and why not when it has none)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from despina.compiler.backends.nvptx import toolkit

from ..conftest import Daemon, unique
from .browser import WebDriverWait, chrome
from .test_routes import compile_

pytest.importorskip("llvmlite")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from chrome()


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Daemon, str]]:
    d = Daemon(tmp_path_factory.mktemp("viewer-real"), compiler=None)
    with httpx.Client(base_url=d.http, timeout=120) as http:
        key = compile_(http, salt=unique())
    yield d, key
    d.stop()


def pane(browser: Any, stage: str) -> Any:
    browser.find_element("css selector", f'.tab[data-tab="{stage}"]').click()
    found = browser.find_element("css selector", f'.pane[data-pane="{stage}"]')
    assert found.is_displayed()
    return found


def test_every_stage_of_a_real_kernel(browser: Any, real: tuple[Daemon, str], tmp_path: Path) -> None:
    daemon, key = real
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
    browser.get_screenshot_as_file(str(tmp_path / "kernel-real.png"))
