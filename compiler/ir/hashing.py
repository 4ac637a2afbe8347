"""The canonical form of a module and its content hash, the IR part of every cache key.

The canonical bytes are the printer's text without locations, then the line table the debug info
carries: each function's and op's file, as the PTX names it (`filenames.short_names`: no checkout
in it), line and column. Values are numbered in order of definition and attributes are sorted, so
the same kernel at the same place in its source always gives the same bytes, in any process and
checkout, whatever the Python objects' identities.

    module_hash(m)   # 'e3b0c442...' (64 hex digits)
"""

from __future__ import annotations

import hashlib

from .core import IRError, Loc, Module
from .filenames import short_names
from .printer import print_module


def canonical_bytes(module: Module) -> bytes:
    """The module's text form without locations, UTF-8 encoded.

    Raises `IRError` for a module the printer cannot write (a value used before its
    definition, an attribute value of no IR kind); `verifier.verify` says more.
    """
    try:
        return (print_module(module, locs=False) + line_table(module)).encode("utf-8")
    except (ValueError, TypeError) as e:  # UnicodeEncodeError is a ValueError
        raise IRError(f"module has no canonical form: {e}") from None


def line_table(module: Module) -> str:
    """`// file:line:col` (or `// -`) for each function and each of its ops, in the printer's order."""
    locs: list[Loc | None] = []
    for fn in module.functions:
        locs.append(fn.loc)
        locs.extend(op.loc for op in fn.walk())
    names = short_names(loc.file for loc in locs if loc is not None)
    return "".join(f"// {names[loc.file]}:{loc.line}:{loc.col}\n" if loc is not None else "// -\n" for loc in locs)


def module_hash(module: Module) -> str:
    """The SHA-256 of `canonical_bytes(module)`, as 64 lowercase hex digits."""
    return hashlib.sha256(canonical_bytes(module)).hexdigest()
