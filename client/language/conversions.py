"""`tl.cast`: the user-facing conversion builtin."""

from __future__ import annotations

from typing import Any

from .core import builtin, tensor, unwrap
from .semantic import cast as _cast


@builtin
def cast(input: Any, dtype: Any, fp_downcast_rounding: Any = None, bitcast: bool = False) -> tensor:
    """`input` converted to `dtype`; `bitcast=True` reinterprets the bits."""
    return _cast(input, unwrap(dtype), bitcast=bool(unwrap(bitcast)), fp_downcast_rounding=unwrap(fp_downcast_rounding))
