"""The `despina` command: `despina <subcommand> ...` (also `python -m despina ...`).

Each subcommand is a module with `HELP`, `add_arguments(parser)` and `run(args) -> int`, named in
`COMMANDS`; adding one is one line there. A module is imported only to build the parser, and
what a command needs at run time it imports in `run`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

COMMANDS: dict[str, str] = {
    "serve": "despina.server.main",
    "health": "despina.server.health",
    "compile": "despina.cli_compile",
    "cache": "despina.cli_cache",
    "tune": "despina.cli_tune",
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="despina", description="Despina: tile-language GPU kernels as a service.")
    parser.add_argument("--version", action="version", version=_version(), help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    modules = {}
    for name, module_name in COMMANDS.items():
        module = modules[name] = importlib.import_module(module_name)
        module.add_arguments(sub.add_parser(name, help=module.HELP, description=module.HELP))
    args = parser.parse_args(argv)
    return int(modules[args.command].run(args))


def _version() -> str:
    from despina import __version__

    return f"despina {__version__} (Python {sys.version.split()[0]})"


if __name__ == "__main__":
    sys.exit(main())
