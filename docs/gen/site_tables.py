"""Sections of the pages built from the code itself, so that they cannot drift from it: the libdevice
functions, the daemon's metrics and `despina serve`'s flags, and the tutorials' figures (shown when
benchmarks/tutorial_figures.py has written them, else a note that they are pending)."""

from __future__ import annotations

import argparse
import importlib
import json
import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1]
FIGURES = DOCS / "tutorials" / "figures"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def libdevice() -> str:
    """Every `tl.extra.cuda.libdevice` function with the argument types each libdevice symbol takes."""
    from despina.language.extra.cuda import libdevice as lib

    lines = ["| function | arguments → result: libdevice symbol |", "|---|---|"]
    for name, signatures in lib.FUNCTIONS.items():
        forms = "<br>".join(f"({', '.join(args)}) → {result}: `{symbol}`" for args, symbol, result in signatures)
        lines.append(f"| `{name}` | {forms} |")
    return "\n".join(lines)


def metrics() -> str:
    """Every metric of `GET /metrics`: name as Prometheus shows it, type, labels, help."""
    from prometheus_client.metrics import MetricWrapperBase

    from despina.server.metrics import Metrics

    lines = ["| metric | type | labels | meaning |", "|---|---|---|---|"]
    for metric in vars(Metrics()).values():
        if not isinstance(metric, MetricWrapperBase):
            continue
        suffix = "_total" if metric._type == "counter" else ""
        labels = ", ".join(f"`{label}`" for label in metric._labelnames) or "—"
        lines.append(f"| `{metric._name}{suffix}` | {metric._type} | {labels} | {_cell(metric._documentation)} |")
    return "\n".join(lines)


def command_line(command: str | None = None) -> str:
    """The flags of `despina COMMAND` (every command when None) as their --help states them, each with
    its environment variable where it has one; subcommands (`despina cache ls`) get a table each."""
    from despina import cli

    names = [command] if command else list(cli.COMMANDS)
    parts = []
    for name in names:
        module = importlib.import_module(cli.COMMANDS[name])
        parser = argparse.ArgumentParser(prog=f"despina {name}")
        module.add_arguments(parser)
        parts += _parser_tables(parser, f"despina {name}", module.HELP, heading=command is None)
    return "\n".join(parts)


def _parser_tables(parser: argparse.ArgumentParser, prog: str, help_text: str, heading: bool) -> list[str]:
    lines = [f"### `{prog}`", "", _cell(help_text), ""] if heading else []
    rows, subparsers = [], []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            subparsers += [(f"{prog} {n}", p, helps.get(n, "")) for n, p in action.choices.items()]
            continue
        text = action.help or ""
        found = re.search(r"\s*\[env: (\w+)\]$", text)
        variable = f"`{found.group(1)}`" if found else "—"
        text = text[: found.start()] if found else text
        if action.option_strings:
            flag = max(action.option_strings, key=len)
            value = "" if action.nargs == 0 else f" {action.metavar or action.dest.upper()}"
            rows.append(f"| `{flag}{value}` | {variable} | {_cell(text)} |")
        else:
            rows.append(f"| `{action.metavar or action.dest}` | — | {_cell(text)} |")
    if rows:
        lines += ["| argument | environment | meaning |", "|---|---|---|", *rows, ""]
    for sub_prog, sub_parser, sub_help in subparsers:
        lines += _parser_tables(sub_parser, sub_prog, sub_help, heading=True)
    return lines


def error_codes() -> str:
    """Every error the daemon answers with: its gRPC status, its HTTP status, when it is used."""
    from despina.server import errors

    seen: list[type[errors.ServiceError]] = []
    todo = list(errors.ServiceError.__subclasses__())
    while todo:
        cls = todo.pop()
        seen.append(cls)
        todo.extend(cls.__subclasses__())
    lines = ["| gRPC status | HTTP status | when |", "|---|---|---|"]
    for cls in sorted(seen, key=lambda c: (c.http_status, c.code)):
        lines.append(f"| `{cls.code}` | {cls.http_status} | {_cell(cls.__doc__ or '')} |")
    return "\n".join(lines)


def figure(name: str) -> str:
    """The tutorial's figure when benchmarks/tutorial_figures.py has written it, else a note."""
    svg = FIGURES / f"{name}.svg"
    if not svg.exists():
        return ("!!! note \"Figure pending\"\n    The performance figure of this tutorial has not been measured yet: "
                "`python benchmarks/tutorial_figures.py` writes it on a GPU host with Triton and PyTorch.")
    data = json.loads((FIGURES / f"{name}.json").read_text())
    about = data.get("machine", {})
    text = (f"![{name}: despina, Triton and PyTorch](figures/{name}.svg)\n\n"
            f"Measured by `benchmarks/tutorial_figures.py` on {about.get('gpu', 'a GPU')} (Triton "
            f"{about.get('triton', '?')}, PyTorch {about.get('torch', '?')}, {about.get('date', 'undated')}); "
            f"the numbers are in [figures/{name}.json](figures/{name}.json).")
    rows = data.get("rows", [])
    failed: dict[str, list[str]] = {}
    for row in rows:
        for column, value in row.items():
            if isinstance(value, str) and value.startswith("error"):
                failed.setdefault(column, []).append(value)
    if failed:
        text += "\n\n!!! warning \"Points missing from the figure\"\n" + "\n".join(
            f"    - {column}: {len(errors)} of {len(rows)} sizes failed; the first: {_cell(errors[0])[:300]}"
            for column, errors in failed.items())
    return text
