"""Fixtures shared by the kernel tests (tests/language, tests/frontend, test_jit, test_autotuner).

`device` is where kernels run: here the NumPy interpreter; `tests/gpu/test_language.py` collects
the same tests again with a `device` that runs them on the GPU. Tests build inputs with
NumPy, move them with `device.put(x, dtype)`, launch `kernel[grid](...)` and read results back
with `device.get`. bf16 has no NumPy dtype: `device.put(x, "bf16")` passes the values' bf16
bits as `despina.reinterpret(bits, tl.bfloat16)` and `device.get` returns them as float32.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from language.reference import NUMPY, as_dtype, bf16_bits, bf16_from_bits

import despina
import despina.language as tl
from despina.compiler.ir.core import Module
from despina.compiler.options import CompileOptions
from despina.frontend.codegen import generate_module
from despina.jit import TensorWrapper


class Interpreter:
    """Runs kernels in the NumPy interpreter; arguments stay NumPy arrays."""

    name = "interpreter"

    def put(self, x: Any, dtype: str | None = None) -> Any:
        """`x` (array-like) as a kernel argument of element type `dtype` (default: x's own)."""
        if dtype == "bf16":
            return despina.reinterpret(bf16_bits(x), tl.bfloat16)
        return np.ascontiguousarray(np.asarray(x) if dtype is None else as_dtype(x, dtype))

    def zeros(self, shape: Any, dtype: str) -> Any:
        return self.put(np.zeros(shape, NUMPY[dtype]), dtype)

    def get(self, x: Any) -> np.ndarray:
        """A NumPy copy of what a kernel argument holds (bf16 as float32)."""
        if isinstance(x, TensorWrapper):
            return bf16_from_bits(x.base) if x.dtype == tl.bfloat16 else np.array(x.base, copy=True)
        return np.array(x, copy=True)

    def bits(self, x: Any) -> np.ndarray:
        """The raw bits of what a kernel argument holds, as unsigned integers of the element width."""
        arr = np.asarray(x.base if isinstance(x, TensorWrapper) else x)
        return arr.view(np.dtype(f"u{arr.dtype.itemsize}")).copy()


@pytest.fixture(scope="session", autouse=True)
def _kernel_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Kernels compiled by the tests (and the processes they start) go to a folder of the session's,
    not to the user's ~/.cache/despina."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DESPINA_CACHE_DIR", str(tmp_path_factory.mktemp("despina-cache")))
        yield


@pytest.fixture(params=["interpreter"])
def device(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Interpreter:
    monkeypatch.setenv("DESPINA_INTERPRET", "1")
    return Interpreter()


def _trace(kernel: despina.JITFunction, *args: Any, **kwargs: Any) -> Module:
    options = CompileOptions.make(kernel.__name__, num_warps=kwargs.pop("num_warps", None))
    spec = kernel.specialize(kernel.bind(args, kwargs), options)
    module, _ = generate_module(kernel, spec.params, options.debug, spec.attrs)
    return module


@pytest.fixture
def trace() -> Any:
    """`trace(kernel, *args, **meta)`: the frontend's IR for that specialization (nothing runs)."""
    return _trace


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Modules that re-collect the kernel suites elsewhere (on the GPU, or compiling every kernel to
    cubins) set `RECOLLECTS_DEVICE_TESTS`: keep only their tests that run kernels on `device`."""
    def kept(item: pytest.Item) -> bool:
        module = getattr(item, "module", None)
        return not getattr(module, "RECOLLECTS_DEVICE_TESTS", False) or "device" in getattr(item, "fixturenames", ())

    keep = [i for i in items if kept(i)]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if not kept(i)])
        items[:] = keep
