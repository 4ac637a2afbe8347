"""Every example compiles to cubins for sm_80 and sm_90 on this CPU-only host: each runs in the
interpreter (checking its results) while every module it builds is also compiled by the backend."""

from __future__ import annotations

import runpy

import pytest
from examples.test_examples import EXAMPLES, NAMES

pytest.importorskip("llvmlite")
from .cubins import also_compile_to_cubins  # noqa: E402


@pytest.mark.parametrize("name", NAMES)
def test_example_compiles_to_cubins(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DESPINA_INTERPRET", "1")
    monkeypatch.syspath_prepend(str(EXAMPLES))
    also_compile_to_cubins(monkeypatch)
    runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name="__main__")
