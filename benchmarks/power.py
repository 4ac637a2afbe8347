"""What a GPU spends to run a kernel: its energy counter, SM clock and power cap as NVML reports them
(`libnvidia-ml`, the driver's own library, through ctypes), for benchmarks/gpu.py's energy table.

A GPU held at its power limit lowers its clock until it draws no more: there, a kernel's speed is the
power limit divided by the energy each FLOP costs, and two kernels that spend the same joules per
FLOP run at the same speed whatever else differs. `sustained` runs a kernel back to back long enough
for the clock to settle and reports its TFLOP/s, its TFLOP per joule, the mean SM clock and how much
of the run the software power cap held the clock down.
"""

from __future__ import annotations

import ctypes
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CLOCK_SM = 1  # nvmlClockType_t
SW_POWER_CAP = 0x4  # nvmlClocksEventReasonSwPowerCap: the clock is lowered to hold the board to its power limit
SAMPLE_S = 0.02


class PowerUnavailable(RuntimeError):
    """NVML is missing or refused: the energy table needs the NVIDIA driver's libnvidia-ml."""


class Nvml:
    """One GPU's NVML handle, found by the UUID that torch reports for its CUDA device `index`."""

    def __init__(self, index: int = 0) -> None:
        try:
            self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        except OSError as exc:
            raise PowerUnavailable(f"cannot load libnvidia-ml.so.1 ({exc}): the energy table needs the NVIDIA "
                                   "driver's NVML library on the library path") from None
        self.lib.nvmlErrorString.restype = ctypes.c_char_p
        self._check("nvmlInit_v2")
        self.handle = ctypes.c_void_p()
        import torch

        uuid = f"GPU-{torch.cuda.get_device_properties(index).uuid}".encode()
        self._check("nvmlDeviceGetHandleByUUID", ctypes.c_char_p(uuid), ctypes.byref(self.handle))

    def _check(self, name: str, *args: Any) -> None:
        code = getattr(self.lib, name)(*args)
        if code != 0:
            raise PowerUnavailable(f"NVML's {name} failed: {self.lib.nvmlErrorString(code).decode()} ({code})")

    def _read(self, name: str, kind: type, *args: Any) -> int:
        value = kind()
        self._check(name, self.handle, *args, ctypes.byref(value))
        return int(value.value)

    def energy_j(self) -> float:
        """Joules the board has used since the driver loaded (millijoules in NVML)."""
        return self._read("nvmlDeviceGetTotalEnergyConsumption", ctypes.c_ulonglong) / 1000.0

    def sm_mhz(self) -> int:
        return self._read("nvmlDeviceGetClockInfo", ctypes.c_uint, ctypes.c_int(CLOCK_SM))

    def power_capped(self) -> bool:
        return bool(self._read("nvmlDeviceGetCurrentClocksEventReasons", ctypes.c_ulonglong) & SW_POWER_CAP)

    def power_limit_w(self) -> float:
        return self._read("nvmlDeviceGetEnforcedPowerLimit", ctypes.c_uint) / 1000.0


@dataclass
class Sustained:
    tflops: float  # TFLOP/s
    tflop_per_j: float
    sm_mhz: float  # mean over the run
    capped: float  # share of the run's samples with the clock held down by the power cap


def sustained(nvml: Nvml, fn: Callable[[], Any], flop: float, seconds: float) -> Sustained:
    """`fn` (one kernel launch of `flop` floating-point operations) run back to back for about `seconds`,
    after a second of the same to bring the GPU to its sustained clock; the clock and power cap are sampled
    every 20 ms while it runs."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    per_second = 1000.0 / max(start.elapsed_time(end), 1e-3)
    for _ in range(int(per_second)):
        fn()
    torch.cuda.synchronize()
    samples: list[tuple[int, bool]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            samples.append((nvml.sm_mhz(), nvml.power_capped()))
            time.sleep(SAMPLE_S)

    sampler = threading.Thread(target=sample)
    before = nvml.energy_j()
    start.record()
    sampler.start()
    calls = max(10, int(seconds * per_second))
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    done.set()
    sampler.join()
    joules = nvml.energy_j() - before
    seconds_run = start.elapsed_time(end) / 1000.0
    if joules <= 0 or not samples:
        raise PowerUnavailable(f"NVML's energy counter did not advance over {seconds_run:.2f} s of kernels")
    return Sustained(flop * calls / seconds_run * 1e-12, flop * calls / joules * 1e-12,
                     statistics.mean(m for m, _ in samples), sum(c for _, c in samples) / len(samples))
