"""The viewer's routes on the daemon's FastAPI app: pages rendered on the server from `CompileService`'s
answers, and the static script and style. The sign-in check runs before them, in the HTTP transport's
guard (session.py)."""

from __future__ import annotations

import glob
from importlib.resources import files
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from despina.compiler.backends.nvptx.target import TARGETS

from .. import auth
from ..core import CompileService
from ..errors import InvalidArgument, ServiceError
from . import session
from .diff import diff_page
from .html import HEADERS, error_page
from .kernel import STAGES, Shown, kernel_page
from .listing import kernels_page, name_glob
from .sampler import Sampler
from .stats import latency_buckets, stats_page

LISTED = 500
SAME_NAME = 50
MAX_LOGIN_BYTES = 4096


def static_files() -> Path:
    return Path(str(files("despina.server.ui") / "static"))


def _html(text: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status_code=status, headers=HEADERS)


async def lines_of(service: CompileService, key: str) -> dict[str, Any]:
    """The kernel's line table (kernel.py's docstring has its form); an empty one with the daemon's `error`
    when it could not read it (the page then shows the stages without links, and why)."""
    try:
        return await service.get_lines(key)
    except ServiceError as err:
        return {"source": None, "stages": {}, "error": err.message}


async def shown_stages(service: CompileService, key: str) -> dict[str, Shown]:
    """Each text stage of the kernel, or what the daemon said instead (no nvdisasm for the SASS, no such stage)."""
    out = {}
    for stage in STAGES:
        try:
            out[stage] = Shown((await service.get_artifact(key, stage)).decode(errors="replace"))
        except ServiceError as err:
            out[stage] = Shown(None, err.message)
    return out


def add_viewer(app: FastAPI, service: CompileService, tokens: auth.Tokens | None) -> Sampler:
    """Serve the viewer under /ui on `app`; the sampler the statistics page plots (the daemon runs it)."""
    sampler = Sampler(service)
    signed = tokens is not None
    app.mount("/ui/static", StaticFiles(directory=static_files()), name="ui-static")
    ui = APIRouter(prefix="/ui", include_in_schema=False)

    def failed(err: ServiceError, status: int | None = None) -> HTMLResponse:
        title = {400: "Bad request", 404: "Not found"}.get(status or err.http_status, "Error")
        return _html(error_page(status or err.http_status, title, err.message, signed_in=signed),
                     status or err.http_status)

    @ui.get("")
    async def kernels(request: Request) -> Response:
        search, target = request.query_params.get("q", "")[:256], request.query_params.get("target", "")[:16]
        try:
            items = await service.kernels(name_glob(search), target or None, None, LISTED)
        except ServiceError as err:
            return failed(err)
        return _html(kernels_page(items, search, target, tuple(TARGETS), signed_in=signed))

    @ui.get("/")
    async def slash() -> RedirectResponse:
        return RedirectResponse("/ui", status_code=307)

    @ui.get("/kernels/{key}")
    async def kernel(key: str) -> Response:
        try:
            info = await service.describe(key)
            shown = await shown_stages(service, key)
            same = await service.kernels(glob.escape(str(info.get("name", ""))), None, None, SAME_NAME)
        except ServiceError as err:
            return failed(err, 404 if isinstance(err, InvalidArgument) else None)
        return _html(kernel_page(info, shown, await lines_of(service, key), same, signed_in=signed))

    @ui.get("/kernels/{key}/{name}")
    async def stage_text(key: str, name: str) -> Response:
        stage = name.removesuffix(".txt")
        if stage not in STAGES or not name.endswith(".txt"):
            return failed(InvalidArgument(f"{name[:40]!r} is not a stage's text: one of "
                                          f"{', '.join(s + '.txt' for s in STAGES)}"), 404)
        try:
            data = await service.get_artifact(key, stage)
        except ServiceError as err:
            return failed(err, 404 if isinstance(err, InvalidArgument) else None)
        return Response(data, media_type="text/plain; charset=utf-8", headers=HEADERS)

    @ui.get("/diff")
    async def diff(request: Request) -> Response:
        keys = request.query_params.getlist("k")
        if len(keys) != 2:
            return failed(InvalidArgument(f"a diff takes two kernels (check two in the list), got {len(keys)}"))
        try:
            a, b = await service.describe(keys[0]), await service.describe(keys[1])
            left, right = await shown_stages(service, keys[0]), await shown_stages(service, keys[1])
        except ServiceError as err:
            return failed(err, 404 if isinstance(err, InvalidArgument) else None)
        return _html(diff_page(a, b, left, right, signed_in=signed))

    @ui.get("/stats")
    async def stats() -> Response:
        return _html(stats_page(service.stats(), sampler.snapshots(), latency_buckets(service.metrics),
                                sampler.interval_s, signed_in=signed))

    @ui.get("/login")
    async def login(request: Request) -> Response:
        if tokens is None:
            return RedirectResponse("/ui", status_code=303)
        return _html(session.login_page(session.safe_next(request.query_params.get("next", "/ui"))))

    @ui.post("/login")
    async def sign_in(request: Request) -> Response:
        body = (await request.body())[:MAX_LOGIN_BYTES].decode("utf-8", errors="replace")
        form = {k: v[0] for k, v in parse_qs(body).items()}
        to = session.safe_next(form.get("next", "/ui"))
        if tokens is None:
            return RedirectResponse(to, status_code=303)
        tenant = tokens.match(form.get("token", "").strip())
        token = tokens.token_of(tenant) if tenant is not None else None
        if tenant is None or token is None:
            return _html(session.login_page(to, "That is not a token of this daemon."), 401)
        return session.signed_in(RedirectResponse(to, status_code=303), token, tenant, request.url.scheme == "https")

    @ui.post("/logout")
    async def sign_out(request: Request) -> Response:
        return session.signed_out(RedirectResponse(session.LOGIN if signed else "/ui", status_code=303),
                                  request.url.scheme == "https")

    @ui.get("/{rest:path}")
    async def unknown(rest: str) -> Response:
        return _html(error_page(404, "Not found", f"the viewer has no page /ui/{rest[:80]}", signed_in=signed), 404)

    app.include_router(ui)
    return sampler
