"""Software pipelining on the CPU: which loops and loads the plan takes (and says why not in the
GPU IR), what the PTX of a pipelined loop holds, stages from the kernel or the loop, and the
shared-memory limit as a compile error."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

import despina  # noqa: E402
import despina.language as tl  # noqa: E402
from despina.compiler.backends.errors import BackendError  # noqa: E402

from .loops import pipelined_loop  # noqa: E402
from .test_registers import KERNELS  # noqa: E402

# The benchmark's strides and sizes as a launch with 4096x4096 tensors specializes them.
SIG = "*fp16:16,*fp16:16,*fp16:16,i32:16,i32:16,i32:16,i32:16,i32:1,i32:16,i32:1,i32:16,i32:1"


def _matmul(bn: int = 128, stages: int = 3, target: str = "sm_80", sig: str = SIG) -> Any:
    consts = {"BLOCK_M": 128, "BLOCK_N": bn, "BLOCK_K": 64}
    return despina.compile(KERNELS.matmul_kernel, sig, consts, num_warps=8, num_stages=stages, target=target)


_loop = pipelined_loop


@pytest.fixture(scope="module")
def tutorial() -> Any:
    return _matmul()


def test_the_plan_shows_in_the_gpu_ir(tutorial: Any) -> None:
    gpuir = tutorial.asm["gpuir"]
    assert 'pipeline = "3 stages, 2 loads by cp.async, ring of 98352 bytes, slots handed over by mbarriers"' in gpuir
    copies = re.findall(r'async_copy = "([^"]*)"', gpuir)
    assert copies == ["16-byte copies into swizzled_shared<vec=8, perPhase=1, maxPhase=8, order=[1, 0]>"] * 2
    assert tutorial.metadata["shared"] == 3 * (128 * 64 + 64 * 128) * 2 + 3 * 2 * 8  # and a full and an empty barrier a slot


def test_a_pipelined_loop_copies_ahead_and_reads_with_ldmatrix(tutorial: Any) -> None:
    ptx = tutorial.asm["ptx"]
    # Per thread a stage is 4 copies of A and 4 of B: the prologue issues two stages, the loop one.
    assert ptx.count("cp.async.cg.shared.global") == 3 * 8
    # Each stage's copies arrive on their slot's full barrier as they land; nothing waits for groups.
    assert ptx.count("cp.async.mbarrier.arrive.noinc.shared.b64") == 3 and "cp.async.commit_group" not in ptx
    assert ptx.count("mbarrier.init.shared.b64") == ptx.count("mbarrier.inval.shared.b64") == 2 * 3
    body = _loop(ptx)
    assert "ld.global" not in body and "st.shared" not in body  # operands never pass through registers
    # No CTA barrier: a wait for the slot read (full), an arrival when done, a wait for the slot written (empty).
    assert "bar.sync" not in body and body.count("mbarrier.test_wait.parity.shared.b64") == 2
    assert body.count("mbarrier.arrive.shared.b64") == 1
    assert body.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 16  # A: 4 m16 tiles x 4 k16 steps
    assert body.count("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") == 8  # B: 4 n8 tiles x 2 k32 pairs
    assert body.count("mma.sync.aligned.m16n8k16") == 64
    # The wait, then the reads and the mma; the arrival, the wait for the slot to write and the copies of
    # the next tiles only after the last mma.
    assert body.index("test_wait") < body.index("ldmatrix") and body.rindex("mma.sync") < body.index("mbarrier.arrive")
    assert body.index("mbarrier.arrive") < body.rindex("test_wait") < body.index("cp.async.cg")
    assert ".local" not in ptx and tutorial.metadata["spill_stores"] == 0


def test_num_stages_1_turns_it_off() -> None:
    k = _matmul(stages=1)
    assert 'pipeline = "none: num_stages=1"' in k.asm["gpuir"] and "cp.async" not in k.asm["ptx"]


def test_large_tiles_keep_one_k_step_of_operands_live() -> None:
    k = _matmul(bn=256, stages=3)
    assert k.metadata["spill_stores"] == 0 and k.metadata["shared"] == 3 * (128 * 64 + 64 * 256) * 2 + 3 * 2 * 8


def test_a_configuration_over_the_shared_memory_limit_is_a_clear_error() -> None:
    with pytest.raises(BackendError, match=r"needs 196672 bytes of shared memory .* num_stages=4; sm_80 allows "
                                               r"at most 166912 a block: use fewer num_stages or smaller blocks"):
        _matmul(bn=256, stages=4)
    assert _matmul(bn=256, stages=4, target="sm_90").metadata["shared"] == 196608 + 4 * 2 * 8


@despina.jit
def stages_kernel(a_ptr, b_ptr, c_ptr, K, OTHER: tl.constexpr, LOOP_STAGES: tl.constexpr):
    rm, rn, rk = tl.arange(0, 64), tl.arange(0, 64), tl.arange(0, 32)
    acc = tl.zeros((64, 64), tl.float32)
    for k in tl.range(0, K, 32, num_stages=LOOP_STAGES):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(k + rk)[None, :] < K, other=OTHER)
        b = tl.load(b_ptr + (k + rk)[:, None] * 64 + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * 64 + rn[None, :], acc)


def _stages(other: float, loop_stages: int | None, kernel_stages: int, k_sig: str = "i32:16") -> Any:
    return despina.compile(stages_kernel, f"*fp16:16,*fp16:16,*fp32:16,{k_sig}",
                           {"OTHER": other, "LOOP_STAGES": loop_stages}, num_warps=4, num_stages=kernel_stages,
                           target="sm_80")


def test_the_loop_s_num_stages_overrides_the_kernel_s() -> None:
    k = _stages(0.0, 4, 1)
    assert 'pipeline = "4 stages, 2 loads by cp.async' in k.asm["gpuir"]
    assert k.asm["ptx"].count("mbarrier.init.shared.b64") == 2 * 4  # 4 slots, a full and an empty barrier each


def test_loads_that_cannot_be_copied_say_why() -> None:
    k = _stages(1.0, None, 3)  # A's masked elements are 1.0, not the zeros cp.async fills in
    assert 'pipeline = "3 stages, 1 loads by cp.async' in k.asm["gpuir"]
    assert 'async_copy = "none: its `other` is not zero (cp.async fills masked elements with zeros)"' in k.asm["gpuir"]
    k = _stages(0.0, None, 3, "i32")  # K of unknown divisibility: A's rows are read 2 bytes at a time
    assert 'async_copy = "none: its accesses are 2 bytes (cp.async copies 4, 8 or 16 contiguous bytes)"' in k.asm["gpuir"]
    assert 'pipeline = "3 stages, 1 loads by cp.async' in k.asm["gpuir"]


@despina.jit
def no_dot_kernel(x_ptr, y_ptr, n):
    acc = tl.zeros((64, 64), tl.float32)
    for k in range(0, n):
        x = tl.load(x_ptr + k * 4096 + tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :])
        acc += x
    tl.store(y_ptr + tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :], acc)


def test_loops_without_a_dot_are_left_alone() -> None:
    k = despina.compile(no_dot_kernel, "*fp16:16,*fp32:16,i32", {}, num_warps=4, num_stages=3, target="sm_80")
    assert "pipeline" not in k.asm["gpuir"] and "cp.async" not in k.asm["ptx"]


@pytest.mark.parametrize("dtype", ["fp16", "fp8e4nv"])
def test_a_k_major_b_with_block_k_equal_to_block_m_is_pipelined(dtype: str) -> None:
    """One `tl.arange` for A's rows and both operands' K (BLOCK_K == BLOCK_M) tied A's and a K-major B's
    carried pointers to one layout: B was read a byte or two at a time, not pipelined, and the kernel
    spilled (255 registers, 76 bytes fp16 / 120 bytes fp8). Each loop's initial pointers now get their
    own address computation (gpuir/coalesce.py). Tutorial 03's strides are not known positive here (`:16`), so that its
    loads stay on cp.async (gpuir/pointer_tiles.py)."""
    sig = f"*{dtype}:16,*{dtype}:16,*fp16:16,i32:16,i32:16,i32:16,i32:16,i32:1,i32:1,i32:16,i32:16,i32:1"
    consts = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8}
    k = despina.compile(KERNELS.matmul_tuned_kernel.fn, sig, consts, num_warps=8, num_stages=3, target="sm_90a")
    copies = re.findall(r'async_copy = "([^"]*)"', k.asm["gpuir"])
    assert len(copies) == 2 and all(c.startswith("16-byte copies into") for c in copies)
    assert k.metadata["spill_stores"] == 0 and k.metadata["registers"] < 200


@despina.jit
def matmul_bt(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = (tl.program_id(0) * BM + tl.arange(0, BM)) % M  # K, the rows' stride, not known positive: cp.async, not TMA
    rn = (tl.program_id(1) * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + rn[:, None] * K + (k + rk)[None, :])  # B^T, [N, K], read transposed by the dot
        acc = tl.dot(a, b.T, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_a_load_the_dot_reads_through_trans_is_pipelined(target: str) -> None:
    """`tl.dot(a, b.T)`: B^T's tile is copied as it lies ([N, K], K contiguous) into a slot the dot reads as
    [K, N], K-major (ldmatrix without .trans on mma.sync, a K-major descriptor on wgmma). Before, only A was
    pipelined ("its tile has other users than one dot operand conversion")."""
    k = despina.compile(matmul_bt, "*fp16:16,*fp16:16,*fp32:16,i32:16,i32:16,i32:16", {"BM": 128, "BN": 128, "BK": 64},
                        num_warps=8, num_stages=3, target=target)
    gpuir = k.asm["gpuir"]
    assert "3 stages, 2 loads by cp.async" in gpuir
    assert gpuir.count("16-byte copies into swizzled_shared<vec=8, perPhase=1, maxPhase=8, order=[0, 1]") == 1
    assert k.metadata["spill_stores"] == 0


@despina.jit
def stepped_persistent(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                       PROGRAMS: tl.constexpr):
    """A persistent matmul through pointers, its tile loop flattened, its K loop stepping its pointers."""
    tiles_n = tl.cdiv(N, BN)
    for tile in tl.range(tl.program_id(0), tl.cdiv(M, BM) * tiles_n, PROGRAMS, flatten=True):
        rm = tile // tiles_n * BM + tl.arange(0, BM)
        rn = tile % tiles_n * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        a_ptrs = a_ptr + rm[:, None] * K + rk[None, :]
        b_ptrs = b_ptr + rk[:, None] * N + rn[None, :]
        acc = tl.zeros((BM, BN), tl.float32)
        for _k in range(0, K, BK):
            acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
            a_ptrs += BK
            b_ptrs += BK * N
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


@pytest.mark.parametrize(("target", "handoff"), [("sm_90a", "wgmma waits with 1 group in flight"),
                                                 ("sm_80", "slots handed over by mbarriers")])
def test_a_flattened_loop_that_steps_its_pointers_is_pipelined(target: str, handoff: str) -> None:
    """The pointers go to the next iteration beside the epilogue's `if` (passes/flatten.py); through it, their
    loads' ahead slice held the epilogue, and the fused loop was not pipelined at all."""
    k = despina.compile(stepped_persistent, "*fp16:16,*fp16:16,*fp16:16,i32:16,i32:16,i32:16",
                        {"BM": 128, "BN": 128, "BK": 64, "PROGRAMS": 132}, num_warps=8, num_stages=3, target=target)
    fused = next(line for line in k.asm["gpuir"].splitlines() if 'flattened = "yes' in line)
    assert "3 stages, 2 loads by cp.async" in fused and handoff in fused
    assert k.metadata["spill_stores"] == 0 and not k.metadata["ptxas_warnings"]
