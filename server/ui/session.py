"""The viewer's sign-in: the same token as the API, carried by a cookie, since a browser cannot send a
bearer header when it follows a link.

A daemon with a token (`--token-file`) shows its pages only to a request that has the bearer header or
the session cookie; any other request for a page is sent to /ui/login, whose form takes a token and,
when it is one of the daemon's (compared in constant time), sets the cookie: HttpOnly (no script reads
it), SameSite=Strict (no other site's page sends it), Secure under TLS, for /ui only. The cookie holds the
token's tenant, an expiry time and an HMAC of both keyed by the tenant's token, not the token: it opens
the viewer's read-only pages, showing that tenant's kernels, for 12 hours and nothing of the API, and
changing the token ends every session.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from http.cookies import CookieError, SimpleCookie
from urllib.parse import quote

from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import Scope

from .. import auth
from ..errors import Unauthenticated
from .html import HEADERS, e, page

PREFIX = "/ui"
COOKIE = "despina_ui"
LIFETIME_S = 12 * 3600
LOGIN = "/ui/login"


def is_viewer_path(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


def needs_no_session(path: str) -> bool:
    """The sign-in page and the static files (script and style, nothing of a kernel)."""
    return path == LOGIN or path.startswith(PREFIX + "/static/")


def _mac(token: str, tenant: str, expires: int) -> str:
    text = f"despina viewer session of {tenant} until {expires}"
    return hmac.new(token.encode(), text.encode(), hashlib.sha256).hexdigest()


def issue(token: str, tenant: str, now: float | None = None) -> str:
    """A cookie value for `tenant` (whose token is `token`) good for LIFETIME_S from `now`."""
    expires = int((time.time() if now is None else now) + LIFETIME_S)
    return f"{tenant}:{expires}.{_mac(token, tenant, expires)}"


def holder(value: str, tokens: auth.Tokens, now: float | None = None) -> str | None:
    """The tenant of a valid, unexpired cookie value; else None."""
    tenant, _, rest = value.partition(":")
    expires, _, mac = rest.partition(".")
    token = tokens.token_of(tenant)
    if token is None or not expires.isdigit() or len(expires) > 12 or int(expires) < (time.time() if now is None else now):
        return None
    return tenant if hmac.compare_digest(mac.encode(), _mac(token, tenant, int(expires)).encode()) else None


def _cookie(scope: Scope) -> str | None:
    text = "; ".join(v.decode("latin-1") for k, v in scope["headers"] if k == b"cookie")
    try:
        jar: SimpleCookie = SimpleCookie(text)
    except CookieError:
        return None
    morsel = jar.get(COOKIE)
    return morsel.value if morsel is not None else None


def tenant(scope: Scope, tokens: auth.Tokens) -> str | None:
    """The tenant of the request's bearer token (as the API takes it) or of its valid session cookie; None
    when it has neither."""
    headers = [v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"]
    if headers:
        try:
            return tokens.tenant_of(headers)
        except Unauthenticated:
            return None
    cookie = _cookie(scope)
    return holder(cookie, tokens) if cookie is not None else None


def safe_next(path: str) -> str:
    """Where to go after signing in: a viewer page of this daemon, never another host."""
    ok = is_viewer_path(path.split("?", 1)[0]) and "//" not in path and "\\" not in path
    return path if ok and path != LOGIN else PREFIX


def refusal(scope: Scope, tokens: auth.Tokens | None) -> Response | None:
    """None when the request may see the page; else the way to the sign-in form (a 401 for what is not a GET)."""
    if tokens is None or needs_no_session(scope["path"]) or tenant(scope, tokens) is not None:
        return None
    query = scope.get("query_string", b"").decode("latin-1")
    here = scope["path"] + (f"?{query}" if query else "")
    if scope["method"] in ("GET", "HEAD"):
        return RedirectResponse(f"{LOGIN}?next={quote(safe_next(here))}", status_code=303, headers=HEADERS)
    return HTMLResponse(login_page(safe_next(here), "Sign in first: this daemon needs its token."), 401,
                        headers=HEADERS)


def login_page(next_path: str, problem: str = "") -> str:
    warn = f'<p class="error" id="login-error">{e(problem)}</p>' if problem else ""
    form = (f'<form class="login" method="post" action="{LOGIN}"><input type="hidden" name="next" value="{e(next_path)}">'
            '<label>Token <input type="password" name="token" id="token" autocomplete="current-password" required>'
            '</label><button type="submit" id="sign-in">Sign in</button></form>')
    return page("Sign in", f"<h1>Sign in</h1>{warn}<p>This daemon was started with a token (--token-file): give it "
                           f"to see its kernels.</p>{form}")


def signed_in(response: Response, token: str, tenant: str, secure: bool) -> Response:
    response.set_cookie(COOKIE, issue(token, tenant), max_age=LIFETIME_S, path=PREFIX, httponly=True,
                        samesite="strict", secure=secure)
    return response


def signed_out(response: Response, secure: bool) -> Response:
    response.delete_cookie(COOKIE, path=PREFIX, httponly=True, samesite="strict", secure=secure)
    return response
