"""The viewer's routes on a real daemon (fake backend), read as HTML without a browser: 404 pages, not
tracebacks; everything escaped; the sign-in of a daemon with a token, refused and allowed."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator

import httpx
import pytest

from despina.server.auth import Tokens
from despina.server.ui import session

from ..conftest import Daemon, unique
from ..kernels import vector_add_ir

EVIL = "<script>alert(1)</script>"


def compile_(http: httpx.Client, headers: dict[str, str] | None = None, warps: int = 4, **attrs: str) -> str:
    ir = base64.b64encode(vector_add_ir(**attrs)).decode()
    r = http.post("/v1/compile", json={"ir": ir, "options": {"num_warps": warps}}, headers=headers or {})
    assert r.status_code == 200, r.text
    return str(r.json()["key"])


@pytest.fixture(scope="module")
def open_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("viewer"))
    yield d
    d.stop()


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("viewer-token"), token="s3cret")
    yield d
    d.stop()


def test_unknown_keys_and_pages_are_404_pages(open_daemon: Daemon) -> None:
    with httpx.Client(base_url=open_daemon.http, timeout=30) as http:
        for path, says in ((f"/ui/kernels/{'0' * 64}", "no kernel with key"), ("/ui/kernels/zz", "is not a cache key"),
                           (f"/ui/kernels/{'0' * 64}/ptx.txt", "no kernel with key"), ("/ui/nope", "no page /ui/nope"),
                           (f"/ui/kernels/{'0' * 64}/cubin.txt", "is not a stage")):
            r = http.get(path)
            assert r.status_code == 404 and r.headers["content-type"].startswith("text/html"), path
            assert says in r.text and "Traceback" not in r.text and "<h1 class=\"error\">404 Not found</h1>" in r.text
        r = http.get("/ui/diff", params={"k": "0" * 64})
        assert r.status_code == 400 and "a diff takes two kernels" in r.text
        assert http.get("/", follow_redirects=False).headers["location"] == "/ui"
        assert "script-src 'self'" in http.get("/ui").headers["content-security-policy"]


def test_a_kernel_named_script_is_text(open_daemon: Daemon) -> None:
    with httpx.Client(base_url=open_daemon.http, timeout=30) as http:
        key = compile_(http, fake_name=EVIL, salt=EVIL)
        for path in ("/ui", f"/ui/kernels/{key}", f"/ui/diff?k={key}&k={key}", f"/ui?q={EVIL}"):
            html = http.get(path).text
            assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert" not in html, path
            assert re.findall(r"<script[^>]*>", html) == ['<script src="/ui/static/viewer.js" defer>'], path


def test_kernel_page_shows_every_stage_or_why_not(open_daemon: Daemon) -> None:
    with httpx.Client(base_url=open_daemon.http, timeout=30) as http:
        salt = unique()
        key = compile_(http, salt=salt)
        html = http.get(f"/ui/kernels/{key}").text
        assert f'salt = &quot;{salt}&quot;' in html  # the specialization: the module's attributes
        assert "fake PTX for add_kernel" in html and "fake LLVM IR" in html
        sass = re.search(r'data-pane="sass" hidden>(.*?)</div>', html)
        assert sass is not None and 'class="na"' in sass.group(1)  # the fake cubin does not disassemble: said so
        assert http.get(f"/ui/kernels/{key}/ptx.txt").text.startswith("// fake PTX for add_kernel")
        listed = [k for k in http.get("/v1/kernels").json() if k["key"] == key]
        assert listed[0]["origin"] == "compiled" and listed[0]["compile_seconds"] > 0


def test_search_and_diff(open_daemon: Daemon) -> None:
    with httpx.Client(base_url=open_daemon.http, timeout=30) as http:
        name = f"k{unique()[:8]}"
        a, b = compile_(http, name=name, warps=4), compile_(http, name=name, warps=8)
        html = http.get("/ui", params={"q": name[:6]}).text
        assert html.count(f">{name}</a>") == 2 and html.count('class="kernel"') == 2
        assert f'/ui/diff?k={a}&amp;k={b}' in http.get(f"/ui/kernels/{a}").text  # "diff with" the other config
        diff = http.get("/ui/diff", params=[("k", a), ("k", b)]).text
        assert '<tr class="chg"><th>num_warps</th><td>4</td><td>8</td></tr>' in diff
        assert "<code>// fake PTX for " in diff and "-1 +1" in diff


def test_a_daemon_with_a_token_asks_for_it(guarded: Daemon) -> None:
    with httpx.Client(base_url=guarded.http, timeout=30) as http:
        key = compile_(http, guarded.headers(), salt=unique())
        for path in ("/ui", f"/ui/kernels/{key}", "/ui/stats", f"/ui/kernels/{key}/ptx.txt", "/ui/nope"):
            r = http.get(path, follow_redirects=False)
            assert r.status_code == 303 and r.headers["location"].startswith("/ui/login?next="), path
            assert key not in r.text
        assert http.get("/ui/static/viewer.css").status_code == 200
        forged = {"Cookie": f"{session.COOKIE}={session.issue('not-the-token', 'default')}"}
        assert http.get("/ui", headers=forged, follow_redirects=False).status_code == 303
        wrong = http.post("/ui/login", data={"token": "guess", "next": "/ui"}, follow_redirects=False)
        assert wrong.status_code == 401 and 'id="login-error"' in wrong.text and "set-cookie" not in wrong.headers
        right = http.post("/ui/login", data={"token": "s3cret", "next": f"/ui/kernels/{key}"}, follow_redirects=False)
        assert right.status_code == 303 and right.headers["location"] == f"/ui/kernels/{key}"
        cookie = right.headers["set-cookie"]
        assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower() and "Path=/ui" in cookie
        assert "s3cret" not in cookie
        assert key in http.get(f"/ui/kernels/{key}").text  # the client keeps the cookie
        assert http.get("/v1/stats").status_code == 401  # the session opens the viewer only, not the API
        with httpx.Client(base_url=guarded.http, timeout=30) as bearer:  # no cookie: the API's header is enough
            assert bearer.get("/ui", headers=guarded.headers()).status_code == 200
        http.post("/ui/logout")
        assert http.get("/ui", follow_redirects=False).status_code == 303


def test_sign_in_goes_back_to_viewer_pages_only() -> None:
    assert session.safe_next("/ui/kernels/ab?x=1") == "/ui/kernels/ab?x=1"
    for elsewhere in ("https://evil.example/", "//evil.example/ui", "/v1/kernels", "/ui/login", "/ui\\..\\x"):
        assert session.safe_next(elsewhere) == "/ui", elsewhere


def test_session_cookies_expire_and_name_their_tenant() -> None:
    tokens = Tokens({"t": "default", "u": "team-b"})
    value = session.issue("t", "default", now=1000.0)
    assert session.holder(value, tokens, now=1000.0 + session.LIFETIME_S - 1) == "default"
    assert session.holder(value, tokens, now=1000.0 + session.LIFETIME_S + 1) is None
    assert session.holder(value, Tokens({"u": "default"}), now=1000.0) is None  # another token
    assert session.holder(value.replace("default:", "team-b:"), tokens, now=1000.0) is None  # another tenant
    assert session.holder(session.issue("u", "team-b", now=1000.0), tokens, now=1000.0) == "team-b"
    assert session.holder("garbage", tokens) is None and session.holder("default:99999999999.00", tokens, now=0) is None
