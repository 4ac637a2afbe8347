"""Bearer-token authentication, shared by both transports."""

from __future__ import annotations

import hmac
from pathlib import Path

from .errors import Unauthenticated


def load_token(path: str) -> str:
    """The token in `path` (surrounding whitespace removed); ValueError for an empty file."""
    token = Path(path).read_text().strip()
    if not token:
        raise ValueError(f"token file {path} is empty")
    return token


def check(header: str | None, token: str | None) -> None:
    """Pass when no token is configured or `header` is `Bearer <token>`; else `Unauthenticated`."""
    if token is None:
        return
    if not header:
        raise Unauthenticated("this daemon needs 'Authorization: Bearer <token>' (set DESPINA_TOKEN)")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        raise Unauthenticated("the bearer token is not valid for this daemon")


def check_headers(values: list[str], token: str | None) -> None:
    """`check` on a request's Authorization headers: several of them are refused rather than one
    picked (a proxy and a client that disagree about which counts would disagree about who asked)."""
    if token is not None and len(values) > 1:
        raise Unauthenticated(f"the request carries {len(values)} Authorization headers; send exactly one")
    check(values[0] if values else None, token)


DELETE_NEEDS_TOKEN = ("deleting kernels or tunings needs a daemon started with --token-file (and that token): an open "
                      "daemon's cache cannot be emptied by whoever reaches it")
