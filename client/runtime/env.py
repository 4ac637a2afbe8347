"""Environment settings read on every launch, at the cost of a dict lookup.

`os.environ.get` costs 1-3 µs when the variable is unset (Mapping.get catches a KeyError): that
is half the launch budget. These readers look in `os.environ`'s backing dict instead, so a change
made through `os.environ` (or pytest's `monkeypatch.setenv`) is still seen at once.

    env.flag("DESPINA_INTERPRET")          # True for 1 / true / yes / on
    env.raw(env.key("DESPINA_DEBUG"))      # the stored value (bytes on POSIX) or None: for cache keys
    env.true(stored)                       # a stored value's flag, decoded once per distinct value
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

_TRUE = ("1", "true", "yes", "on")
_DATA: dict[Any, Any] | None = getattr(os.environ, "_data", None)
_KEYS: dict[str, Any] = {}

raw: Callable[[Any], Any] = _DATA.get if _DATA is not None else os.environ.get
"""`raw(key(name))`: the variable's stored value, or None when it is unset."""

STORE: dict[Any, Any] = _DATA if _DATA is not None else os.environ  # type: ignore[assignment]
"""The mapping `raw` reads, for code that tests `key(name) in STORE` (no call) before reading."""


def key(name: str) -> Any:
    """The key of `name` in the environment's backing dict (encoded as os.environ encodes it)."""
    found = _KEYS.get(name)
    if found is None:
        found = _KEYS[name] = os.environ.encodekey(name) if _DATA is not None else name
    return found


def get(name: str) -> str | None:
    """The value of the environment variable `name`, or None when it is unset."""
    value = raw(_KEYS.get(name) or key(name))
    return None if value is None or _DATA is None else os.environ.decodevalue(value)


def flag(name: str) -> bool:
    """Whether `name` is set to 1, true, yes or on (any case)."""
    value = raw(_KEYS.get(name) or key(name))
    return value is not None and true(value)


_TRUTH: dict[Any, bool] = {}


def true(value: Any) -> bool:
    """Whether a stored value (`raw(...)`, not None) reads as on: 1, true, yes or on, any case.
    Decoded once per distinct value: `raw(KEY) is not None and true(...)` is two dict lookups."""
    found = _TRUTH.get(value)
    if found is None:
        if len(_TRUTH) > 64:
            _TRUTH.clear()
        found = _TRUTH[value] = (os.environ.decodevalue(value) if _DATA is not None else value).lower() in _TRUE
    return found
