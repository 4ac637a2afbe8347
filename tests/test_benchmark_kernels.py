"""tests/benchmark_kernels.py, the loader of the benchmark's kernels that tests compile: a load without a folder
writes into a temporary one that is gone when the process ends (every run of the suite used to leave hundreds of
`despina-bench-kernels-*` folders in /tmp)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_a_load_without_a_folder_leaves_none_behind(tmp_path: Path) -> None:
    code = f"import sys; sys.path.insert(0, {str(TESTS)!r}); import benchmark_kernels; print(benchmark_kernels.load().__file__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TMPDIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    written = Path(done.stdout.strip())
    assert written.parent.parent == tmp_path and written.name == "kernels_despina.py"
    assert list(tmp_path.iterdir()) == []
