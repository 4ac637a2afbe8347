"""The layer-norm example's backward pass, whose programs take turns on shared locks."""

from __future__ import annotations

import logging
import runpy
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LOGGER = "despina.compiler.interpreter.schedule"


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setenv("DESPINA_INTERPRET", "1")
    monkeypatch.syspath_prepend(str(EXAMPLES))
    return runpy.run_path(str(EXAMPLES / "layer_norm.py"))


@pytest.mark.parametrize(
    ("shape", "waits"),
    [
        # 128-column blocks: 1024 programs a batch, so rows 0 and 256 of one batch want lock 0.
        ((600, 100), True),
        # 2048-column blocks: 64 programs a batch, 128 locks: every program of a batch has its own.
        ((100, 1500), False),
    ],
)
def test_backward_matches_numpy(
    example: dict[str, Any], caplog: pytest.LogCaptureFixture, shape: tuple[int, int], waits: bool
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    example["check_backward"](*shape)
    logged = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    if waits:
        [message] = logged
        assert message.startswith("kernel 'layer_norm_bwd_dx_fused': the programs of the while loop at ")
    else:
        assert logged == []
