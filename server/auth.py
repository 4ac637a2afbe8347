"""Bearer-token authentication, shared by both transports, and the tenant each token names.

A token file (`--token-file`) holds one token a line, `TOKEN` or `TENANT TOKEN` (blank lines and
`#` comments aside); a token without a tenant is tenant `default`. Every token opens the API; the
tenant it names decides which cached kernels the request may list and read (server/tenancy.py).

    tokens = Tokens.load("/run/secrets/despina_token")
    tenant = tokens.tenant_of(["Bearer s3cret"])   # 'default', or Unauthenticated
"""

from __future__ import annotations

import hmac
import re
from pathlib import Path

from .errors import Unauthenticated

DEFAULT_TENANT = "default"
TENANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
MAX_TOKENS = 1024


class Tokens:
    """The daemon's tokens, each naming its tenant; compared in constant time, every one each time."""

    def __init__(self, tenants: dict[str, str]) -> None:
        if not tenants:
            raise ValueError("a daemon with a token needs at least one")
        self._tenants = dict(tenants)  # token -> tenant

    @classmethod
    def one(cls, token: str) -> Tokens:
        return cls({token: DEFAULT_TENANT})

    @classmethod
    def load(cls, path: str) -> Tokens:
        """The tokens in `path`; ValueError naming the line for a malformed file."""
        tenants: dict[str, str] = {}
        for n, line in enumerate(Path(path).read_text().splitlines(), 1):
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            if len(words) > 2 or (len(words) == 2 and not TENANT.fullmatch(words[0])):
                raise ValueError(f"token file {path}, line {n}: expected TOKEN or TENANT TOKEN (a tenant is letters, "
                                 "digits, '_', '.' and '-', at most 64)")
            tenant, token = (DEFAULT_TENANT, words[0]) if len(words) == 1 else (words[0], words[1])
            if token in tenants:
                raise ValueError(f"token file {path}, line {n}: this token is on an earlier line too")
            tenants[token] = tenant
        if not tenants:
            raise ValueError(f"token file {path} is empty")
        if len(tenants) > MAX_TOKENS:
            raise ValueError(f"token file {path} holds {len(tenants)} tokens; at most {MAX_TOKENS}")
        return cls(tenants)

    @property
    def tenants(self) -> set[str]:
        return set(self._tenants.values())

    def match(self, given: str) -> str | None:
        """The tenant of token `given`, or None."""
        found = None
        for token, tenant in self._tenants.items():  # all of them, so that the time says nothing
            if hmac.compare_digest(given.encode(), token.encode()):
                found = tenant
        return found

    def token_of(self, tenant: str) -> str | None:
        """A token of `tenant` (the first in the file), to key what is signed for it."""
        return next((t for t, who in self._tenants.items() if who == tenant), None)

    def tenant(self, header: str | None) -> str:
        """The tenant of an `Authorization: Bearer <token>` header; else `Unauthenticated`."""
        if not header:
            raise Unauthenticated("this daemon needs 'Authorization: Bearer <token>' (set DESPINA_TOKEN)")
        scheme, _, given = header.partition(" ")
        tenant = self.match(given.strip()) if scheme.lower() == "bearer" else None
        if tenant is None:
            raise Unauthenticated("the bearer token is not valid for this daemon")
        return tenant

    def tenant_of(self, values: list[str]) -> str:
        """`tenant` of a request's Authorization headers: several of them are refused rather than one
        picked (a proxy and a client that disagree about which counts would disagree about who asked)."""
        if len(values) > 1:
            raise Unauthenticated(f"the request carries {len(values)} Authorization headers; send exactly one")
        return self.tenant(values[0] if values else None)


DELETE_NEEDS_TOKEN = ("deleting kernels or tunings needs a daemon started with --token-file (and that token): an open "
                      "daemon's cache cannot be emptied by whoever reaches it")
