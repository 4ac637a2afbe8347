"""TMA's copies on the CPU: which descriptor loads it copies (and why not, in the GPU IR), the shared layout it
lands a block in against the hardware's swizzle formula, what the PTX of a TMA loop holds (the tensor-map
parameters, `cp.async.bulk.tensor`, the mbarrier waits, no cp.async, where the copies go in the iteration), the
metadata a launch encodes the maps from, the copy outside a pipeline, attention and the flattened persistent
loop, and targets without TMA. Stores are in `test_tma_store.py`."""

from __future__ import annotations

import re
from typing import Any

import benchmark_kernels
import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

import numpy as np  # noqa: E402

import despina  # noqa: E402
import despina.language as tl  # noqa: E402
from despina.compiler.backends.gpuir.tma import shared_layout  # noqa: E402
from despina.runtime import kernels  # noqa: E402
from despina.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

from .loops import loop_with, loops  # noqa: E402


@despina.jit
def desc_matmul(a_ptr, b_ptr, c_ptr, M, N, K, s_a, s_b, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                B_NK: tl.constexpr, LOOP_STAGES: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[s_a, 1], block_shape=[BM, BK])
    if B_NK:
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[s_b, 1], block_shape=[BN, BK])
    else:
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[s_b, 1], block_shape=[BK, BN])
    acc = tl.zeros((BM, BN), tl.float32)
    for k in tl.range(0, K, BK, num_stages=LOOP_STAGES):
        a = a_desc.load([pid_m * BM, k])
        if B_NK:
            b = tl.trans(b_desc.load([pid_n * BN, k]))
        else:
            b = b_desc.load([k, pid_n * BN])
        acc = tl.dot(a, b, acc)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@despina.jit
def desc_copy(x_ptr, out_ptr, R, C, BR: tl.constexpr, BC: tl.constexpr):
    desc = tl.make_tensor_descriptor(x_ptr, shape=[R, C], strides=[C, 1], block_shape=[BR, BC])
    tile = desc.load([tl.program_id(0) * BR, 0])
    rows, cols = tl.arange(0, BR), tl.arange(0, BC)
    tl.store(out_ptr + rows[:, None] * BC + cols[None, :], tile)


SIG = "*{t}:16,*{t}:16,*fp32:16,i32,i32,i32:16,i32:16,i32:16"


def compile_matmul(dtype: str = "fp16", block: tuple[int, int, int] = (128, 128, 64), b_nk: bool = False,
                   stages: int = 3, loop_stages: int | None = None, target: str = "sm_90a",
                   sig: str = SIG, warps: int = 8) -> Any:
    bm, bn, bk = block
    consts = {"BM": bm, "BN": bn, "BK": bk, "B_NK": b_nk, "LOOP_STAGES": loop_stages}
    return despina.compile(desc_matmul, sig.format(t=dtype), consts, num_warps=warps, num_stages=stages, target=target)


def tma_attrs(kernel: Any) -> list[str]:
    return re.findall(r"descriptor_load\(.*?tma = (\d+|\"[^\"]*\")", kernel.asm["gpuir"]) + \
        re.findall(r" load\(.*?tma = (\"[^\"]*\")", kernel.asm["gpuir"])


@pytest.fixture(scope="module")
def tutorial() -> Any:
    return compile_matmul()


def test_the_loop_copies_both_operands_by_tma(tutorial: Any) -> None:
    gpuir = tutorial.asm["gpuir"]
    assert "3 stages, 2 loads by TMA, ring of 98328 bytes" in gpuir
    assert "named" not in gpuir  # one dot a loop: CTA barriers (gpuir/pipeline.py)
    assert tma_attrs(tutorial) == ["0", "1"]
    assert gpuir.count("TMA copies of 16384 bytes into swizzled_shared<vec=8, perPhase=1, maxPhase=8, order=[1, 0], "
                       "block=64>") == 2


