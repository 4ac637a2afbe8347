"""deploy/Dockerfile read as its stages' instructions, for tests that check what the image does and repeat it."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)  # (KEYWORD, the rest of the line)

    def all(self, keyword: str) -> list[str]:
        return [rest for word, rest in self.instructions if word == keyword]

    def env(self) -> dict[str, str]:
        """The stage's ENV settings (KEY=VALUE form), in order, a later one replacing an earlier one."""
        found: dict[str, str] = {}
        for rest in self.all("ENV"):
            for item in shlex.split(rest):
                key, _, value = item.partition("=")
                found[key] = value
        return found


def exec_form(rest: str) -> list[str]:
    """An instruction's JSON (exec) form, e.g. ENTRYPOINT ["despina", "serve"]; ValueError for the shell form."""
    value = json.loads(rest)
    if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        raise ValueError(f"not an exec form: {rest}")
    return value


def stages(path: Path = DOCKERFILE) -> list[Stage]:
    """The Dockerfile's stages, each with its instructions, continuation lines joined and comments left out."""
    lines: list[str] = []
    pending = ""
    for raw in path.read_text().splitlines():
        if raw.lstrip().startswith("#") or not raw.strip():
            continue
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        lines.append(pending + raw)
        pending = ""
    args: dict[str, str] = {}
    found: list[Stage] = []
    for line in lines:
        word, _, rest = line.strip().partition(" ")
        word, rest = word.upper(), re.sub(r"\s+", " ", rest.strip())
        if word == "ARG" and not found:
            key, _, value = rest.partition("=")
            args[key] = value
        elif word == "FROM":
            parts = rest.split()
            base = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), parts[0])
            found.append(Stage(base, parts[2] if len(parts) > 2 and parts[1].upper() == "AS" else None))
        else:
            found[-1].instructions.append((word, rest))
    return found
