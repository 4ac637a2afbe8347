"""benchmarks/power.py without a GPU: a missing or failing NVML is a PowerUnavailable that says what is
missing, not a ctypes error (tests/gpu/test_benchmark_power.py reads a real GPU's counters)."""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import power  # noqa: E402


def test_a_host_without_nvml_says_the_table_needs_the_drivers_library(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> Any:
        raise OSError(f"{name}: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    with pytest.raises(power.PowerUnavailable, match=r"cannot load libnvidia-ml.so.1 .*NVML library"):
        power.Nvml()


def test_an_nvml_call_that_fails_names_the_call_and_nvmls_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    class Library:
        nvmlErrorString = staticmethod(lambda code: b"Driver Not Loaded" if code == 9 else b"?")

        def nvmlInit_v2(self) -> int:
            return 9

    monkeypatch.setattr(ctypes, "CDLL", lambda name: Library())
    with pytest.raises(power.PowerUnavailable, match=r"NVML's nvmlInit_v2 failed: Driver Not Loaded \(9\)"):
        power.Nvml()
