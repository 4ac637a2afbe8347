"""The MkDocs hook (mkdocs.yml `hooks:`): fills each `<!-- despina:NAME ARG -->` marker of a page with
a section generated from the code at build time, so that references cannot go stale:

    <!-- despina:grpc service.proto -->     the messages and RPCs of proto/service.proto
    <!-- despina:rest -->                  the routes and schemas of docs/service/openapi.json
    <!-- despina:metrics -->               the daemon's Prometheus metrics
    <!-- despina:cli serve -->             `despina serve`'s flags (every command's without an argument)
    <!-- despina:libdevice -->             tl.extra.cuda.libdevice's functions
    <!-- despina:error-codes -->           the daemon's errors with their gRPC and HTTP statuses
    <!-- despina:figure 01-vector-add -->  a tutorial's figure, or a note that it is pending

An unknown marker fails the build.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MARKER = re.compile(r"<!-- despina:([\w-]+)(?: ([\w.-]+))? -->")

sys.path.insert(0, str(HERE))
import grpc_reference  # noqa: E402
import rest_reference  # noqa: E402
import site_tables  # noqa: E402


def on_startup(**_: Any) -> None:
    """`mkdocs` run as a script puts its own folder (the interpreter's bin/) on sys.path, and that folder
    holds the `despina` console script: mkdocstrings' loader would take that file for the package and
    find no `despina.language` in it. Only that entry goes (here, not at import: MkDocs restores
    sys.path after importing a hook)."""
    sys.path[:] = [p for p in sys.path if not (Path(p or ".") / "despina").is_file()]


def section(name: str, arg: str | None) -> str:
    """The Markdown that replaces the marker `<!-- despina:name arg -->`."""
    if name == "grpc" and arg:
        return grpc_reference.render(grpc_reference.read_proto(ROOT / "proto" / arg, ROOT / "proto"))
    if name == "rest":
        return rest_reference.render(json.loads((HERE.parent / "service" / "openapi.json").read_text()))
    if name == "figure" and arg:
        return site_tables.figure(arg)
    if name == "cli":
        return site_tables.command_line(arg)
    tables = {"metrics": site_tables.metrics,
              "libdevice": site_tables.libdevice, "error-codes": site_tables.error_codes}
    if name in tables and arg is None:
        return tables[name]()
    raise ValueError(f"unknown marker <!-- despina:{name}{' ' + arg if arg else ''} -->: see docs/gen/hook.py")


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    try:
        return MARKER.sub(lambda m: section(m.group(1), m.group(2)), markdown)
    except Exception as e:
        raise PluginError(f"{page.file.src_path}: {e}") from e
