"""runtime/kernels.py's `prepare`, which the in-process autotuner calls: every config compiled at once in worker
processes, and `done` called in the caller's thread as each lands; the configs already cached reported once the
workers are compiling the others, so that the autotuner measures them meanwhile (they used to be reported, and
measured, before any compile began)."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

import despina  # noqa: E402
import despina.language as tl  # noqa: E402
from despina.compiler.ir.core import Module  # noqa: E402
from despina.runtime import kernels  # noqa: E402


@despina.jit
def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 3.0, mask=offs < n)


def _item(block: int, warps: int) -> tuple[Module, Any, str]:
    x = np.zeros(4096, np.float32)
    options = scale.options({"num_warps": warps}, interpret=False)
    return scale.ir(scale.specialize(scale.bind((x, x, 4096), {"BLOCK": block}), options), options), options, "sm_90"


def test_cached_configs_are_reported_while_the_others_compile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DESPINA_CACHE_DIR", str(tmp_path))
    items = [_item(256, 1), _item(512, 2), _item(1024, 4)]
    assert kernels.prepare(items[:1], lambda i, error: None) == [None]
    seen: list[tuple[int, str | None, bool]] = []
    errors = kernels.prepare(items, lambda i, error: seen.append((i, error, bool(mp.active_children()))))
    assert errors == [None, None, None]
    assert seen[0] == (0, None, True)  # the cached one, with the workers started
    assert sorted(i for i, _, _ in seen) == [0, 1, 2] and all(error is None for _, error, _ in seen)
