"""The user's frame: where a warning that despina issues should point, whichever despina function
between the user's call and the warning issued it."""

from __future__ import annotations

import sys
from types import FrameType


def user_stacklevel() -> int:
    """The `stacklevel` for `warnings.warn`, called from the function that warns, that lands on the
    first frame outside the despina package (the user's line that called into despina)."""
    frame: FrameType = sys._getframe(1)  # the function that warns: stacklevel 1
    level = 1
    while frame.f_back is not None and _in_despina(frame):
        frame = frame.f_back
        level += 1
    return level


def _in_despina(frame: FrameType) -> bool:
    name = frame.f_globals.get("__name__", "")
    return isinstance(name, str) and (name == "despina" or name.startswith("despina."))
