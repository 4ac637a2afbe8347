"""The API's documentation pages, served whole from the daemon: no CDN, so they work on an air-gapped cluster.

    GET /           redirects to the viewer, /ui
    GET /docs       Swagger UI (try requests out)
    GET /redoc      ReDoc (read the reference)
    GET /openapi.json
    GET /static/docs/...   the pages' JavaScript, CSS and icon

The JavaScript and CSS come from the `fastapi-offline` wheel (MIT; it ships Swagger UI, Apache-2.0, and
ReDoc, MIT), which the server extra installs; only its static files are used.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

STATIC = "/static/docs"
# The paths these pages take; the daemon leaves them open unless told to protect them (--protect-docs).
PATHS = frozenset({"/", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})


def assets() -> Path:
    """The folder holding swagger-ui-bundle.js, swagger-ui.css, redoc.standalone.js and favicon.png."""
    return Path(str(files("fastapi_offline") / "static"))


def is_docs_path(path: str) -> bool:
    return path in PATHS or path.startswith(STATIC + "/")


def add_docs(app: FastAPI) -> None:
    """Serve the pages on `app`, which was created with docs_url=None and redoc_url=None."""
    title = f"{app.title} - API"
    app.mount(STATIC, StaticFiles(directory=assets()), name="docs-static")

    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse("/ui")

    @app.get("/docs", include_in_schema=False)
    async def swagger() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url="/openapi.json", title=title,
                                   swagger_js_url=f"{STATIC}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{STATIC}/swagger-ui.css",
                                   swagger_favicon_url=f"{STATIC}/favicon.png",
                                   oauth2_redirect_url="/docs/oauth2-redirect")

    @app.get("/docs/oauth2-redirect", include_in_schema=False)
    async def oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(openapi_url="/openapi.json", title=title, redoc_js_url=f"{STATIC}/redoc.standalone.js",
                              redoc_favicon_url=f"{STATIC}/favicon.png", with_google_fonts=False)