def test_the_ptx_takes_the_maps_and_copies_with_tma(tutorial: Any) -> None:
    ptx = tutorial.asm["ptx"]
    assert len(re.findall(r"\.param \.align 64 \.b8 desc_matmul_param_\d+\[128\]", ptx)) == 2
    assert "cp.async.cg" not in ptx and "cp.async.ca" not in ptx and "cp.async.wait_group" not in ptx
    body = loop_with(ptx, "wgmma.mma_async")
    # Each iteration: wait for the slot's copies, a CTA barrier, the dots, then (no spare slot) a second CTA
    # barrier once every warpgroup's wait has retired the previous group, and one thread's copies of two atoms
    # (B: 64 x 128 is two 64-column boxes) and one of A, after one expect_tx on the slot's full barrier.
    assert body.count("mbarrier.try_wait.parity") == 1
    assert body.count("bar.sync") == 2 and "barrier.cta.arrive" not in body
    assert body.count("mbarrier.arrive.expect_tx") == 1
    assert body.count("cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes") == 3
    assert body.count("wgmma.mma_async") == 4  # a warpgroup's 64 x 128 rows: m64n128k16 over K = 64


def test_the_metadata_names_what_a_launch_encodes(tutorial: Any) -> None:
    # (a_ptr, b_ptr, c_ptr, M, N, K, s_a, s_b): arguments 0..7
    assert tutorial.metadata["tensor_maps"] == [
        {"dtype": "fp16", "base": {"arg": 0}, "shape": [{"arg": 3}, {"arg": 5}], "strides": [{"arg": 6}],
         "box": [128, 64], "swizzle": 128, "fill": "zero"},
        {"dtype": "fp16", "base": {"arg": 1}, "shape": [{"arg": 5}, {"arg": 4}], "strides": [{"arg": 7}],
         "box": [64, 64], "swizzle": 128, "fill": "zero"},
    ]


@pytest.mark.parametrize("dtype,block,b_nk,warps,swizzles", [
    ("bf16", (128, 256, 64), False, 8, [128, 128]),
    ("fp16", (64, 128, 32), True, 4, [64, 64]),
    ("fp16", (64, 64, 16), True, 4, [32, 32]),
    ("fp8e4nv", (128, 128, 128), True, 8, [128, 128]),
])
def test_blocks_of_each_swizzle_and_element_size(dtype: str, block: tuple[int, int, int], b_nk: bool, warps: int,
                                                 swizzles: list[int]) -> None:
    k = compile_matmul(dtype, block, b_nk, warps=warps)
    assert "2 loads by TMA" in k.asm["gpuir"]
    assert [m["swizzle"] for m in k.metadata["tensor_maps"]] == swizzles
    assert k.metadata["spill_stores"] == 0


@pytest.mark.parametrize("sig,reason", [
    ("*fp16:16,*fp16,*fp32:16,i32,i32,i32:16,i32:16,i32:16", "its base is not known to be 16-byte aligned"),
    ("*fp16:16,*fp16:16,*fp32:16,i32,i32,i32:16,i32:16,i32", "its strides are not known to be multiples of 16 bytes"),
])
def test_what_the_specialization_does_not_prove_is_a_masked_load(sig: str, reason: str) -> None:
    k = compile_matmul(sig=sig)
    assert tma_attrs(k) == ["0", f'"none: {reason}"']
    assert "3 stages, 1 loads by TMA" in k.asm["gpuir"]  # B's masked load has 2-byte accesses (N is not :16)
    assert len(k.metadata["tensor_maps"]) == 1


def test_tf32_dots_take_mma_sync_and_keep_their_cp_async_pipeline() -> None:
    k = compile_matmul("fp32", (128, 64, 32), False, warps=4, sig="*{t}:16,*{t}:16,*fp32:16,i32,i32:16,i32:16,i32:16,i32:16")
    assert tma_attrs(k) == ['"none: it does not feed a wgmma dot in a loop"'] * 2
    assert "2 loads by cp.async" in k.asm["gpuir"] and "tensor_maps" not in k.metadata


def test_a_block_that_feeds_no_dot_is_a_masked_load() -> None:
    k = despina.compile(desc_copy, "*fp16:16,*fp16:16,i32,i32:16", {"BR": 64, "BC": 64}, num_warps=4, target="sm_90a")
    assert tma_attrs(k) == ['"none: it does not feed a wgmma dot in a loop"']
    assert "tensor_maps" not in k.metadata and "cp.async.bulk.tensor" not in k.asm["ptx"]


def test_targets_without_wgmma_expand_every_descriptor_load() -> None:
    for target in ("sm_90", "sm_80"):
        k = compile_matmul(target=target, sig="*{t}:16,*{t}:16,*fp32:16,i32,i32:16,i32:16,i32:16,i32:16")
        assert "descriptor_load" not in k.asm["gpuir"] and "2 loads by cp.async" in k.asm["gpuir"]
        assert "tensor_maps" not in k.metadata and "cp.async.bulk.tensor" not in k.asm["ptx"]


