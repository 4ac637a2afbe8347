"""Debian's headless Chromium driven through its chromedriver (Selenium), for the viewer's browser tests;
and just enough of PNG to read a screenshot's pixels."""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
import zlib
from collections.abc import Iterator
from typing import Any

import pytest

try:
    from selenium.webdriver.support.wait import WebDriverWait
except ImportError:  # chrome() says what is missing
    WebDriverWait = None

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--window-size=1400,1000",
         # nothing but the daemon resolves: a page that needed a CDN would show it
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1")


def _missing(message: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def chrome() -> Iterator[Any]:
    """A headless Chromium session (one a test module), quit afterwards."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _missing("selenium is not installed (pip install -e '.[dev]')")
    browser = shutil.which("chromium")
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        _missing("Debian's chromium and chromium-driver are not installed (apt-get install -y chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = str(browser)
    for flag in FLAGS:
        options.add_argument(flag)
    with tempfile.TemporaryDirectory() as profile:
        options.add_argument(f"--user-data-dir={profile}")
        session = webdriver.Chrome(service=Service(str(driver)), options=options)
        session.set_page_load_timeout(30)
        try:
            yield session
        finally:
            session.quit()


def pixels(png: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and rows of RGB(A) bytes of an 8-bit, non-interlaced PNG (as Chromium writes them)."""
    assert png.startswith(b"\x89PNG\r\n\x1a\n"), "not a PNG"
    pos, data, header = 8, b"", b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos:pos + 4])
        kind, body = png[pos + 4:pos + 8], png[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            data += body
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
    bpp = 3 if colour == 2 else 4
    raw, stride, rows, prev = zlib.decompress(data), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows


def has_colour(png: bytes, rgb: tuple[int, int, int]) -> bool:
    """Whether any pixel of the screenshot is `rgb`."""
    width, _, rows = pixels(png)
    bpp = len(rows[0]) // width
    return any(bytes(rgb) == row[i:i + 3] for row in rows for i in range(0, len(row), bpp))
