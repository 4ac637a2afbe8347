"""benchmarks/power.py on a real GPU: NVML's energy counter, clock and power cap read through ctypes, and a
sustained torch.matmul measured in units that agree with the board's power limit."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import power  # noqa: E402


def test_a_sustained_matmul_draws_what_the_board_can(torch_cuda: Any) -> None:
    torch = torch_cuda
    try:
        nvml = power.Nvml(torch.cuda.current_device())
    except power.PowerUnavailable as exc:
        pytest.skip(str(exc))
    a = torch.randn((4096, 4096), device="cuda", dtype=torch.float16)
    before = nvml.energy_j()
    got = power.sustained(nvml, lambda: torch.matmul(a, a), 2.0 * 4096**3, 0.5)
    assert nvml.energy_j() > before
    limit = nvml.power_limit_w()
    watts = got.tflops / got.tflop_per_j  # TFLOP/s over TFLOP/J
    assert 30.0 < watts < 1.2 * limit, (watts, limit)  # joules, not millijoules; the board's, not a guess
    assert 100 < got.sm_mhz < 3000 and 0.0 <= got.capped <= 1.0
    assert 10.0 < got.tflops < 5000.0
