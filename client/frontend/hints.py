"""What an error suggests when a kernel calls a function that cannot take its tensors: the `tl`
builtin of the same name for a NumPy, math or torch function, else what to do instead."""

from __future__ import annotations

import sys
from pathlib import PurePath
from typing import Any

from despina import language as tl
from despina.language.core import is_builtin

# Library names whose `tl` builtin is spelt differently.
_ALIASES = {"absolute": "abs", "clip": "clamp", "amax": "max", "amin": "min", "fmax": "maximum", "fmin": "minimum"}
_INSTALLED = {"site-packages", "dist-packages"}


def library_of(fn: Any) -> str | None:
    """The top-level package of `fn` when it is a library's (the standard library's or an installed
    package's, such as numpy or torch) rather than the user's own code; None otherwise."""
    module = getattr(fn, "__module__", None)
    if not isinstance(module, str) or not module:
        return None
    root = module.partition(".")[0]
    if root in sys.stdlib_module_names:
        return root
    file = getattr(sys.modules.get(root), "__file__", None)
    return root if file and _INSTALLED & set(PurePath(file).parts) else None


def tl_equivalent(*names: str) -> str | None:
    """The first of `names` (a call's spelling, then the function's own name) that `tl` has as a builtin."""
    for name in names:
        name = _ALIASES.get(name, name)
        if is_builtin(getattr(tl, name, None)):
            return name
    return None


def not_a_jit_function(fn: Any, written: str) -> str:
    """Why `fn`, called as `written` on a tensor, cannot run in a kernel, and what to write instead."""
    name = getattr(fn, "__name__", None) or written
    library = library_of(fn)
    if library is not None:
        use = tl_equivalent(written.rpartition(".")[2], name)
        if use is not None:
            return (f"{written}() is a {library} function and cannot take a tensor; use tl.{use}, despina's "
                    "builtin that works on tiles")
        return (f"{written}() is a {library} function, and library functions cannot take tensors: they run in "
                "Python while the kernel compiles, before a tile has values. Use the tl builtins (see "
                "docs/language/math.md) or write the computation as a @despina.jit function")
    return f"'{name}' is not a @despina.jit function and cannot take tensor arguments; decorate it with @despina.jit"
