"""The tensor-core path on CPU: the tutorial matmul (benchmarks/kernels.py) compiled for sm_80
runs on mma.sync with ldmatrix operands, no local-memory spills; the GPU IR says which engine
each dot uses and keeps the epilogue's store in a coalesced blocked layout."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

import despina  # noqa: E402
import despina.language as tl  # noqa: E402

from .test_registers import KERNELS  # noqa: E402

MATMUL_SIG = "*fp16:16,*fp16:16,*fp16:16,i32,i32,i32,i32:16,i32:1,i32:16,i32:1,i32:16,i32:1"


def _compile(kernel: Any, sig: str, consts: dict[str, Any], warps: int = 8) -> Any:
    return despina.compile(kernel, sig, consts, num_warps=warps, target="sm_80")


@pytest.fixture(scope="module")
def tutorial() -> Any:
    return _compile(KERNELS.matmul_kernel, MATMUL_SIG, {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64})


def test_tutorial_matmul_runs_on_mma_sync(tutorial: Any) -> None:
    ptx = tutorial.asm["ptx"]
    # 8 warps as 2x4 over 128x128: a warp's 64x32 is 4x4 instructions per 16-deep K step, 4 steps.
    assert ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") == 4 * 4 * 4
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx  # A, K contiguous
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in ptx  # B, N contiguous
    assert ".local" not in ptx and tutorial.metadata["spill_stores"] == 0
    assert "fma.rn.f32" not in ptx


def test_gpu_ir_shows_the_plan_and_a_blocked_store(tutorial: Any) -> None:
    gpuir = tutorial.asm["gpuir"]
    aliases = dict(re.findall(r"^(#L\d+) = (.*)$", gpuir, re.M))
    (dot,) = [line for line in gpuir.splitlines() if " dot(" in line]
    assert 'engine = "mma.sync.m16n8k16"' in dot
    assert aliases[dot.rsplit(" ", 1)[1]] == "mma<v2, warps=[2, 4], instr=[16, 8]>"
    names = [aliases[a] for a in re.findall(r"convert_layout\(%\d+\) : tile<[^>]*> (#L\d+)", gpuir)]
    assert "dot_op<0, parent=mma<v2, warps=[2, 4], instr=[16, 8]>, kWidth=2>" in names
    assert "dot_op<1, parent=mma<v2, warps=[2, 4], instr=[16, 8]>, kWidth=2>" in names
    (store,) = [line for line in gpuir.splitlines() if line.strip().startswith("store(")]
    ptr = store.split("(")[1].split(",")[0]
    ptr_alias = re.search(rf"{ptr} = .* (#L\d+)$", gpuir, re.M)
    assert ptr_alias is not None and aliases[ptr_alias.group(1)].startswith("blocked<spt=[1, 8]")


@despina.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PRECISION: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], tl.dot(a, b, input_precision=PRECISION))


@pytest.mark.parametrize(
    "dtype,precision,engine,instr",
    [
        ("bf16", "tf32", "mma.sync.m16n8k16", "m16n8k16.row.col.f32.bf16.bf16.f32"),
        ("fp32", "tf32", "mma.sync.m16n8k8", "m16n8k8.row.col.f32.tf32.tf32.f32"),
        ("fp32", "tf32x3", "mma.sync.m16n8k8", "m16n8k8.row.col.f32.tf32.tf32.f32"),
        ("int8", "tf32", "mma.sync.m16n8k32", "m16n8k32.row.col.s32.s8.s8.s32"),
    ],
)
def test_each_dtype_takes_its_instruction(dtype: str, precision: str, engine: str, instr: str) -> None:
    out = "i32" if dtype == "int8" else "fp32"
    k = _compile(dot_kernel, f"*{dtype}:16,*{dtype}:16,*{out}:16", {"BM": 32, "BN": 32, "BK": 32, "PRECISION": precision}, 4)
    assert f'engine = "{engine}"' in k.asm["gpuir"]
    ptx = k.asm["ptx"]
    assert f"mma.sync.aligned.{instr}" in ptx
    # 2x2 warps over 32x32: a warp's 16x16 is 1x2 instructions per K step (4 steps of k8 for tf32);
    # tf32x3 issues three (big*small, small*big, big*big).
    if dtype == "fp32":
        assert ptx.count("mma.sync") == (3 if precision == "tf32x3" else 1) * 1 * 2 * 4 and "cvt.rna.tf32.f32" in ptx


def test_ieee_fp32_and_small_tiles_stay_on_fma_and_say_why() -> None:
    k = _compile(dot_kernel, "*fp32:16,*fp32:16,*fp32:16", {"BM": 16, "BN": 16, "BK": 16, "PRECISION": "ieee"}, 4)
    assert 'engine = "fma: input_precision ieee' in k.asm["gpuir"] and "mma.sync" not in k.asm["ptx"]
    k = _compile(dot_kernel, "*fp16:16,*fp16:16,*fp32:16", {"BM": 16, "BN": 16, "BK": 8, "PRECISION": "tf32"}, 4)
    assert 'engine = "fma: tile 16x16x8 is below one m16n8k16 instruction' in k.asm["gpuir"]
