"""Source files as the debug info names them: by the shortest tail of their path that tells them apart
(`kernels.py`, or `a/kernels.py` and `b/kernels.py` for two of that name), in characters a PTX `.file`
directive can hold. The PTX and the cubin carry these names and the lines, so the cache keys hash them
too (`hashing.canonical_bytes`, `codec.key_bytes`): one kernel from two checkouts is one key and one
cubin, and the same kernel at another place in the source is another of each.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from pathlib import PurePath

MAX_FILES = 256  # distinct source files of one module
MAX_PATH = 4096  # characters of one file's path

_UNSAFE = re.compile(r'[^\x20-\x7e]|["\\]')


def path_parts(path: str) -> tuple[str, ...]:
    """The components of `path` as the debug info writes them: printable ASCII, no quote or backslash
    (each other character an underscore), so that no file name can break a `.file` directive."""
    return tuple(_UNSAFE.sub("_", part) for part in PurePath(path).parts) or (_UNSAFE.sub("_", path),)


def files_error(paths: Iterable[str]) -> str | None:
    """Why a module's source files are past the limits, or None."""
    distinct = set(paths)
    if len(distinct) > MAX_FILES:
        return f"the module names {len(distinct)} source files; at most {MAX_FILES}"
    long = next((p for p in distinct if len(p) > MAX_PATH), None)
    return f"a source file's path is {len(long)} characters; at most {MAX_PATH}" if long is not None else None


def short_names(paths: Iterable[str]) -> dict[str, str]:
    """Each distinct path's shortest tail of components that no other path in `paths` ends with."""
    parts = {p: path_parts(p) for p in dict.fromkeys(paths)}
    tails = Counter(mine[-n:] for mine in parts.values() for n in range(1, len(mine) + 1))
    names: dict[str, str] = {}
    for path, mine in parts.items():
        n = next((n for n in range(1, len(mine)) if tails[mine[-n:]] == 1), len(mine))
        names[path] = "/".join(mine[-n:])
    return names
