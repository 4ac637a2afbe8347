"""Software pipelining of tf32 and int8 dot operands (issue 8): the benchmark's tutorial matmuls for
sm_80 copy both operands by cp.async into the ring and read A with ldmatrix (an fp32 element or 4
int8 a 32-bit register) and B, whose N is contiguous, element by element; tf32 rounds each element
once, not once per mma that reads it; no spills at 128x128 and 128x256."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

import despina  # noqa: E402

from .loops import pipelined_loop  # noqa: E402
from .test_registers import KERNELS  # noqa: E402

STRIDES = ",i32:16,i32:16,i32:16,i32:16,i32:1,i32:16,i32:1,i32:16,i32:1"  # benchmarks/gpu_dot.py's
KINDS = {
    "tf32": (KERNELS.matmul_kernel, "*fp32:16,*fp32:16,*fp16:16", 32),
    "int8": (KERNELS.matmul_int8_kernel, "*i8:16,*i8:16,*i32:16", 64),
}


def _matmul(kind: str, bn: int = 128, target: str = "sm_80") -> Any:
    kernel, pointers, bk = KINDS[kind]
    consts = {"BLOCK_M": 128, "BLOCK_N": bn, "BLOCK_K": bk}
    return despina.compile(kernel, pointers + STRIDES, consts, num_warps=8, num_stages=3, target=target)


def _loop(ptx: str) -> Counter[str]:
    """The instructions of the loop body (from the wait for a stage to the branch back), by opcode."""
    body = pipelined_loop(ptx).splitlines()
    return Counter(line.split()[0] for line in body if line.strip() and not line.strip().startswith(("//", "{", ".")))


@pytest.fixture(scope="module", params=["tf32", "int8"])
def tutorial(request: pytest.FixtureRequest) -> tuple[str, Any]:
    return request.param, _matmul(request.param)


def test_both_operands_are_copied_by_cp_async(tutorial: tuple[str, Any]) -> None:
    kind, k = tutorial
    assert 'pipeline = "3 stages, 2 loads by cp.async' in k.asm["gpuir"]
    vec = 4 if kind == "tf32" else 16
    assert k.asm["gpuir"].count(f"16-byte copies into swizzled_shared<vec={vec}") == 2


def test_the_loop_reads_the_ring_and_multiplies(tutorial: tuple[str, Any]) -> None:
    kind, k = tutorial
    ops = _loop(k.asm["ptx"])
    # Per thread a stage is 16 KiB of A and of B (tf32), 8 KiB each (int8): 4 and 2 16-byte copies each.
    assert ops["cp.async.cg.shared.global"] == (8 if kind == "tf32" else 4)
    assert not ops["bar.sync"] and not ops["ld.global.v4.u32"] and not any(op.startswith("st.shared") for op in ops)
    # A warp's A is 64 rows of 32 fp32 or 64 int8: 16 or 8 ldmatrix.x4 of 512 bytes.
    assert ops["ldmatrix.sync.aligned.m8n8.x4.shared.b16"] == (16 if kind == "tf32" else 8)
    if kind == "tf32":  # a warp's B, 32 x 32 fp32: 32 elements a thread; 64 m16n8k8 over 4 k8 steps
        assert ops["ld.shared.b32"] == 32 and ops["mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"] == 64
        assert ops["cvt.rna.tf32.f32"] == 64 + 32  # each element of A and B rounded once
    else:  # a warp's B, 64 x 32 int8: 64 bytes a thread; 32 m16n8k32 over 2 k32 steps
        assert ops["ld.shared.b8"] == 64 and ops["mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"] == 32


@pytest.mark.parametrize("bn", [128, 256])
def test_element_reads_share_few_addresses(tutorial: tuple[str, Any], bn: int) -> None:
    """B's element reads add the stage's base to a few lane offsets (the swizzle's XOR constants,
    taken at entry) and carry the rest of each offset as the load's immediate: 18 to 27 integer adds
    a loop, not one per element (63 and 114 for int8, 37 and 58 for tf32, and 255 registers at int8
    128x256 before)."""
    kind, _ = tutorial
    ptx = _matmul(kind, bn).asm["ptx"]
    body = pipelined_loop(ptx)
    load = "ld.shared.b8" if kind == "int8" else "ld.shared.b32"
    bases = {line.split("[")[1].split("+")[0].rstrip("]") for line in body.splitlines() if load in line}
    assert len(bases) == (4 if kind == "int8" else 2)
    assert _loop(ptx)["add.s32"] <= 32


@pytest.mark.parametrize("kind", ["tf32", "int8"])
@pytest.mark.parametrize("bn", [128, 256])
@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_no_spills(kind: str, bn: int, target: str) -> None:
    k = _matmul(kind, bn, target)
    assert "cp.async.cg" in k.asm["ptx"] and ".local" not in k.asm["ptx"]
    assert k.metadata["registers"] <= 255 and k.metadata["spill_stores"] == 0
