"""Launch overhead (printed, not asserted: timings depend on the host) and the warm disk cache
seen from a fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import despina
import despina.language as tl
from despina.runtime import DeviceArray, driver, libcuda, synchronize

LAUNCHES = 20_000


@despina.jit
def bump(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr) + 1)


def per_launch(launch: Callable[[], Any], sync: Callable[[], Any]) -> float:
    """Wall time per launch of LAUNCHES back-to-back launches, in µs (best of 3 runs)."""
    best = float("inf")
    for _ in range(3):
        sync()
        start = time.perf_counter()
        for _ in range(LAUNCHES):
            launch()
        sync()
        best = min(best, (time.perf_counter() - start) / LAUNCHES * 1e6)
    return best


def test_launch_overhead(backend: str, gpu_device: driver.Device, capsys: pytest.CaptureFixture[str]) -> None:
    kernel = despina.jit(bump.fn)
    try:
        import torch

        use_torch = torch.cuda.is_available()
    except ImportError:
        use_torch = False
    x: Any = torch.zeros(1, device="cuda") if use_torch else DeviceArray.from_numpy(np.zeros(1, np.float32))
    sync = torch.cuda.synchronize if use_torch else synchronize
    rows = {f"despina kernel[(1,)](x), {'torch' if use_torch else 'DeviceArray'} argument":
            per_launch(lambda: kernel[(1,)](x), sync)}
    assert kernel._dispatcher.slow_calls == 1
    value = float(x[0].item() if use_torch else x.to_numpy()[0])
    # Every launch ran. The PTX kernel adds 1 from one thread; despina's scalar store, like Triton's, is
    # made by every thread after every thread's load (128 threads, 4 warps: a warp may see another's store).
    assert value == 3 * LAUNCHES if backend == "ptx" else value >= 3 * LAUNCHES

    launch = kernel[(1,)]
    rows["despina launch = kernel[(1,)] once, then launch(x)"] = per_launch(lambda: launch(x), sync)
    launcher = next(iter(kernel._dispatcher.launchers.values()))
    frame = launcher.frame()  # packed by the launches above, on this thread
    launch_ex, arguments = libcuda.get().launch_ex, libcuda.launch_args(frame, launcher.handle.value or 0)
    rows["libcuda cuLaunchKernelEx through ctypes as despina calls it, packed beforehand"] = per_launch(
        lambda: launch_ex(*arguments), sync)
    cu = pytest.importorskip("cuda.bindings.driver")  # the generic wrapper despina's ctypes call is compared with
    params = frame.params.value
    function, stream = cu.CUfunction(launcher.function.handle), cu.CUstream(0)
    rows["cuda-bindings cuLaunchKernel, arguments packed beforehand"] = per_launch(
        lambda: cu.cuLaunchKernel(function, 1, 1, 1, launcher.threads, 1, 1, 0, stream, params, 0), sync)
    if use_torch:
        rows["torch x.add_(1)"] = per_launch(lambda: x.add_(1), sync)
    with capsys.disabled():
        print(f"\n[despina] launch overhead, {LAUNCHES} back-to-back launches, {gpu_device} ({backend} backend):")
        for name, us in rows.items():
            print(f"[despina]   {us:6.2f} us/launch  {name}")


_WARM = """
import json, time
start = time.perf_counter()
import numpy as np
import despina
import despina.language as tl
from despina.runtime import DeviceArray, kernels

@despina.jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

x = DeviceArray.from_numpy(np.arange(1000, dtype=np.float32))
out = DeviceArray.empty(1000, np.float32)
first = time.perf_counter()
add[(8,)](x, x, out, 1000, BLOCK=128)
ready = time.perf_counter()
ok = bool((out.to_numpy() == 2 * np.arange(1000, dtype=np.float32)).all())
print(json.dumps({"stats": dict(kernels.STATS), "ok": ok, "first_launch_s": ready - first, "process_s": ready - start}))
"""


def test_warm_disk_cache_in_a_fresh_process(gpu_device: driver.Device, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("llvmlite")
    # A script file, not `python -c`: despina reads a kernel's source back from its file.
    script = tmp_path / "warm_add.py"
    script.write_text(textwrap.dedent(_WARM))
    env = {**os.environ, "DESPINA_CACHE_DIR": str(tmp_path / "cache"), "DESPINA_INTERPRET": "0"}
    runs = []
    for _ in range(2):
        result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
        assert result.returncode == 0, result.stderr
        runs.append(json.loads(result.stdout.strip().splitlines()[-1]))
    assert runs[0]["stats"] == {"compile": 1} and runs[1]["stats"] == {"disk": 1}
    assert runs[0]["ok"] and runs[1]["ok"]
    with capsys.disabled():
        print(f"\n[despina] first launch in a fresh process: cold {runs[0]['first_launch_s']:.3f} s, "
              f"warm disk cache {runs[1]['first_launch_s']:.3f} s")
