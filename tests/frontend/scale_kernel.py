"""A small kernel written to a file of its own and traced from there: for the line-map tests, which
need to know its lines and to import it from several folders (checkouts)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np

from despina.compiler.ir.core import Module
from despina.compiler.options import CompileOptions
from despina.jit import build_module

KERNEL = '''\
import despina
import despina.language as tl


@despina.jit
def scale_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(src + offs, mask=mask)
    tl.store(dst + offs, x * 3.0, mask=mask)
'''
LOAD_LINE, STORE_LINE = 9, 10


def load_kernel(folder: Path, text: str = KERNEL) -> Any:
    """The `scale_kernel` of `text` written to `folder/scale.py` and imported from there."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "scale.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"scale_{abs(hash(str(folder)))}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.scale_kernel


def traced(kernel: Any, block: int = 256) -> Module:
    x = np.zeros(1024, np.float32)
    options = CompileOptions(num_warps=4)
    spec = kernel.specialize(kernel.bind((x, x, 1024), {"BLOCK": block}), options)
    return build_module(kernel, spec.params, spec.attrs, False)[0]
