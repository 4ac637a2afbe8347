"""`@despina.autotune` on the GPU: in-process (configs compiled at once in worker processes, measured
here, the record kept on disk for the next process) and through a daemon that measures on its GPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import despina
import despina.language as tl
from despina.runtime import DeviceArray, driver

from .test_execute import GrpcDaemon, gpu_daemon, on_daemon  # noqa: F401 (fixtures)

CONFIGS = [despina.Config({"BLOCK": b}, num_warps=w) for b, w in ((256, 1), (512, 2), (1024, 4))]


def tuned_scale() -> despina.autotuner.Autotuner:
    """A fresh autotuner (no tuning in memory) over the same kernel, as a new process would have."""

    @despina.autotune(configs=CONFIGS, key=["n"])
    @despina.jit
    def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)

    return scale


def run(kernel: despina.autotuner.Autotuner, n: int) -> None:
    x = np.arange(n, dtype=np.float32)
    dx, out = DeviceArray.from_numpy(x), DeviceArray.empty(n, np.float32)
    kernel[lambda m: (despina.cdiv(n, m["BLOCK"]),)](dx, out, n)
    np.testing.assert_array_equal(out.to_numpy(), 2 * x)


def test_in_process_tuning_is_measured_printed_and_kept_on_disk(
        gpu_device: driver.Device, fresh_cache: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DESPINA_PRINT_AUTOTUNING", "1")
    first = tuned_scale()
    run(first, 100_000)
    assert len(first.configs_timings) == 3 and all(t > 0 for t in first.configs_timings.values())
    assert first.best_config in CONFIGS
    out = capsys.readouterr().out
    assert out.count("Autotuning kernel scale with config") == 3 and "best config selected" in out
    assert list((fresh_cache / "tunings").rglob("*")), "no tuning record on disk"
    monkeypatch.setenv("DESPINA_PRINT_AUTOTUNING", "0")
    again = tuned_scale()
    run(again, 100_000)
    assert again.best_config == first.best_config and capsys.readouterr().out == ""


def test_tuning_through_a_daemon_on_its_gpu(on_daemon: GrpcDaemon, fresh_cache: Path) -> None:  # noqa: F811
    before = on_daemon.stats()
    first = tuned_scale()
    run(first, 123_457)
    after = on_daemon.stats()
    assert after.benchmarks - before.benchmarks == 3 and after.compiles - before.compiles == 3
    run(tuned_scale(), 123_457)
    final = on_daemon.stats()
    assert (final.benchmarks, final.compiles) == (after.benchmarks, after.compiles)
