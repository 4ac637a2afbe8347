"""The vocabulary of op attribute schemas: what each attribute of an op may hold.

Every op in `ops.OPS` lists its attributes as `name -> Attr`; the builder, the parser, the
protobuf codec's decoder (through the verifier) and the verifier all check attributes against
that one schema, so the language cannot write an attribute that the daemon would refuse.

    Attr(("str",), choices=("none", "all"))    # an enumeration
    Attr(("int", "none"))                      # an optional integer
    Attr(("ints",), required=True)             # a list of integers the op cannot do without
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .types import PointerType, ScalarType, TileType


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_type(v: Any) -> bool:
    return isinstance(v, (ScalarType, PointerType, TileType))


KINDS: dict[str, Callable[[Any], bool]] = {
    "int": _is_int,
    "float": lambda v: isinstance(v, float),
    "bool": lambda v: isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "none": lambda v: v is None,
    "type": _is_type,
    "ints": lambda v: isinstance(v, (list, tuple)) and all(_is_int(x) for x in v),
    "types": lambda v: isinstance(v, (list, tuple)) and all(_is_type(x) for x in v),
}


@dataclass(frozen=True)
class Attr:
    """One attribute of an op: the kinds of value it holds (names in `KINDS`); `choices`, when
    given, the only values of kind str it may hold; `required`, whether the op needs it."""

    kinds: tuple[str, ...]
    choices: tuple[str, ...] = ()
    required: bool = False

    def __post_init__(self) -> None:
        unknown = [k for k in self.kinds if k not in KINDS]
        if not self.kinds or unknown:
            raise ValueError(f"attribute kinds must be among {sorted(KINDS)}, got {self.kinds}")

    def error(self, value: Any) -> str | None:
        """Why `value` cannot be this attribute's value, or None."""
        if not any(KINDS[k](value) for k in self.kinds):
            return f"must be {' or '.join(self.kinds)}, got {value!r}"
        if self.choices and isinstance(value, str) and value not in self.choices:
            return f"must be one of {', '.join(map(repr, self.choices))}, got {value!r}"
        return None


def required(*kinds: str) -> Attr:
    return Attr(kinds, required=True)


def optional(*kinds: str) -> Attr:
    return Attr(kinds)


def enum(*choices: str, required: bool = False, nullable: bool = False) -> Attr:
    """A string attribute that holds one of `choices` (or none, when `nullable`)."""
    return Attr(("str", "none") if nullable else ("str",), choices, required)


def attrs_error(schema: Mapping[str, Attr], attrs: Mapping[str, Any]) -> str | None:
    """Why `attrs` do not fit `schema` (an unknown attribute, one of the wrong kind or value, a
    required one missing), or None."""
    for key, value in attrs.items():
        spec = schema.get(key) if isinstance(key, str) else None
        if spec is None:
            return f"unknown attribute {key!r} (allowed: {', '.join(schema) or 'none'})"
        if err := spec.error(value):
            return f"attribute '{key}' {err}"
    missing = [k for k, spec in schema.items() if spec.required and k not in attrs]
    if missing:
        return f"missing attribute{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}"
    return None
