"""Environment forms of a command's flags: `--grpc-port` is also `DESPINA_GRPC_PORT`.

`bind(parser)` gives every optional flag added to `parser` so far a variable, named at the end of
the flag's --help line, so a container or a unit file configures the command without a command
line. A flag given on the command line wins over its variable, and the variable over the flag's
default. The variable's value is parsed as the flag's own value would be (type and choices); one
the flag would refuse is argparse's usual one-line error and exit code 2, naming the variable.
Switches (`store_true`) read 1/true/yes/on and 0/false/no/off (any case; empty is off).

    p = argparse.ArgumentParser(); p.add_argument("--workers", type=int, default=4)
    bind(p)          # DESPINA_WORKERS=8 -> args.workers == 8; --workers 2 beats it
    blame(message, args)   # a refusal naming --workers says DESPINA_WORKERS gave its value
"""

from __future__ import annotations

import argparse
import functools
import os
import re
from collections.abc import Callable
from typing import Any

PREFIX = "DESPINA_"
SOURCES = "environment_sources"
_ON = ("1", "true", "yes", "on")
_OFF = ("0", "false", "no", "off", "")


class _FromEnvironment(str):
    """A flag's default taken from a variable: argparse parses a str default as it would the flag's
    value, through the flag's `type`, which is how the value reaches the checks below."""


def variable(flag: str, names: dict[str, str] | None = None) -> str:
    """The variable of a long flag: `names[flag]` when given, else `DESPINA_` and the flag in capitals."""
    return (names or {}).get(flag) or PREFIX + flag.lstrip("-").replace("-", "_").upper()


def bind(parser: argparse.ArgumentParser, names: dict[str, str] | None = None) -> None:
    """Give each optional flag of `parser` its variable (`names` overrides the derived name of a flag,
    for one whose derived name means something else already). Call it after the last `add_argument`."""
    sources: dict[str, str] = {}
    for action in parser._actions:
        if not action.option_strings or isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        flag = max(action.option_strings, key=len)
        name = variable(flag, names)
        if action.nargs not in (None, 0, "?") or isinstance(action, argparse._AppendAction):
            raise TypeError(f"{flag}: a flag of several values has no environment form")
        switch = action.nargs == 0
        if switch and not isinstance(action.const, bool):
            raise TypeError(f"{flag}: of the flags without a value, only store_true/store_false have an environment "
                            "form")
        if action.help != argparse.SUPPRESS:
            action.help = f"{action.help or ''} [env: {name}]".strip()
        value = os.environ.get(name)
        if value is None:
            continue
        action.default = _FromEnvironment(value)
        parse = _switch(bool(action.const)) if switch else (action.type or str)
        if not callable(parse):
            raise TypeError(f"{flag}: a type named by a string ({parse!r}) has no environment form; pass the function")
        action.type = _reading(parse, flag, name, action.choices, sources)
    parser.set_defaults(**{SOURCES: sources})
    if parser.epilog is None:
        parser.epilog = ("Every flag can also be given as the environment variable named in its help line; the "
                         "command line wins over the environment.")


def _switch(when_on: bool) -> Callable[[str], bool]:
    def parse(text: str) -> bool:
        word = text.strip().lower()
        if word in _ON:
            return when_on
        if word in _OFF:
            return not when_on
        raise ValueError(f"expected one of {', '.join(_ON)} or {', '.join(_OFF[:-1])}")

    return parse


def _reading(parse: Callable[[str], Any], flag: str, name: str, choices: Any,
             sources: dict[str, str]) -> Callable[[str], Any]:
    """`parse`, and for the variable's value: its choices checked, and `flag` recorded as set by it."""

    @functools.wraps(parse)
    def typed(text: str) -> Any:
        if not isinstance(text, _FromEnvironment):
            return parse(text)
        try:
            value = parse(text)
        except argparse.ArgumentTypeError as e:
            raise argparse.ArgumentTypeError(f"{name}={str(text)!r}: {e}") from None
        except (ValueError, TypeError) as e:
            detail = f"not a valid {parse.__name__}" if isinstance(parse, type) else str(e) or "not a valid value"
            raise argparse.ArgumentTypeError(f"{name}={str(text)!r}: {detail}") from None
        if choices is not None and value not in choices:
            raise argparse.ArgumentTypeError(f"{name}={str(text)!r}: choose from {', '.join(map(str, choices))}")
        sources[flag] = name
        return value

    return typed


def blame(message: str, args: argparse.Namespace) -> str:
    """`message`, a refusal of the command's settings, with the variables that gave the flags it names:
    `--workers must be 1 to 256, got 0 (--workers is DESPINA_WORKERS)`."""
    named = [f"{flag} is {name}" for flag, name in getattr(args, SOURCES, {}).items()
             if re.search(re.escape(flag) + r"(?![\w-])", message)]
    return f"{message} ({', '.join(named)})" if named else message
