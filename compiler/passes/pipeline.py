"""The tile-IR pass pipeline: one list of named passes, each a function from module to module.

`run_pipeline(module, verify_each=True, dump=lambda name, m: print(name, print_module(m)))`
runs them all, checking the IR after each and printing it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..ir.core import Module
from ..ir.verifier import VerificationError, verify
from .canonicalize import canonicalize
from .cse import cse
from .dce import dce
from .fold import fold
from .inline import inline
from .scales import take_out_scales

Pass = Callable[[Module], Module]

PIPELINE: list[tuple[str, Pass]] = [
    ("inline", inline),
    ("canonicalize", canonicalize),
    ("fold", fold),
    ("cse", cse),
    ("scales", take_out_scales),
    ("dce", dce),
]


def run_pipeline(
    module: Module,
    passes: Sequence[tuple[str, Pass]] = PIPELINE,
    verify_each: bool = False,
    dump: Callable[[str, Module], None] | None = None,
) -> Module:
    """Run `passes` in order; the module may be changed in place, so use the one returned.

    `verify_each` runs the verifier after every pass and names the pass that broke the IR;
    `dump(name, module)` sees the module after each pass (for `inspect_*` and debugging).
    """
    for name, run in passes:
        module = run(module)
        if verify_each:
            try:
                verify(module)
            except VerificationError as e:
                raise VerificationError(f"after pass '{name}': {e}") from None
        if dump is not None:
            dump(name, module)
    return module
