"""Fixtures of the GPU tests. Every test here needs a CUDA device and skips without one (no driver,
no device, cuInit failing); torch tests also skip without torch or without torch.cuda."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from despina.compiler.ir.core import Module
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

    def compile_module(module: Module, options: dict[str, Any], target: str) -> Binary:
        name = module.kernel.name
        assert name in KERNELS, f"no hand-written PTX kernel '{name}'"
        return Binary(name, cubin(name, target), {"shared": 0, "num_warps": options["num_warps"]}, {"ptx": KERNELS[name]})

    monkeypatch.setattr(kernels, "compile_module", compile_module)
    return "ptx"
