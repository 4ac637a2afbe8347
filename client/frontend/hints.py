"""What an error suggests: the `tl` builtin of the same name for a NumPy, math or torch function that
a kernel calls on a tensor, the closest name to a misspelt one, and the page of the language reference
(docs/language/, the documentation site's source) to read."""

from __future__ import annotations

import difflib
import sys
import types
from pathlib import PurePath
from typing import Any

from despina import language as tl
from despina.language.core import is_builtin

# Library names whose `tl` builtin is spelt differently.
_ALIASES = {"absolute": "abs", "clip": "clamp", "amax": "max", "amin": "min", "fmax": "maximum", "fmin": "minimum"}
_INSTALLED = {"site-packages", "dist-packages"}
LANGUAGE_REFERENCE = "docs/language/index.md"
MATH_PAGE = "docs/language/math.md"
# The page that lists each despina.language module's names.
_PAGES = {"despina.language": LANGUAGE_REFERENCE, "despina.language.math": MATH_PAGE,
          "despina.language.extra": "docs/language/extern.md"}


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
                f"{MATH_PAGE}) or write the computation as a @despina.jit function")
    return f"'{name}' is not a @despina.jit function and cannot take tensor arguments; decorate it with @despina.jit"


def no_such_name(module: types.ModuleType, name: str) -> str:
    """`module` has no attribute `name`: the closest name it has, and where its names are listed."""
    close = difflib.get_close_matches(name, [n for n in dir(module) if not n.startswith("_")], n=1)
    text = f"'{module.__name__}' has no attribute '{name}'" + (f" (did you mean '{close[0]}'?)" if close else "")
    parts = module.__name__.split(".")
    page = next((_PAGES[m] for m in (".".join(parts[:i]) for i in range(len(parts), 0, -1)) if m in _PAGES), None)
    if page is None:
        return text + "; check the spelling"
    return text + f"; {module.__name__}'s names are listed in {page} (the language reference)"
