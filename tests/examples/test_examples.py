"""Every example runs in the interpreter and matches NumPy, as written and with Triton's imports."""

from __future__ import annotations

import re
import runpy
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NAMES = sorted(p.stem for p in EXAMPLES.glob("*.py") if not p.stem.startswith("_"))


@pytest.fixture(autouse=True)
def interpreted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DESPINA_INTERPRET", "1")
    monkeypatch.syspath_prepend(str(EXAMPLES))


def test_every_example_is_listed() -> None:
    assert NAMES == ["dropout", "flash_attention", "fused_softmax", "grouped_gemm", "layer_norm", "libdevice", "matmul",
                     "matmul_autotune", "vector_add"]


@pytest.mark.parametrize("name", NAMES)
def test_example_runs(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name="__main__")
    assert "matches NumPy" in capsys.readouterr().out or name == "dropout"


def triton_style(source: str) -> str:
    """The example with `import despina as triton` and every `despina.` (but the language) as `triton.`."""
    source = source.replace("import despina\n", "import despina as triton\n")
    return re.sub(r"\bdespina\.(?!language)", "triton.", source)


@pytest.mark.parametrize("name", NAMES)
def test_example_runs_with_triton_imports(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = triton_style((EXAMPLES / f"{name}.py").read_text())
    assert "import despina as triton" in source
    # matmul_autotune.py takes its kernel from matmul.py: it has no tl name of its own.
    assert "import despina.language as tl" in source or name == "matmul_autotune"
    assert re.search(r"\bdespina\.(?!language)", source) is None
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    sys.modules.pop(name, None)
    runpy.run_path(str(path), run_name="__main__")
    out = capsys.readouterr().out
    assert out.startswith(name)
