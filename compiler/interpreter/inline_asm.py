"""Inline assembly (`tl.inline_asm_elementwise`): PTX, which NumPy cannot execute.

The rule exists so that such a kernel fails with a message naming the call and what to do, rather
than as an op the interpreter does not know.
"""

from __future__ import annotations

from ..ir.core import Op
from .core import State, rule
from .values import Val


@rule("inline_asm")
def inline_asm(st: State, op: Op) -> list[Val]:
    raise st.error(op, "tl.inline_asm_elementwise runs PTX, which the NumPy interpreter cannot execute; run this "
                       "kernel on the GPU (unset DESPINA_INTERPRET)")