def test_an_unpipelined_loop_copies_then_reads_into_registers() -> None:
    k = compile_matmul(loop_stages=1)
    assert 'pipeline = "none: num_stages=1"' in k.asm["gpuir"]
    ptx = k.asm["ptx"]
    assert ptx.count("cp.async.bulk.tensor") == 3 and ptx.count("mbarrier.inval") == 2
    assert "ld.shared.v4" in ptx  # the block read back in 16-byte vectors through the swizzle


def test_the_loop_ends_with_its_barriers_invalidated(tutorial: Any) -> None:
    ptx = tutorial.asm["ptx"]
    assert ptx.count("mbarrier.init.shared.b64") == 3 and ptx.count("mbarrier.inval.shared.b64") == 3
    assert "fence.proxy.async.shared::cta" in ptx[: ptx.index("cp.async.bulk.tensor")]


@pytest.mark.parametrize("block,itemsize,swizzle", [((64, 64), 2, 128), ((8, 32), 2, 64), ((16, 16), 2, 32),
                                                   ((32, 128), 1, 128), ((8, 32), 4, 128), ((16, 128), 2, 128)])
def test_the_landing_layout_is_the_hardware_swizzle(block: tuple[int, int], itemsize: int, swizzle: int) -> None:
    """TMA writes a box of `swizzle`-byte rows with the 16-byte chunks of each address xor'ed by its bits
    from 7 on (byte bits [4, 4 + log2(W/16)) ^= [7, ...), W the swizzle's bytes), atom after atom: the
    layout the loop's slots and the copy outside a pipeline read through."""
    rows, width = block
    inv = shared_layout(block, itemsize).linear(block).invert()
    atom_cols = swizzle // itemsize
    for r in range(rows):
        for col in range(width):
            atom, c = divmod(col, atom_cols)
            plain = r * swizzle + c * itemsize
            want = atom * rows * swizzle + (plain ^ (((plain >> 7) % (swizzle // 16)) << 4))
            assert inv.apply(dim0=r, dim1=col)[0] * itemsize == want, (r, col)


def attention_tma(head_dim: int, causal: bool, tmp_path: Any, ws: bool = False, block_n: int = 64) -> Any:
    """benchmarks/kernels.py's attention_tma_kernel for sm_90a, as a launch on host descriptors of (2 * 256,
    head_dim) tensors specializes it (128 x `block_n` blocks, 8 warps, 3 stages)."""
    kernel = benchmark_kernels.load(tmp_path).attention_tma_kernel
    n_ctx = 256
    qkv = np.zeros((2 * n_ctx, head_dim), np.float16)
    descs = [TensorDescriptor.from_tensor(qkv, [rows, head_dim]) for rows in (128, block_n, block_n, 128)]
    options = kernel.options({"num_warps": 8, "num_stages": 3}, interpret=False)
    consts = {"HEAD_DIM": head_dim, "BLOCK_M": 128, "BLOCK_N": block_n, "CAUSAL": causal, "WARP_SPECIALIZE": ws}
    bound = kernel.bind((*descs, 0.125, n_ctx), consts)
    return kernels.local(kernel.ir(kernel.specialize(bound, options), options), options, "sm_90a")[0]


@pytest.mark.parametrize("causal", [False, True])
def test_attention_through_descriptors_keeps_the_scores_in_the_mma_layout(causal: bool, tmp_path: Any) -> None:
    """Q (loaded once: a masked load), K and V (TMA) and O through descriptors. Q's column index is the
    `tl.arange(0, 64)` of the causal mask's columns too: the mask, and the scores it selects, stay in the MMA
    layout (each access has its own copy of the cast of its indices to int64), and P passes to the second dot in
    registers, whose group stays in flight. Not warp-specialized, the loop is not deferred (gpuir/defer.py)."""
    k = attention_tma(64, causal, tmp_path)
    gpuir = k.asm["gpuir"]
    loop = gpuir[gpuir.index("= for(") : gpuir.index("\n  ) :", gpuir.index("= for("))]
    assert "2 loads by TMA" in loop and "wgmma waits with 1 group in flight" in loop
    assert "slots given back on named barriers" in loop and "bar.sync" not in loop_with(k.asm["ptx"], "wgmma.mma")
    assert "A in registers" in loop
    assert 'deferred = "no: the loop is not warp-specialized' in loop
    assert not re.search(r"convert_layout\(.*xfp32>", loop)
    assert k.metadata["spill_stores"] == 0


@pytest.mark.parametrize("causal", [False, True])
def test_beside_a_second_cta_p_v_is_waited_for_where_issued(causal: bool, tmp_path: Any) -> None:
    """At d64 with 128x128 blocks the kernel fits two CTAs an SM in 128 registers (`.minnctapersm 2`), and is
    linked so with P V waited for where it is issued (nvptx/occupancy.py): in flight into the next iteration,
    P's and O's registers beside the next S took the whole budget, and ptxas serialized every wgmma (C7511,
    nvJitLink 13.5 here, some runs of 13.0 on an H100), which ran 2-4% slower there."""
    k = attention_tma(64, causal, tmp_path, block_n=128)
    gpuir, ptx = k.asm["gpuir"], k.asm["ptx"]
    assert ".minnctapersm 2" in ptx and k.metadata["registers"] <= 128
    loop = gpuir[gpuir.index("= for(") : gpuir.index("\n  ) :", gpuir.index("= for("))]
    assert "2 loads by TMA" in loop and "group in flight" not in loop
    assert re.findall(r'engine = "([^"]*)".*in_flight = "([^"]*)"', loop) == [
        ("wgmma.m64n64k16, A in registers", "no: waited where issued, the kernel sharing the SM with another CTA")]
    assert set(re.findall(r"wgmma\.wait_group\.sync\.aligned (\d);", loop_with(ptx, "wgmma.mma_async"))) == {"0"}
    assert k.metadata["ptxas_warnings"] == [] and k.metadata["spill_stores"] == 0


@pytest.mark.parametrize("block_n", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_the_row_maximum_reads_the_scores_unscaled(causal: bool, block_n: int, tmp_path: Any) -> None:
    """sm_scale > 0 specializes the launch (`positive`), and the softmax's maximum of Q K^T * qk_scale (masked with
    -inf) is taken of Q K^T and scaled once a row (passes/scales.py). Each score's scale then rides in the FMA
    of its exponent's argument: the loop multiplies only O by alpha (32 a thread) and the two row maxima of a
    thread, where it multiplied every score as well."""
    k = attention_tma(64, causal, tmp_path, block_n=block_n)
    loop = loop_with(k.asm["ptx"], "wgmma.mma_async")
    assert "positive = [16, 17]" in k.asm["ir"].splitlines()[0]  # sm_scale > 0; N_CTX a positive multiple of 16
    assert loop.count("mul.f32") == 32 + 2
    assert loop.count("fma.rn.f32") >= block_n // 2 and loop.count("ex2.approx") >= block_n // 2


@pytest.mark.parametrize("head_dim", [64, 128])
def test_specialized_attention_defers_p_v_and_waits_for_s_then_for_p_v(head_dim: int, tmp_path: Any) -> None:
    """Warp-specialized, the loop commits S and the previous iteration's P V before it waits for either (gpuir/
    defer.py), waits for S first (`wait_group 1`) and for P V before the softmax rescales the accumulator, and
    gives the slot back then (every group that read it retired): no barrier among the consumers, no serialized
    wgmma, no spill."""
    k = attention_tma(head_dim, True, tmp_path, ws=True)
    gpuir, ptx = k.asm["gpuir"], k.asm["ptx"]
    assert 'deferred = "yes: its second product runs in the next iteration, beside the first"' in gpuir
    assert 'warp_specialized = "yes' in gpuir
    assert re.findall(r'engine = "([^"]*)"', gpuir) == [  # S, the deferred P V, the last P V after the loop
        "wgmma.m64n64k16", *[f"wgmma.m64n{head_dim}k16, A in registers"] * 2]
    loop = loop_with(ptx, "wgmma.mma_async")
    steps = re.findall(r"wgmma\.(commit_group|wait_group)\.sync\.aligned( \d)?;", loop)
    assert steps == [("commit_group", ""), ("commit_group", ""), ("wait_group", " 1"), ("wait_group", " 0")]
    softmax = loop[loop.index("wait_group.sync.aligned 1") : loop.index("wait_group.sync.aligned 0")]
    assert "ex2.approx" in softmax and "shfl.sync" in softmax  # the softmax runs while P V does
    assert "bar.sync" not in loop and "mbarrier.arrive" in loop[loop.index("wait_group.sync.aligned 0") :]
    assert k.metadata["ptxas_warnings"] == [] and k.metadata["spill_stores"] == 0


@pytest.mark.parametrize("causal", [False, True])
def test_the_producer_copies_the_last_v_into_the_ring_after_the_loop(causal: bool, tmp_path: Any) -> None:
    """The last P V after the deferred loop reads V's last tile from the ring slot after the loop's last, which the
    producer fills once its loop is done (lower/specialize.py), not by a copy the consumers would issue and wait
    for after the loop, with a barrier of its own: in the PTX, the only mbarriers are the ring's full and empty
    ones, set up at the entry and invalidated once the `if` that reads the slot is done. Before, the consumers'
    copy took an eighth barrier, and cost d64 causal 4.5% (H100)."""
    k = attention_tma(64, causal, tmp_path, ws=True)
    gpuir, ptx = k.asm["gpuir"], k.asm["ptx"]
    assert re.findall(r'descriptor_load\(.*async_copy = "([^"]*)".*deferred = "([^"]*)"', gpuir) == [
        ("into the loop's ring by the producer, after its last iteration", "the last iteration's, after the loop")]
    slots = 3
    assert ptx.count("mbarrier.init.shared") == ptx.count("mbarrier.inval") == 2 * slots
    assert k.metadata["ptxas_warnings"] == [] and k.metadata["spill_stores"] == 0


@despina.jit
def fp8_nan_matmul(a_ptr, b_ptr, c_ptr, K, BK: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[128, K], strides=[K, 1], block_shape=[128, BK], padding_option="nan")
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[128, K], strides=[K, 1], block_shape=[128, BK])
    acc = tl.zeros((128, 128), tl.float32)
    for k in range(0, K, BK):
        acc = tl.dot(a_desc.load([0, k]), b_desc.load([0, k]).T, acc)
    tl.store(c_ptr + tl.arange(0, 128)[:, None] * 128 + tl.arange(0, 128)[None, :], acc)


def test_fp8_blocks_padded_with_nan_are_masked_loads() -> None:
    """TMA's NaN fill is for 16- and 32-bit floats: A's block is a masked load (its NaN an fp32 constant cast to
    fp8, the IR having no fp8 constants), B's is copied by TMA; without TMA both are masked loads."""
    k = despina.compile(fp8_nan_matmul, "*fp8e4nv:16,*fp8e4nv:16,*fp32:16,i32:16", {"BK": 128}, num_warps=8,
                        target="sm_90a")
    assert tma_attrs(k) == ["0", '"none: TMA fills out-of-bounds elements with NaN for 16- and 32-bit floats only"']
    plain = despina.compile(fp8_nan_matmul, "*fp8e4nv:16,*fp8e4nv:16,*fp32:16,i32:16", {"BK": 128}, num_warps=8,
                            target="sm_90")
    assert "descriptor_load" not in plain.asm["gpuir"] and "cp.async.bulk" not in plain.asm["ptx"]


@despina.jit
def persistent_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                      PROGRAMS: tl.constexpr, FLATTEN: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    tiles_n = tl.cdiv(N, BN)
    for tile in tl.range(tl.program_id(0), tl.cdiv(M, BM) * tiles_n, PROGRAMS, flatten=FLATTEN):
        off_m, off_n = tile // tiles_n * BM, tile % tiles_n * BN
        acc = tl.zeros((BM, BN), tl.float32)
        for k in range(0, K, BK):
            acc = tl.dot(a_desc.load([off_m, k]), b_desc.load([off_n, k]).T, acc)
        rm, rn = off_m + tl.arange(0, BM), off_n + tl.arange(0, BN)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


def test_a_flattened_persistent_loop_keeps_its_group_in_flight_and_waits_in_the_epilogue() -> None:
    """One pipelined loop over every (tile, K step): a tile's first K step starts the accumulator at zero
    through scale-d (no select of registers in flight), the epilogue's branch waits for the group before
    it reads the accumulator, and the other iterations leave it in flight; the nest stays, without its inner
    loop, for an inner loop of no iteration. The spare slot is not taken: the epilogue's conversion needs the
    room. Its scratch meets a CTA barrier every iteration, so the slots are handed over with CTA barriers too,
    not named ones (gpuir/pipeline.py)."""
    sig = "*fp16:16,*fp16:16,*fp16:16,i32,i32,i32:16"
    consts = {"BM": 128, "BN": 256, "BK": 64, "PROGRAMS": 132}
    k = despina.compile(persistent_matmul, sig, {**consts, "FLATTEN": True}, num_warps=8, num_stages=3, target="sm_90a")
    loops = [line for line in k.asm["gpuir"].splitlines() if "= for(" in line or " for(" in line]
    fused = next(line for line in loops if 'flattened = "yes' in line)
    assert "2 loads by TMA" in fused and "wgmma waits with 1 group in flight" in fused
    assert "copies after a second barrier" in fused and "in 4 slots" not in fused and "named" not in fused
    assert any('flattened = "no: its inner loop runs no iteration' in line for line in loops)
    ptx = k.asm["ptx"]
    assert ptx.count("wgmma.wait_group.sync.aligned 1;") == 1  # the fused loop's (the nest's copy has no dot)
    assert ptx.count("wgmma.wait_group.sync.aligned 0;") == 2  # the epilogue, and after the loop
    assert k.metadata["spill_stores"] == 0 and not k.metadata["ptxas_warnings"]
    plain = despina.compile(persistent_matmul, sig, {**consts, "FLATTEN": False}, num_warps=8, num_stages=3,
                            target="sm_90a")
    assert "flattened" not in plain.asm["gpuir"]


def _fused(kernel: Any) -> str:
    return next(line for line in kernel.asm["gpuir"].splitlines() if 'flattened = "yes' in line)


@pytest.mark.parametrize("stages", [3, 4])
def test_copies_into_the_spare_slot_go_out_before_the_dots(stages: int) -> None:
    """At 128x128 the flattened loop's ring takes a spare slot (4 slots for 3 stages, 5 for 4), which the barrier at
    the top of an iteration has already given back: its TMA copies are issued right after that barrier, before the
    iteration's wgmma, not after its wait (gpuir/pipeline.py: tutorial 09's persistent matmul 1.07x Triton)."""
    sig = "*fp16:16,*fp16:16,*fp16:16,i32,i32,i32:16"
    consts = {"BM": 128, "BN": 128, "BK": 64, "PROGRAMS": 132, "FLATTEN": True}
    k = despina.compile(persistent_matmul, sig, consts, num_warps=8, num_stages=stages, target="sm_90a")
    assert f"in {stages + 1} slots, wgmma waits with 1 group in flight, copies before the dots" in _fused(k)
    body = next(loop for loop in loops(k.asm["ptx"]) if "mbarrier.try_wait" in loop and "wgmma.mma_async" in loop)
    barrier, copy = body.index("bar.sync"), body.index("cp.async.bulk.tensor")
    assert barrier < copy < body.index("wgmma.mma_async") < body.index("wgmma.wait_group.sync.aligned 1;")
    assert body.count("cp.async.bulk.tensor") == 2 and k.metadata["spill_stores"] == 0


def test_copies_without_a_spare_slot_or_through_cp_async_come_after_the_dots(tmp_path: Any) -> None:
    """The copies go first only into a spare slot the barrier has given back, and only TMA's: not where the copies
    wait behind a second barrier (128x256: no room for a spare slot), where slots are given back on named barriers
    (attention), where a producer issues them (warp specialization), nor where every thread copies with cp.async
    (a pointer matmul, whose ring has its spare slot too)."""
    sig = "*fp16:16,*fp16:16,*fp16:16,i32,i32,i32:16"
    wide = despina.compile(persistent_matmul, sig, {"BM": 128, "BN": 256, "BK": 64, "PROGRAMS": 132, "FLATTEN": True},
                           num_warps=8, num_stages=3, target="sm_90a")
    pointers = despina.compile(benchmark_kernels.load(tmp_path).matmul_tuned_kernel.fn,  # strides :16: cp.async
                               "*fp16:16,*fp16:16,*fp16:16,i32:16,i32:16,i32:16,i32:16,i32:1,i32:16,i32:1,i32:16,i32:1",
                               {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_warps=8, num_stages=4,
                               target="sm_90a")
    assert "copies after a second barrier" in _fused(wide) and "copies before" not in _fused(wide)
    assert "in 5 slots" in pointers.asm["gpuir"]
    for k in (pointers, attention_tma(64, False, tmp_path), attention_tma(128, False, tmp_path, ws=True)):
        assert "copies before the dots" not in k.asm["gpuir"]
