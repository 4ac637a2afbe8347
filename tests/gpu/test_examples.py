"""Every example on the GPU: launched by Despina's own runtime (not interpreted) and matching NumPy, as
written and with Triton's imports. Skipped without a CUDA device, or without the compiler extras."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest
from examples.test_examples import EXAMPLES, NAMES, triton_style

from despina.runtime import driver


@pytest.fixture(autouse=True)
def on_gpu(gpu_device: driver.Device, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("llvmlite")
    # Set, then removed: the original value is on record, so teardown restores it even if an example sets it.
    monkeypatch.setenv("DESPINA_INTERPRET", "0")
    monkeypatch.delenv("DESPINA_INTERPRET")
    monkeypatch.setenv("DESPINA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(str(EXAMPLES))


def check(name: str, out: str) -> None:
    assert out.startswith(name), out
    assert "on the GPU" in out and "interpret" not in out, out
    assert "matches NumPy" in out or name == "dropout", out


@pytest.mark.parametrize("name", NAMES)
def test_example_runs_on_the_gpu(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name="__main__")
    check(name, capsys.readouterr().out)


@pytest.mark.parametrize("name", NAMES)
def test_example_runs_on_the_gpu_with_triton_imports(name: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / f"{name}.py"
    path.write_text(triton_style((EXAMPLES / f"{name}.py").read_text()))
    sys.modules.pop(name, None)
    runpy.run_path(str(path), run_name="__main__")
    check(name, capsys.readouterr().out)
