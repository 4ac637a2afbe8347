"""fp8 `tl.dot` on CPU: the tutorial matmul on fp8 operands (benchmarks/kernels.py) multiplies on
`wgmma.mma_async ... k32 .f32.e4m3.e4m3` (and e5m2) for sm_90a, both operands K-major in swizzled
shared memory (an N-major B is transposed on its way there), links without ptxas warnings or spills;
targets without fp8 MMA convert the operands to fp16 and say so in the dot's engine."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

import despina  # noqa: E402
import despina.language as tl  # noqa: E402

from .test_registers import KERNELS  # noqa: E402

# a, b, c, M, N, K, stride_am, stride_ak (1), stride_bk, stride_bn, stride_cm, stride_cn (1)
K_MAJOR_B = "*{t}:16,*{t}:16,*fp16:16,i32:16,i32:16,i32:16,i32:16,i32:1,i32:1,i32:16,i32:16,i32:1"
N_MAJOR_B = "*{t}:16,*{t}:16,*fp16:16,i32:16,i32:16,i32:16,i32:16,i32:1,i32:16,i32:1,i32:16,i32:1"


def _matmul(dtype: str = "fp8e4nv", sig: str = K_MAJOR_B, target: str = "sm_90a", bn: int = 256, bk: int = 64) -> Any:
    consts = {"BLOCK_M": 128, "BLOCK_N": bn, "BLOCK_K": bk}
    return despina.compile(KERNELS.matmul_kernel, sig.format(t=dtype), consts, num_warps=8, num_stages=3, target=target)


def _line(kernel: Any, what: str) -> str:
    (line,) = [line for line in kernel.asm["gpuir"].splitlines() if what in line]
    return line


@pytest.mark.parametrize(("dtype", "kind"), [("fp8e4nv", "e4m3"), ("fp8e5", "e5m2")])
@pytest.mark.parametrize("bn", [128, 256])
def test_fp8_tutorial_matmul_runs_on_wgmma_k32(dtype: str, kind: str, bn: int) -> None:
    k = _matmul(dtype, bn=bn)
    ptx = k.asm["ptx"]
    # 8 warps = 2 warpgroups along M, each one m64n{bn}k32 per K step of 32: 2 in the loop body.
    assert ptx.count(f"wgmma.mma_async.sync.aligned.m64n{bn}k32.f32.{kind}.{kind} ") == 2
    assert re.search(r"\}, %rd\d+, %rd\d+, p, 1, 1;", ptx)  # no transpose flags: both operands K-major
    assert f'engine = "wgmma.m64n{bn}k32"' in _line(k, " dot(")
    assert "3 stages, 2 loads by cp.async" in _line(k, " for(")
    assert "mma.sync" not in ptx and "ldmatrix" not in ptx and f"cvt.rn.f16x2.{kind}x2" not in ptx  # no upcast
    assert k.metadata["ptxas_warnings"] == [] and k.metadata["spill_stores"] == 0


def test_an_n_major_b_is_stored_k_major_for_wgmma() -> None:
    k = _matmul(sig=N_MAJOR_B, bn=128)
    ptx = k.asm["ptx"]
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 ") == 2
    assert re.search(r"\}, %rd\d+, %rd\d+, p, 1, 1;", ptx)
    b_load = [line for line in k.asm["gpuir"].splitlines() if " load(" in line][1]
    assert "none: its accesses are 16 bytes" in b_load  # along N: not copied into a K-major ring
    assert k.metadata["ptxas_warnings"] == [] and k.metadata["spill_stores"] == 0


@pytest.mark.parametrize("target", ["sm_80", "sm_89", "sm_90"])
def test_without_fp8_mma_the_operands_are_upcast_to_fp16(target: str) -> None:
    k = _matmul(target=target, bn=128)
    assert 'engine = "mma.sync.m16n8k16 (fp8 operands upcast to fp16: no fp8 MMA on this target' in _line(k, " dot(")
    ptx = k.asm["ptx"]
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx and "wgmma" not in ptx
    assert ("cvt.rn.f16x2.e4m3x2" in ptx) == (target != "sm_80")  # sm_80 widens in integer arithmetic


def test_a_k_step_below_wgmmas_is_upcast_too() -> None:
    k = _matmul(bn=128, bk=16)
    assert "(fp8 operands upcast to fp16: BLOCK_K=16 is not a multiple of 32)" in _line(k, " dot(")
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in k.asm["ptx"]


@despina.jit
def fp8_out_kernel(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * K + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] + rn[None, :] * K
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, tl.cdiv(K, BK)):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
        a_ptrs += BK
        b_ptrs += BK
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc.to(tl.float8e4nv))


def test_accumulators_narrow_to_fp8_in_pairs_without_serializing_wgmma() -> None:
    """The packed cvt reads the accumulator registers without ptxas serializing the wgmmas (C7514)."""
    k = despina.compile(fp8_out_kernel, "*fp8e4nv:16,*fp8e4nv:16,*fp8e4nv:16,i32:16", {"BM": 128, "BN": 256, "BK": 64},
                        num_warps=8, num_stages=3, target="sm_90a")
    assert k.asm["ptx"].count("cvt.rn.satfinite.e4m3x2.f32 ") == 64  # 128 accumulators a thread, two at a time
    assert k.metadata["ptxas_warnings"] == [] and k.metadata["spill_stores"] == 0
