"""Environment settings read on every launch, at the cost of a dict lookup.

`os.environ.get` costs 1-3 µs when the variable is unset (Mapping.get catches a KeyError): that
is half the launch budget. These readers look in `os.environ`'s backing dict instead, so a change
made through `os.environ` (or pytest's `monkeypatch.setenv`) is still seen at once.

    env.flag("DESPINA_INTERPRET")          # True for 1 / true / yes / on
    env.raw(env.key("DESPINA_DEBUG"))      # the stored value (bytes on POSIX) or None: for cache keys
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
    if value is None:
        return False
    return (os.environ.decodevalue(value) if _DATA is not None else value).lower() in _TRUE
