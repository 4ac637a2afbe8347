"""The compile options that change the code: `enable_fp_fusion` (mul + add -> fma) and `maxnreg`
(`.maxnreg` in the PTX, the cubin within it); the rest are refused before any work."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

from despina.compiler.backends.nvptx import compile_module  # noqa: E402
from despina.compiler.ir.core import Module  # noqa: E402
from despina.compiler.ir.types import PointerType, float32  # noqa: E402
from despina.compiler.options import CompileOptions, OptionError  # noqa: E402

from .. import kernels  # noqa: E402
from ..kernel_builder import KernelBuilder  # noqa: E402

f32p = PointerType(float32)


def axpy() -> Module:
    """out = a * x + y, one fp32 block."""
    k = KernelBuilder("axpy", [("a", f32p), ("x", f32p), ("y", f32p), ("out", f32p)])
    offs = k.arange(0, 128)
    a, x, y = (k.load(k.ptrs(k[n], offs)) for n in ("a", "x", "y"))
    k.store(k.ptrs(k["out"], offs), k.bin("add", k.bin("mul", a, x), y))
    return k.module(divisibility=[0, 1, 2, 3])


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_fp_fusion_contracts_mul_and_add_into_fma_by_default(target: str) -> None:
    ptx = str(compile_module(axpy(), target, isolate=False).asm["ptx"])
    assert re.search(r"\bfma\.rn\.f32\b", ptx) and not re.search(r"\b(mul|add)\.rn\.f32\b", ptx)


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_without_fp_fusion_mul_and_add_stay_apart_each_rounded(target: str) -> None:
    k = compile_module(axpy(), target, CompileOptions(enable_fp_fusion=False), isolate=False)
    ptx = str(k.asm["ptx"])
    assert re.search(r"\bmul\.rn\.f32\b", ptx) and re.search(r"\badd\.rn\.f32\b", ptx) and "fma" not in ptx
    assert k.metadata["enable_fp_fusion"] is False


def test_maxnreg_caps_the_registers_of_the_cubin() -> None:
    free = compile_module(kernels.softmax(4096), "sm_90", num_warps=4, isolate=False)
    assert ".maxnreg" not in str(free.asm["ptx"]) and free.metadata["maxnreg"] is None
    assert free.metadata["registers"] > 24, "the kernel must need more registers than the cap for the test to mean anything"
    capped = compile_module(kernels.softmax(4096), "sm_90", num_warps=4, maxnreg=24, isolate=False)
    assert re.search(r"^\.maxnreg 24$", str(capped.asm["ptx"]), re.M)
    assert 0 < capped.metadata["registers"] <= 24 and capped.metadata["maxnreg"] == 24


def test_options_that_do_nothing_yet_are_refused_naming_the_kernel() -> None:
    with pytest.raises(OptionError, match="kernel 'axpy': num_ctas=2 is not supported"):
        compile_module(axpy(), "sm_90", num_ctas=2)
    with pytest.raises(OptionError, match="kernel 'axpy': num_ctas=2"):
        compile_module(axpy(), "sm_90", CompileOptions(num_ctas=2))
    with pytest.raises(TypeError, match="not both"):
        compile_module(axpy(), "sm_90", CompileOptions(), num_warps=8)
