"""Helpers of the scheduling tests: where a marked source line is, and what the scheduler logged."""

from __future__ import annotations

from pathlib import Path

import pytest

LOGGER = "despina.compiler.interpreter.schedule"


def line_of(path: str, marker: str) -> str:
    """`path:line` of the line of `path` that ends with `# <marker>`."""
    lines = Path(path).read_text().splitlines()
    return f"{path}:{next(i for i, text in enumerate(lines, 1) if text.endswith(f'# {marker}'))}"


def fallbacks(log: pytest.LogCaptureFixture) -> list[str]:
    """What the scheduler logged: one message per launch that went one program at a time."""
    return [r.getMessage() for r in log.records if r.name == LOGGER]
