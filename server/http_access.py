"""The HTTP transport's access log: one line per request, whatever answered it (a route, the token
check, the size limit, FastAPI's validation), written by `access.record`.

Routes and error handlers add the cache key, the tier and the error's code with `note(request, ...)`.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import access

FIELD = "despina_access"


def note(where: Request | Scope, **fields: str) -> None:
    """Add `key`, `tier` or `code` to the access line of the request `where` belongs to."""
    scope = where.scope if isinstance(where, Request) else where
    scope.setdefault("state", {}).setdefault(FIELD, {}).update(fields)


class AccessLog:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        fields: dict[str, Any] = {}
        scope.setdefault("state", {})[FIELD] = fields

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            client = scope.get("client")
            peer = f"{client[0]}:{client[1]}" if client else ""
            code = fields.get("code") or ("OK" if status < 400 else "INTERNAL")
            access.record("http", f"{scope['method']} {scope['path']}", status, code, started,
                          fields.get("key", ""), fields.get("tier", ""), peer)
