"""wgmma on CPU: tutorial 03's matmul (benchmarks/kernels.py's `matmul_tuned_kernel`, whose strides this
signature leaves unknown to be positive, so that its loads stay on cp.async: `gpuir/pointer_tiles.py`) for sm_90a multiplies on
`wgmma.mma_async` from 128-byte-swizzled shared memory, asynchronously in its pipelined loop, and
links to a cubin with nvJitLink; plain sm_90 and the dots wgmma does not take stay on mma.sync and
the GPU IR says why; a wgmma plan lowered for plain sm_90 is a clear error, not an LLVM abort."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

import despina  # noqa: E402
import despina.language as tl  # noqa: E402
from despina.compiler.backends.gpuir import assign_layouts  # noqa: E402
from despina.compiler.backends.gpuir.pipeline import plan_pipelines  # noqa: E402
from despina.compiler.backends.nvptx.lower import lower  # noqa: E402
from despina.compiler.backends.nvptx.target import get_target  # noqa: E402
from despina.compiler.ir.parser import parse_module  # noqa: E402

from .loops import pipelined_loop  # noqa: E402
from .test_registers import KERNELS  # noqa: E402

SIG = "*{t}:16,*{t}:16,*{t}:16,i32:16,i32:16,i32:16,i32:16,i32:1,i32:16,i32:1,i32:16,i32:1"


def _matmul(bn: int, target: str = "sm_90a", dtype: str = "fp16", stages: int = 3, bm: int = 128, warps: int = 8) -> Any:
    consts = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": 64, "GROUP_M": 8}
    return despina.compile(KERNELS.matmul_tuned_kernel.fn, SIG.format(t=dtype), consts, num_warps=warps,
                           num_stages=stages, target=target)


def _dot_line(kernel: Any) -> str:
    (dot,) = [line for line in kernel.asm["gpuir"].splitlines() if " dot(" in line]
    return dot


@pytest.mark.parametrize("bn", [128, 256])
def test_tutorial_matmul_runs_on_wgmma(bn: int) -> None:
    k = _matmul(bn)
    ptx = k.asm["ptx"]
    # 8 warps = 2 warpgroups along M, each one m64n{bn}k16 per K step of 16: 4 in the loop body.
    assert ptx.count(f"wgmma.mma_async.sync.aligned.m64n{bn}k16.f32.f16.f16") == 4
    assert re.search(r"\}, %rd\d+, %rd\d+, p, 1, 1, 0, 1;", ptx)  # A K-major, B N-major (transposed)
    assert "mma.sync" not in ptx and "ldmatrix" not in ptx and "fma.rn.f32" not in ptx
    body = ptx[ptx.index("cp.async.wait_group \t1;") : ptx.index("cp.async.wait_group \t0;")]
    # No proxy fence (a MEMBAR.ALL.CTA every iteration) after the copies' wait, as in Triton's loop.
    assert "fence.proxy.async" not in body
    # The warp index from lane 0: ptxas builds the descriptors in uniform registers.
    assert re.search(r"shfl\.sync\.idx\.b32\s+%r\d+, %r\d+, 0, 31, -1;", ptx)
    assert body.index("wgmma.fence.sync.aligned") < body.index("wgmma.commit_group.sync.aligned")
    assert "wgmma.wait_group.sync.aligned 1;" in body  # the previous group overlaps
    assert "wgmma.wait_group.sync.aligned 0;" in ptx[ptx.index("cp.async.wait_group \t0;") :]
    assert ".extern .shared .align 1024 .b8 global_smem[];" in ptx
    assert k.metadata["spill_stores"] == 0 and ".local" not in ptx
    assert k.cubin[:4] == b"\x7fELF"  # linked by nvJitLink
    # 128x128: 3 slots of A's and B's tiles (96 KiB: two blocks an SM), the copies after a second
    # barrier; 128x256: a spare 4th slot for the group in flight (one block an SM either way).
    slots, barriers = (3, 2) if bn == 128 else (4, 1)
    assert k.metadata["shared"] == slots * (128 * 64 + 64 * bn) * 2
    assert body.count("bar.sync") == barriers
    # The epilogue's accumulator rows go through shared memory 16 bytes longer than the tile's
    # (row 8 of a warp's stores at 8 * (2 * bn + 16) bytes): the 8 rows a store writes, apart in banks.
    assert re.search(rf"st\.shared\.b32 \t\[%r\d+\+{8 * (2 * bn + 16)}\]", ptx)


def test_gpu_ir_shows_the_wgmma_plan() -> None:
    k = _matmul(256)
    gpuir = k.asm["gpuir"]
    aliases = dict(re.findall(r"^(#L\d+) = (.*)$", gpuir, re.M))
    dot = _dot_line(k)
    assert 'engine = "wgmma.m64n256k16"' in dot
    assert aliases[dot.rsplit(" ", 1)[1]] == "mma<v3, warps=[8, 1], instr=[16, 256]>"
    assert "in 4 slots, wgmma waits with 1 group in flight\"" in gpuir
    assert "in 3 slots, wgmma waits with 1 group in flight, copies after a second barrier" in _matmul(128).asm["gpuir"]
    assert "swizzled_shared<vec=8, perPhase=1, maxPhase=8, order=[1, 0], block=64>" in gpuir  # B in atoms


def test_bf16_and_one_warpgroup() -> None:
    k = _matmul(128, dtype="bf16", warps=4)
    ptx = k.asm["ptx"]
    # 4 warps = 1 warpgroup over 128 rows: two instructions (M 0 and 64) per K step.
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16") == 8
    assert 'mma<v3, warps=[4, 1], instr=[16, 128]>' in k.asm["gpuir"]


def test_unpipelined_operands_are_stored_into_atoms_first() -> None:
    k = _matmul(128, stages=1)
    ptx = k.asm["ptx"]
    assert ptx.count("wgmma.mma_async") == 4 and "cp.async" not in ptx
    assert "wgmma.wait_group.sync.aligned 1;" not in ptx and "wgmma.wait_group.sync.aligned 0;" in ptx
    assert "fence.proxy.async.shared::cta;" in ptx  # the stores, then the async proxy's reads


def test_plain_sm_90_and_small_tiles_stay_on_mma_sync() -> None:
    assert _dot_line(_matmul(128, target="sm_90")).count('engine = "mma.sync.m16n8k16"') == 1
    small = _matmul(64, bm=32, warps=4)
    assert 'engine = "mma.sync.m16n8k16 (not wgmma: BLOCK_M=32 is not a multiple of 64' in _dot_line(small)
    assert "wgmma" not in small.asm["ptx"]


@despina.jit
def fp16_acc_kernel(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    c = tl.dot(a, b, out_dtype=tl.float16)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], c)


def test_fp16_accumulators_stay_on_mma_sync_and_say_why() -> None:
    k = despina.compile(fp16_acc_kernel, "*fp16:16,*fp16:16,*fp16:16", {"BM": 64, "BN": 64, "BK": 64}, target="sm_90a")
    assert "(not wgmma: wgmma takes fp16, bf16 and fp8 into fp32 here, not fp16 into fp16)" in _dot_line(k)


def test_a_wgmma_plan_lowered_for_plain_sm_90_is_a_clear_error() -> None:
    module = parse_module(_matmul(128).asm["ir"])
    gpu = assign_layouts(module, 8, True)  # planned as for sm_90a
    plan_pipelines(gpu, 3)
    with pytest.raises(Exception, match=r"op 'dot': wgmma \(llvm\.nvvm\.wgmma\.\S+\) needs sm_90a .* compiled for sm_90:"):
        lower(gpu, get_target("sm_90"))


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("bn", [128, 256])
def test_tutorial_matmul_links_without_serialized_wgmma(dtype: str, bn: int) -> None:
    """ptxas (through nvJitLink's info log) finds no reason to serialize the wgmmas (C7514 and the
    other C75xx). The bf16 kernel stores `acc.to(tl.float16)` to bf16: it rounded each accumulator
    register by a scalar `cvt.rn.f16.f32`, which ptxas counts as a read inside the wgmma pipeline
    even after `wait_group 0`; accumulators are now rounded in pairs."""
    k = _matmul(bn, dtype=dtype)
    assert not [w for w in k.metadata["ptxas_warnings"] if "(C75" in w], k.metadata["ptxas_warnings"]
    ptx = k.asm["ptx"]
    assert not re.search(r"cvt\.rn\.b?f16\.f32", ptx)  # no scalar rounding of an accumulator register
    acc_regs = 128 * bn // 256  # the 128 x bn accumulator over 256 threads
    assert len(re.findall(r"cvt\.rn\.f16x2\.f32 %r\d+, %r\d+, %r\d+;", ptx)) == acc_regs // 2


def test_a_zero_started_accumulator_is_zeroed_by_scale_d() -> None:
    """`acc = tl.zeros(...)` then `acc = tl.dot(a, b, acc)` in the loop: no register is zeroed
    before the loop; the first K step's scale-d is false on the first iteration only (the others
    add); where the loop ran no iteration (K = 0), the result is selected to zero after it."""
    ptx = _matmul(128).asm["ptx"]
    assert not re.search(r"mov\.(b32|f32)\s+%r\d+, 0f00000000;", ptx)
    scales = re.findall(r"setp\.ne\.b32 p, (%r\d+), 0;", ptx)
    assert len(scales) == 4 and scales[0] != scales[1] and len(set(scales[1:])) == 1
    assert re.search(rf"selp\.b32\s+{re.escape(scales[0])}, 1, 0, %p\d+;", ptx)  # iv != lo
    assert re.search(rf"mov\.b32\s+{re.escape(scales[1])}, 1;", ptx)
    after = ptx[ptx.index("wgmma.wait_group.sync.aligned 0;") :]
    assert len(re.findall(r"selp\.f32\s+%r\d+, 0f00000000, %r\d+, %p\d+;", after)) == 128 * 128 // 256


@despina.jit
def lone_dot(a_ptr, b_ptr, c_ptr, BM: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, 128), tl.arange(0, 64)
    a = tl.load(a_ptr + rm[:, None] * 64 + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * 128 + rn[None, :])
    tl.store(c_ptr + rm[:, None] * 128 + rn[None, :], tl.dot(a, b))


@pytest.mark.parametrize(("bm", "warps"), [(128, 4), (128, 8), (64, 4)])
def test_a_zero_accumulator_outside_a_loop_is_ignored_by_scale_d(bm: int, warps: int) -> None:
    """`tl.dot(a, b)` outside a loop: the first K step takes scale-d 0 and no register is zeroed (there
    were 64 moves a tile, which ptxas interleaved with the first tile's product and waited for: C7517)."""
    k = despina.compile(lone_dot, "*fp16:16,*fp16:16,*fp32:16", {"BM": bm}, num_warps=warps, target="sm_90a")
    ptx = k.asm["ptx"]
    assert "wgmma.mma_async" in ptx and k.metadata["ptxas_warnings"] == []
    assert ptx.count("mov.b32") < 8
    (zero,) = re.findall(r"mov\.b32\s+(%r\d+), 0;", ptx)
    scales = re.findall(r"setp\.ne\.b32 p, (%r\d+), 0;", ptx)
    tiles = bm // 64 // (warps // 4)  # m64 tiles a warpgroup; K = 64 is four k16 steps, the first ignores C
    assert len(scales) == 4 * tiles and scales.count(zero) == tiles


@despina.jit
def masked_scores(q_ptr, k_ptr, v_ptr, mask_ptr, out_ptr, N, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    rows, cols, dims = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, D)
    q = tl.load(q_ptr + rows[:, None] * D + dims[None, :])
    acc = tl.zeros([BM, D], dtype=tl.float32)
    for start in range(0, N, BN):
        k = tl.load(k_ptr + (start + cols)[None, :] * D + dims[:, None])
        keep = tl.load(mask_ptr + rows[:, None] * N + (start + cols)[None, :])
        s = tl.where(keep != 0, tl.dot(q, k), 0.0)
        v = tl.load(v_ptr + (start + cols)[:, None] * D + dims[None, :])
        acc += tl.dot(s.to(tl.float16), v)
    tl.store(out_ptr + rows[:, None] * D + dims[None, :], acc)


def test_p_stays_in_registers_when_the_scores_are_converted_before_the_second_dot() -> None:
    """The scores select with a loaded mask (in the load's blocked layout), so layout assignment converts the
    first dot's result before the second dot is planned: the path from one dot to the other is found before
    assignment inserts that conversion, and the second dot still takes P from registers."""
    k = despina.compile(masked_scores, "*fp16:16,*fp16:16,*fp16:16,*i8:16,*fp32:16,i32:16",
                        {"D": 64, "BM": 128, "BN": 64}, num_warps=8, num_stages=3, target="sm_90a")
    dots = [line for line in k.asm["gpuir"].splitlines() if " dot(" in line]
    assert len(dots) == 2 and "A in registers" in dots[1], dots


@pytest.mark.parametrize(("bn", "stages"), [(128, 4), (256, 3)])
def test_a_tile_s_descriptor_is_its_buffer_s_plus_an_offset(bn: int, stages: int) -> None:
    """In the loop, each operand's slot gets one masked start address (the warpgroup's tile's, in 16-byte
    units), and each of the 4 K steps' descriptors is that plus the layout's fixed fields and the step's offset,
    one constant (LLVM ors it where the bits are free). Before, every instruction masked its own address into
    the field, or added a K step's offset computed with the warpgroup's origin (a register each): 127 SASS
    instructions a 128x128x64 iteration, 100 now (Triton's 97)."""
    k = _matmul(bn, stages=stages)
    body = pipelined_loop(k.asm["ptx"])
    assert len(re.findall(r"wgmma\.mma_async", body)) == 4  # a warpgroup's m64n{bn}k16 a K step
    # The descriptors: a start address or'd or added with a constant that holds the fixed fields (bit 62 up).
    made = [(src, int(c)) for src, c in re.findall(r"(?:or\.b64|add\.s64)\s+%rd\d+, (%rd\d+), (\d+);", body)
            if int(c) >= 1 << 62]
    assert len(made) == 8 and len({src for src, _ in made}) == 2, made  # A's 4 and B's 4, from one start each


@pytest.mark.parametrize("target", ["sm_90a", "sm_90"])
def test_a_load_s_copies_into_a_slot_share_one_address_register(target: str) -> None:
    """The 128x128x64 loop's 8 cp.async a thread: A's 4 and B's 4 each address the slot as one register plus
    immediates (the lane's base, taken at entry, and the slot's; `ldmatrix.lane_address`). Each copy had its
    own register before: 127 registers at 4 stages on sm_90a (118 now), 182 on sm_90 (164)."""
    k = _matmul(128, target=target, stages=4)
    body = pipelined_loop(k.asm["ptx"])
    bases = re.findall(r"cp\.async\.cg\.shared\.global \[(%r\d+)(?:\+\d+)?\]", body)
    assert len(bases) == 8 and len(set(bases)) == 2, bases
    assert k.metadata["spill_stores"] == 0
