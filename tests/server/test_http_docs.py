"""The API's documentation pages work offline (a real headless Chromium renders them with every host but
the daemon unresolvable), and they, /openapi.json and /metrics are open unless --protect-docs."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from despina.server import http_docs

from .conftest import Daemon, RedisProcess

BROWSERS = ("chromium-headless-shell", "chromium", "chromium-browser")


def browser() -> str:
    found = next((exe for exe in map(shutil.which, BROWSERS) if exe), None)
    if found is None:
        message = "no headless Chromium (apt-get install -y chromium-headless-shell)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found


def rendered(url: str) -> str:
    """The page's DOM after its scripts ran, with every host except 127.0.0.1 unresolvable (no CDN)."""
    out = subprocess.run(
        [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--virtual-time-budget=20000", "--dump-dom", url],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


@pytest.fixture(scope="module")
def protected(tmp_path_factory: pytest.TempPathFactory, shared_redis: RedisProcess) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("protected"), shared_redis.url, token="t0ken", extra=("--protect-docs",))
    yield d
    d.stop()


def test_assets_ship_with_the_package() -> None:
    names = {p.name for p in http_docs.assets().iterdir()}
    assert {"swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png"} <= names


def test_pages_name_no_other_host(daemon: Daemon) -> None:
    with httpx.Client(base_url=daemon.http, timeout=30) as http:
        r = http.get("/", follow_redirects=False)
        assert r.status_code == 307 and r.headers["location"] == "/ui"
        for page, script in (("/docs", "swagger-ui-bundle.js"), ("/redoc", "redoc.standalone.js")):
            html = http.get(page).text
            assert f"{http_docs.STATIC}/{script}" in html and "https://" not in html and "http://" not in html
            asset = http.get(f"{http_docs.STATIC}/{script}")
            assert asset.status_code == 200 and len(asset.content) > 100_000


def test_swagger_and_redoc_render_offline(daemon: Daemon) -> None:
    swagger = rendered(daemon.http + "/docs")
    for path in ("/v1/compile", "/v1/execute", "/v1/kernels/{key}"):
        assert f'data-path="{path}"' in swagger  # an operation Swagger UI drew from /openapi.json
    redoc = rendered(daemon.http + "/redoc")
    assert "Despina compilation service" in redoc and "/v1/compile" in redoc


def test_docs_and_metrics_need_no_token_by_default(tmp_path: Path, shared_redis: RedisProcess) -> None:
    d = Daemon(tmp_path, shared_redis.url, token="t0ken")
    try:
        with httpx.Client(base_url=d.http, timeout=30) as http:
            for path in ("/docs", "/redoc", "/openapi.json", "/metrics", "/healthz", f"{http_docs.STATIC}/swagger-ui.css"):
                assert http.get(path).status_code == 200, path
            assert http.get("/v1/stats").status_code == 401
            assert http.get("/v1/stats", headers=d.headers()).status_code == 200
    finally:
        d.stop()


def test_protect_docs_asks_for_the_token_there_too(protected: Daemon) -> None:
    with httpx.Client(base_url=protected.http, timeout=30) as http:
        for path in ("/docs", "/redoc", "/openapi.json", "/metrics", f"{http_docs.STATIC}/swagger-ui.css", "/"):
            r = http.get(path, follow_redirects=False)
            assert r.status_code == 401 and r.json()["error"]["code"] == "UNAUTHENTICATED", path
            assert http.get(path, headers=protected.headers(), follow_redirects=False).status_code in (200, 307)
        assert http.get("/healthz").status_code == 200  # probes never need it
