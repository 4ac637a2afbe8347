"""Fixtures of the GPU tests. Every test here needs a CUDA device and skips without one (no driver,
no device, cuInit failing); torch tests also skip without torch or without torch.cuda."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from language.reference import NUMPY, as_dtype, bf16_bits, bf16_from_bits

import despina
import despina.language as tl
from despina.compiler.ir.core import Module
from despina.compiler.options import CompileOptions
from despina.jit import TensorWrapper
from despina.runtime import CudaUnavailableError, driver, kernels
from despina.runtime.cache import Binary

from .ptx import KERNELS, cubin


@pytest.fixture(scope="session")
def gpu_device() -> driver.Device:
    """Device 0, its primary context current; the test is skipped without CUDA."""
    try:
        device = driver.device(0)
    except CudaUnavailableError as exc:
        pytest.skip(f"no CUDA device: {exc}")
    device.make_current()
    return device


@pytest.fixture
def torch_cuda(gpu_device: driver.Device) -> Any:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    return torch


@pytest.fixture
def fresh_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty disk cache and an empty in-memory one, the GPU path on."""
    monkeypatch.setenv("DESPINA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(kernels, "_MEMORY", {})
    monkeypatch.setattr(kernels, "STATS", Counter())
    monkeypatch.delenv("DESPINA_INTERPRET", raising=False)
    return tmp_path / "cache"


@pytest.fixture(params=["nvptx", "ptx"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, gpu_device: driver.Device,
            fresh_cache: Path) -> str:
    """JIT kernels compiled by despina's NVPTX backend, or taken from the hand-written PTX kernels of
    the same name (which tests the runtime alone, whatever the backend's state)."""
    if request.param == "nvptx":
        pytest.importorskip("llvmlite")
        return "nvptx"

    def compile_binary(module: Module, options: CompileOptions, target: str) -> Binary:
        name = module.kernel.name
        assert name in KERNELS, f"no hand-written PTX kernel '{name}'"
        return Binary(name, cubin(name, target), {"shared": 0, "num_warps": options.num_warps}, {"ptx": KERNELS[name]})

    monkeypatch.setattr(kernels, "compile_binary", compile_binary)
    return "ptx"


class Gpu:
    """Runs kernels on CUDA device 0: arguments are `despina.DeviceArray`s (bf16 as the bits of a
    uint16 array under `despina.reinterpret`), results are copied back to NumPy. The language suite's
    tests take it through the `device` fixture below, in place of the interpreter."""

    name = "gpu"

    def put(self, x: Any, dtype: str | None = None) -> Any:
        if dtype == "bf16":
            return despina.reinterpret(despina.DeviceArray.from_numpy(bf16_bits(x)), tl.bfloat16)
        host = np.ascontiguousarray(np.asarray(x) if dtype is None else as_dtype(x, dtype))
        return despina.DeviceArray.from_numpy(host)

    def zeros(self, shape: Any, dtype: str) -> Any:
        return self.put(np.zeros(shape, NUMPY[dtype]), dtype)

    def _host(self, x: Any) -> np.ndarray:
        base = x.base if isinstance(x, TensorWrapper) else x
        return base.to_numpy() if isinstance(base, despina.DeviceArray) else np.array(base, copy=True)

    def get(self, x: Any) -> np.ndarray:
        host = self._host(x)
        return bf16_from_bits(host) if isinstance(x, TensorWrapper) and x.dtype == tl.bfloat16 else host

    def bits(self, x: Any) -> np.ndarray:
        host = self._host(x)
        return host.view(np.dtype(f"u{host.dtype.itemsize}")).copy()


@pytest.fixture(params=["gpu"])
def device(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, gpu_device: driver.Device,
           tmp_path: Path) -> Gpu:
    pytest.importorskip("llvmlite")
    monkeypatch.delenv("DESPINA_INTERPRET", raising=False)
    monkeypatch.setenv("DESPINA_CACHE_DIR", str(tmp_path / "cache"))
    return Gpu()

