"""Where a program sits in the launch grid."""

from __future__ import annotations

from typing import Any

from .core import builder, builtin, tensor, unwrap


def _axis(axis: Any) -> int:
    a = unwrap(axis)
    if a not in (0, 1, 2):
        raise ValueError(f"axis must be the constexpr 0, 1 or 2, got {a!r}")
    return int(a)


@builtin
def program_id(axis: Any) -> tensor:
    """This program's index (int32) along grid axis 0, 1 or 2."""
    return tensor(builder().value("program_id", axis=_axis(axis)))


@builtin
def num_programs(axis: Any) -> tensor:
    """The number of programs (int32) along grid axis 0, 1 or 2."""
    return tensor(builder().value("num_programs", axis=_axis(axis)))
