"""The canonical form of a module and its content hash, the IR part of every cache key.

The canonical bytes are the printer's text without locations: values are numbered in order of
definition and attributes are sorted, so the same kernel always gives the same bytes, in any
process, whatever the Python objects' identities or the source positions it was traced from.

    module_hash(m)   # 'e3b0c442...' (64 hex digits)
"""

from __future__ import annotations

import hashlib

from .core import IRError, Module
from .printer import print_module


def canonical_bytes(module: Module) -> bytes:
    """The module's text form without locations, UTF-8 encoded.

    Raises `IRError` for a module the printer cannot write (a value used before its
    definition, an attribute value of no IR kind); `verifier.verify` says more.
    """
    try:
        return print_module(module, locs=False).encode("utf-8")
    except (ValueError, TypeError) as e:  # UnicodeEncodeError is a ValueError
        raise IRError(f"module has no canonical form: {e}") from None


def module_hash(module: Module) -> str:
    """The SHA-256 of `canonical_bytes(module)`, as 64 lowercase hex digits."""
    return hashlib.sha256(canonical_bytes(module)).hexdigest()
