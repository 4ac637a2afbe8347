"""fp8 conversions on CPU: sm_89 and later convert with the packed `cvt` instructions, two values at
a time, and link to cubins; older targets widen fp8 in integer arithmetic and refuse to narrow to it,
with an error that names the kernel's line and what to do instead."""

from __future__ import annotations

import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

import despina  # noqa: E402
import despina.language as tl  # noqa: E402


@despina.jit
def widen_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs).to(out_ptr.dtype.element_ty))


def _ptx(src: str, dst: str, target: str = "sm_90a", block: int = 1024) -> str:
    kernel = despina.compile(widen_kernel, f"*{src}:16,*{dst}:16", {"BLOCK": block}, num_warps=4, target=target)
    assert kernel.cubin[:4] == b"\x7fELF"
    return kernel.asm["ptx"]


@pytest.mark.parametrize("fp8", ["fp8e4nv", "fp8e5"])
@pytest.mark.parametrize("target", ["sm_89", "sm_90a"])
def test_conversions_take_two_values_per_instruction(fp8, target):
    kind = {"fp8e4nv": "e4m3x2", "fp8e5": "e5m2x2"}[fp8]
    # 1024 elements over 128 threads: 8 a thread, 4 instructions.
    assert _ptx("fp32", fp8, target).count(f"cvt.rn.satfinite.{kind}.f32 ") == 4
    assert _ptx("fp16", fp8, target).count(f"cvt.rn.satfinite.{kind}.f16x2 ") == 4
    bf16 = _ptx("bf16", fp8, target)
    assert bf16.count(f"cvt.rn.satfinite.{kind}.f32 ") == 4 and bf16.count("cvt.f32.bf16") == 8
    for dst in ("fp16", "fp32", "bf16"):
        assert _ptx(fp8, dst, target).count(f"cvt.rn.f16x2.{kind} ") == 4


def test_an_odd_register_count_pairs_the_last_value_with_itself():
    ptx = _ptx("fp32", "fp8e4nv", block=128)  # one value a thread
    assert ptx.count("cvt.rn.satfinite.e4m3x2.f32 ") == 1


@pytest.mark.parametrize("fp8", ["fp8e4nv", "fp8e5"])
def test_sm80_widens_in_integer_arithmetic(fp8):
    for dst in ("fp16", "fp32", "bf16"):
        ptx = _ptx(fp8, dst, "sm_80")
        assert "e4m3" not in ptx and "e5m2" not in ptx


def test_sm80_refuses_to_narrow_with_the_line_and_what_to_do():
    with pytest.raises(despina.CompilationError) as info:
        _ptx("fp32", "fp8e4nv", "sm_80")
    text = str(info.value)
    assert "kernel 'widen_kernel'" in text and "test_fp8.py:19:" in text  # the store line
    assert "cvt.rn.satfinite.e4m3x2.f32) needs sm_89 or later" in text and "convert to fp8 outside the kernel" in text
