"""Tensor-descriptor loads copied and stores stored by TMA on a compute-capability-9.0 device (sm_90a):
matmuls whose operands come through host `TensorDescriptor`s and through `tl.make_tensor_descriptor` of the
kernel's arguments, against torch, over ragged shapes (TMA fills the out-of-bounds part of a box with
zeros), 16-bit and fp8 operands (and tf32, whose mma.sync dots read masked loads instead), B read as [K, N]
or as [N, K] through `tl.trans`, 32-, 64- and 128-byte swizzles and several atoms a row, 1 (copied outside a
pipeline, then read into registers through the swizzle model) to 4 stages; index-valued tiles read exactly;
index-valued tiles stored exactly (1-D by TMA stores at provably aligned offsets; 2-D ones, and 1-D ones at
negative or unaligned offsets, by the masked stores TMA gives way to: gpuir.tma._store_fit), at ragged edges
and out of bounds, nothing written outside the tensor; matmuls whose epilogue is a TMA store (fp16, bf16
and fp32 C, ragged M and N) against torch; the same kernel run by the daemon."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import benchmark_kernels
import numpy as np
import pytest

import despina
import despina.language as tl
from despina.runtime import driver
from despina.tools.tensor_descriptor import TensorDescriptor

from .hopper import normals, require_tma
from .test_dot import TORCH
from .test_execute import GrpcDaemon, gpu_daemon, on_daemon  # noqa: F401 (fixtures)


@despina.jit
def desc_matmul(a_desc, b_desc, c_ptr, M, N, K, s_cm, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                B_NK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = a_desc.load([pid_m * BM, k])
        if B_NK:
            b = tl.trans(b_desc.load([pid_n * BN, k]))
        else:
            b = b_desc.load([k, pid_n * BN])
        acc = tl.dot(a, b, acc)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    tl.store(c_ptr + rm[:, None] * s_cm + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@despina.jit
def device_desc_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        acc = tl.dot(a_desc.load([pid_m * BM, k]), b_desc.load([k, pid_n * BN]), acc)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


# dtype, (M, N, K), (BM, BN, BK), warps, stages, B as [N, K] (through tl.trans)
CASES = [
    ("fp16", (256, 256, 256), (128, 128, 64), 8, 3, False),
    ("fp16", (200, 136, 208), (128, 128, 64), 8, 3, False),
    ("bf16", (256, 512, 320), (128, 256, 64), 8, 3, False),
    ("fp16", (256, 256, 192), (128, 128, 64), 8, 3, True),
    ("bf16", (130, 200, 112), (128, 64, 64), 4, 2, True),
    ("fp16", (256, 256, 384), (128, 128, 128), 8, 2, False),  # two atoms a row of A
    ("fp16", (192, 320, 96), (64, 128, 32), 4, 4, False),  # 64-byte swizzle of A
    ("fp16", (128, 128, 80), (64, 64, 16), 4, 3, True),  # 32-byte swizzle
    ("fp16", (256, 256, 256), (128, 128, 64), 8, 1, False),  # no pipeline: copied, then read into registers
    ("fp16", (256, 256, 48), (128, 128, 64), 8, 3, False),  # one iteration, K < BLOCK_K
    ("fp8e4nv", (256, 256, 256), (128, 128, 128), 8, 3, True),
    ("fp32", (256, 128, 160), (128, 64, 32), 4, 3, True),  # tf32: mma.sync, whose loads are masked loads
]


@pytest.fixture
def hopper(torch_cuda: Any, gpu_device: Any, fresh_cache: Path) -> Any:
    if gpu_device.capability != (9, 0):
        pytest.skip(f"TMA is copied in wgmma loops on a compute-capability-9.0 device, not {gpu_device}")
    return torch_cuda


def _operand(torch: Any, dtype: str, shape: tuple[int, int], seed: int) -> Any:
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(shape, generator=g, device="cuda", dtype=torch.float32)
    return x.to(getattr(torch, "float8_e4m3fn" if dtype == "fp8e4nv" else TORCH[dtype]))


def _run(torch: Any, case: tuple[Any, ...]) -> tuple[Any, Any, Any]:
    dtype, (m, n, k), (bm, bn, bk), warps, stages, b_nk = case
    a = _operand(torch, dtype, (m, k), 1)
    b = _operand(torch, dtype, (n, k) if b_nk else (k, n), 2)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    a_desc = TensorDescriptor.from_tensor(a, [bm, bk])
    b_desc = TensorDescriptor.from_tensor(b, [bn, bk] if b_nk else [bk, bn])
    grid = (despina.cdiv(m, bm), despina.cdiv(n, bn))
    desc_matmul[grid](a_desc, b_desc, c, m, n, k, c.stride(0), BM=bm, BN=bn, BK=bk, B_NK=b_nk,
                      num_warps=warps, num_stages=stages)
    return a, (b.t() if b_nk else b), c


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{'x'.join(map(str, c[1]))}-b{'x'.join(map(str, c[2]))}"
                         f"-w{c[3]}-s{c[4]}{'-nk' if c[5] else ''}")
def test_descriptor_matmul_matches_torch(hopper: Any, case: tuple[Any, ...]) -> None:
    torch = hopper
    dtype, k = case[0], case[1][2]
    a, b, c = _run(torch, case)
    want = a.double() @ b.double()
    tol = {"fp16": 1e-2, "bf16": 3e-2, "fp8e4nv": 2e-2, "fp32": 1e-2}[dtype]
    torch.testing.assert_close(c.double(), want, rtol=tol, atol=tol * max(k, 1) ** 0.5)


@pytest.mark.parametrize(("block", "stages"), [((128, 128, 64), 2), ((128, 128, 64), 3), ((128, 128, 64), 4),
                                               ((128, 256, 64), 3)])
def test_every_trip_count_hands_the_slots_over(hopper: Any, block: tuple[int, int, int], stages: int) -> None:
    """Loops of 1 to stages + 4 iterations of one dot, their slots handed over at CTA barriers, with a spare slot
    (2 and 4 stages, and 128x256: the copies then go out right after the barrier, before the dots) and without
    (128x128 with 3 stages, which keeps room for two blocks an SM: the copies then wait behind a second barrier),
    against torch."""
    torch = hopper
    bm, bn, bk = block
    for trips in range(1, stages + 5):
        case = ("fp16", (256, 256, bk * trips), block, 8, stages, True)
        a, b, c = _run(torch, case)
        torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-2, atol=1e-2 * (bk * trips) ** 0.5)
    descs = (TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b.t(), [bn, bk]))
    gpuir = _compiled(desc_matmul, (*descs, c, 256, 256, bk * trips, c.stride(0)),
                      {"BM": bm, "BN": bn, "BK": bk, "B_NK": True}, 8, stages).asm["gpuir"]
    assert ("copies before the dots" in gpuir) == (stages != 3 or bn == 256)


@despina.jit
def chained_dots(q_desc, k_desc, v_desc, o_ptr, N, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    q = q_desc.load([tl.program_id(0) * BM, 0])
    acc = tl.zeros((BM, D), tl.float32)
    for n in range(0, N, BN):
        s = tl.dot(q, k_desc.load([n, 0]).T)
        acc = tl.dot(s.to(tl.float16), v_desc.load([n, 0]), acc)
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    tl.store(o_ptr + rows[:, None] * D + tl.arange(0, D)[None, :], acc)


@pytest.mark.parametrize(("bn", "stages"), [(64, 2), (64, 3), (128, 3), (64, 4)])
def test_every_trip_count_of_chained_dots_hands_the_slots_over(hopper: Any, bn: int, stages: int) -> None:
    """Attention's loop without its softmax, S = Q K^T and O += S V with S in registers: a body that chains dots
    gives its slots back on named barriers (lower/pipeline.py: the other warps arrive for a slot that is copied
    into again, the copying warp waits before it copies into a slot an iteration has read). Loops of 1 to
    stages + 4 iterations: a warp arriving once too often or the copying warp waiting once too few would hang or
    overwrite a slot in use."""
    torch = hopper
    d, bm = 64, 128
    sig = f"tensordesc<fp16[{bm},{d}]>:16,tensordesc<fp16[{bn},{d}]>:16,tensordesc<fp16[{bn},{d}]>:16,*fp32:16,i32:16"
    compiled = despina.compile(chained_dots, sig, {"D": d, "BM": bm, "BN": bn}, num_warps=8, num_stages=stages,
                               target="sm_90a")
    assert "slots given back on named barriers" in compiled.asm["gpuir"]
    g = torch.Generator(device="cuda").manual_seed(7)
    for trips in range(1, stages + 5):
        n = bn * trips
        q, k, v = (torch.randn((rows, d), generator=g, device="cuda", dtype=torch.float16) * 0.25
                   for rows in (2 * bm, n, n))
        o = torch.full((2 * bm, d), float("nan"), device="cuda", dtype=torch.float32)
        descs = [TensorDescriptor.from_tensor(t, [rows, d]) for t, rows in ((q, bm), (k, bn), (v, bn))]
        chained_dots[(2,)](*descs, o, n, D=d, BM=bm, BN=bn, num_warps=8, num_stages=stages)
        s = (q.float() @ k.float().T).half().float()
        torch.testing.assert_close(o, s @ v.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("stages", [1, 3])
def test_index_valued_tiles_read_exactly(hopper: Any, stages: int) -> None:
    """A's rows, then its columns, as values (exact in fp16) times the identity: a block of two atoms a row
    landed by TMA in the hardware's 128-byte swizzle and read through despina's model of it (stages=1), or
    by wgmma's descriptors (stages=3), comes back element for element."""
    torch = hopper
    m = k = 128
    rows = torch.arange(m, device="cuda", dtype=torch.float16)[:, None].expand(m, k).contiguous()
    cols = torch.arange(k, device="cuda", dtype=torch.float16)[None, :].expand(m, k).contiguous()
    eye = torch.eye(k, device="cuda", dtype=torch.float16)
    for a in (rows, cols):
        c = torch.full((m, k), -1.0, device="cuda", dtype=torch.float32)
        desc_matmul[(1, 1)](TensorDescriptor.from_tensor(a, [128, 128]), TensorDescriptor.from_tensor(eye, [128, 128]),
                            c, m, k, k, c.stride(0), BM=128, BN=128, BK=128, B_NK=False, num_warps=8, num_stages=stages)
        assert torch.equal(c, a.float())


@pytest.mark.parametrize("k", [256, 200])
def test_device_descriptors_of_the_arguments(hopper: Any, k: int) -> None:
    """`tl.make_tensor_descriptor` of the kernel's own arguments: the launch encodes the maps (K a multiple
    of 16); K = 200 gives strides TMA may not take, and the loads are masked loads instead."""
    torch = hopper
    m, n = 256, 192
    a, b = _operand(torch, "fp16", (m, k), 3), _operand(torch, "fp16", (k, n), 4)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    device_desc_matmul[(despina.cdiv(m, 128), despina.cdiv(n, 64))](a, b, c, m, n, k, BM=128, BN=64, BK=64,
                                                                    num_warps=4, num_stages=3)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-2, atol=1e-2 * k ** 0.5)


def test_the_daemon_runs_the_tma_kernel(gpu_device: driver.Device, on_daemon: GrpcDaemon) -> None:  # noqa: F811
    """The same kernel through `run_remote`: the daemon compiles it and encodes the tensor maps for its run."""
    require_tma(gpu_device)
    m, n, k = 256, 128, 192
    a, b = normals(5, (m, k), (k, n))
    c = np.full((m, n), np.nan, np.float32)
    device_desc_matmul.run_remote[(2, 1)](a, b, c, m, n, k, BM=128, BN=128, BK=64, num_warps=8, num_stages=3)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-2, atol=1e-1)


@pytest.mark.parametrize("dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("ws", [False, True])
@pytest.mark.parametrize(("block_n", "stages"), [(64, 3), (128, 2)])
def test_attention_through_descriptors_matches_sdpa(hopper: Any, tmp_path: Path, dim: int, causal: bool,
                                                    ws: bool, block_n: int, stages: int) -> None:
    """benchmarks/kernels.py's attention_tma_kernel (K and V copied by TMA into a ring, P in registers) on
    (2 batches x 3 heads, 384, dim) fp16, against torch's scaled_dot_product_attention; warp-specialized
    (`ws`), with P V deferred to the next iteration and the last one after the loop (gpuir/defer.py). At
    128x128 blocks and d128, specialized, the producer is a warpgroup that gives its registers to the
    consumers (setmaxnreg)."""
    torch = hopper
    kernels = benchmark_kernels.load(tmp_path)
    batch, heads, n_ctx = 2, 3, 384
    q, k, v = (torch.randn((batch * heads * n_ctx, dim), device="cuda", dtype=torch.float16) for _ in range(3))
    out = torch.full_like(q, float("nan"))
    descs = [TensorDescriptor.from_tensor(t, [rows, dim])
             for t, rows in ((q, 128), (k, block_n), (v, block_n), (out, 128))]
    kernels.attention_tma_kernel[(n_ctx // 128, batch * heads)](*descs, dim ** -0.5, n_ctx, HEAD_DIM=dim, BLOCK_M=128,
                                                                 BLOCK_N=block_n, CAUSAL=causal, WARP_SPECIALIZE=ws,
                                                                 num_warps=8, num_stages=stages)
    shape = (batch, heads, n_ctx, dim)
    want = torch.nn.functional.scaled_dot_product_attention(q.view(shape), k.view(shape), v.view(shape), is_causal=causal)
    torch.testing.assert_close(out.view(shape), want, rtol=2e-2, atol=2e-2)


@despina.jit
def _attention_stage(acc, l_i, m_i, q, desc_k, desc_v, offset_y, lo, hi, offs_m, scale, BN: tl.constexpr,
                     MASKED: tl.constexpr):
    """One stage of tutorial 06's forward pass (its `_attn_fwd_inner`): the key blocks from `lo` to `hi`, masked
    causally where MASKED."""
    offs_n = tl.arange(0, BN)
    for start_n in range(lo, hi, BN):
        qk = tl.dot(q, desc_k.load([offset_y + start_n, 0]).T) * scale
        if MASKED:
            qk = tl.where(offs_m[:, None] >= start_n + offs_n[None, :], qk, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp2(qk - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), desc_v.load([offset_y + start_n, 0]))
        m_i = m_new
    return acc, l_i, m_i


@despina.jit
def two_stage_attention(desc_q, desc_k, desc_v, out_ptr, sm_scale, N_CTX, D: tl.constexpr, BM: tl.constexpr,
                        BN: tl.constexpr):
    """Causal attention in tutorial 06's two stages: the blocks before the diagonal unmasked, then the diagonal's
    masked, both loops multiplying the same Q (one shared-memory buffer, gpuir/hoist.py)."""
    start_m, offset_y = tl.program_id(0), tl.program_id(1) * N_CTX
    offs_m = start_m * BM + tl.arange(0, BM)
    q = desc_q.load([offset_y + start_m * BM, 0])
    m_i = tl.zeros([BM], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BM], dtype=tl.float32)
    acc = tl.zeros([BM, D], dtype=tl.float32)
    scale = sm_scale * 1.44269504
    acc, l_i, m_i = _attention_stage(acc, l_i, m_i, q, desc_k, desc_v, offset_y, 0, start_m * BM, offs_m, scale,
                                     BN, False)
    acc, l_i, m_i = _attention_stage(acc, l_i, m_i, q, desc_k, desc_v, offset_y, start_m * BM, (start_m + 1) * BM,
                                     offs_m, scale, BN, True)
    rows = offset_y + offs_m
    tl.store(out_ptr + rows[:, None] * D + tl.arange(0, D)[None, :], (acc / l_i[:, None]).to(tl.float16))


@pytest.mark.parametrize(("dim", "block_n", "stages"), [(128, 128, 2), (64, 64, 3)])
def test_two_stage_causal_attention_matches_sdpa(hopper: Any, dim: int, block_n: int, stages: int) -> None:
    """Tutorial 06's causal form on (2 x 3, 512, dim) fp16 against SDPA. At d128 with 128x128 blocks and 2 stages
    it fits only with one Q buffer for both loops (229,400 bytes of shared memory; 262,168 with one each)."""
    torch = hopper
    batch_heads, n_ctx = 6, 512
    q, k, v = (torch.randn((batch_heads * n_ctx, dim), device="cuda", dtype=torch.float16) for _ in range(3))
    out = torch.full_like(q, float("nan"))
    descs = [TensorDescriptor.from_tensor(t, [rows, dim]) for t, rows in ((q, 128), (k, block_n), (v, block_n))]
    two_stage_attention[(n_ctx // 128, batch_heads)](*descs, out, dim ** -0.5, n_ctx, D=dim, BM=128, BN=block_n,
                                                     num_warps=8, num_stages=stages)
    shape = (1, batch_heads, n_ctx, dim)
    want = torch.nn.functional.scaled_dot_product_attention(q.view(shape), k.view(shape), v.view(shape), is_causal=True)
    torch.testing.assert_close(out.view(shape), want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("programs,k", [(3, 136), (200, 136), (3, 0), (2, 64), (2, 448)])
@pytest.mark.parametrize("bn,stages", [(256, 3), (128, 3), (128, 4)])
def test_persistent_descriptor_matmul_matches_torch(hopper: Any, tmp_path: Path, programs: int, k: int, bn: int,
                                                    stages: int) -> None:
    """benchmarks/kernels.py's tutorial-09 persistent kernel, its loop nest flattened: each of `programs`
    programs loops over output tiles (2 or 3: several tiles each, the next tile's copies issued during this
    one's epilogue; 200: more programs than tiles), ragged M, N and K (one K step, several; none: the nest as
    written runs, and C is 0), B as [N, K] through `.T`, C through a descriptor store. TMA copies A and B where K is
    a multiple of 16 (their rows' stride: the others are cp.async copies of masked loads); at 128x128 the ring then
    has a spare slot and each iteration's copies go out before its dots (gpuir/pipeline.py), at 128x256 after them."""
    torch = hopper
    kernels = benchmark_kernels.load(tmp_path)
    m, n = 300, 520
    a, b = (_operand(torch, "fp16", (rows, max(k, 8)), seed)[:, :k] for rows, seed in ((m, 7), (n, 8)))
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    descs = [TensorDescriptor.from_tensor(t, block) for t, block in ((a, [128, 64]), (b, [bn, 64]), (c, [128, bn]))]
    tiles = despina.cdiv(m, 128) * despina.cdiv(n, bn)
    consts = {"BLOCK_M": 128, "BLOCK_N": bn, "BLOCK_K": 64, "GROUP_SIZE_M": 8, "NUM_SMS": min(programs, tiles)}
    kernels.matmul_tma_persistent_kernel[(min(programs, tiles),)](*descs, m, n, k, **consts, num_warps=8,
                                                                  num_stages=stages)
    torch.testing.assert_close(c.double(), (a.double() @ b.double().T).half().double(), rtol=1e-2, atol=5e-2)
    gpuir = _compiled(kernels.matmul_tma_persistent_kernel, (*descs, m, n, k), consts, 8, stages).asm["gpuir"]
    fused = next(line for line in gpuir.splitlines() if 'flattened = "yes' in line)
    assert ("copies before the dots" in fused) == (bn == 128 and k > 0 and k % 16 == 0)


# ---- TMA stores ----------------------------------------------------------------------------------


@despina.jit
def store_index_tile(desc, OFF_R: tl.constexpr, OFF_C: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr,
                     MOD: tl.constexpr):
    """Program p writes the block of values (p * BR * BC + its row-major index) % MOD at (OFF_R + p * BR, OFF_C)."""
    pid = tl.program_id(0)
    tile = pid * (BR * BC) + tl.arange(0, BR)[:, None] * BC + tl.arange(0, BC)[None, :]
    desc.store([OFF_R + pid * BR, OFF_C], (tile % MOD).to(desc.dtype))


@despina.jit
def store_index_row(desc, OFF: tl.constexpr, B: tl.constexpr, MOD: tl.constexpr):
    pid = tl.program_id(0)
    desc.store([OFF + pid * B], ((pid * B + tl.arange(0, B)) % MOD).to(desc.dtype))


def _compiled(kernel: Any, args: tuple[Any, ...], consts: dict[str, Any], warps: int = 4, stages: int = 3) -> Any:
    """What a launch of `kernel` with `args` compiles for sm_90a (to check that TMA stores it)."""
    from despina.runtime import kernels

    options = kernel.options({"num_warps": warps, "num_stages": stages}, interpret=False)
    k, _ = kernels.local(kernel.ir(kernel.specialize(kernel.bind(args, consts), options), options), options, "sm_90a")
    return k


# (dtype, block, what the rows of a box are): 128-byte swizzle (one atom, several), 64- and 32-byte swizzles,
# 2- and 4-byte and 1-byte elements
STORE_CASES = [("fp16", (64, 64)), ("fp16", (64, 128)), ("fp16", (32, 32)), ("fp16", (16, 16)), ("bf16", (128, 64)),
               ("fp32", (64, 64)), ("int8", (32, 128))]
MODULI = {"fp16": 2039, "bf16": 251, "fp32": 1 << 20, "int8": 127}


@pytest.mark.parametrize("cols", [90, 96])
@pytest.mark.parametrize("at", [(0, 0), (8, 64), (-3, 5), (37, -6), (95, 83)])
@pytest.mark.parametrize("dtype,block", STORE_CASES, ids=lambda c: str(c))
def test_a_tma_store_writes_index_valued_tiles_only_inside_the_tensor(hopper: Any, dtype: str, block: tuple[int, int],
                                                                      at: tuple[int, int], cols: int) -> None:
    """A 100 x cols tensor with rows of 128 elements, rows 2 .. 101 of a 104-row buffer of sentinels: programs
    write their blocks from row at[0] on, one block past the tensor's last row, from column at[1] (negative, or
    past the end). Every element inside the tensor that a block covers holds its index, each one else (the rows
    around the tensor, the columns past each row's end, what no block covers) keeps its sentinel. TMA stores the
    blocks where the offsets are non-negative and 16-byte aligned along the rows and the rows end on a 16-byte
    boundary (96 columns; gpuir.tma._store_fit): with 90 of fp16 or int8 it wrote columns 90 to 95, and at the
    other offsets it raised an illegal instruction, which loses the CUDA context."""
    torch = hopper
    rows, stride, guard = 100, 128, 2
    tdt = getattr(torch, TORCH[dtype])
    size = torch.empty((), dtype=tdt).element_size()
    backing = torch.full((rows + 2 * guard, stride), -1, device="cuda", dtype=tdt)
    view = backing[guard : guard + rows, :cols]
    br, bc = block
    desc = TensorDescriptor(view, [rows, cols], [stride, 1], [br, bc])
    programs = despina.cdiv(rows - max(at[0], 0), br) + 1
    consts = {"OFF_R": at[0], "OFF_C": at[1], "BR": br, "BC": bc, "MOD": MODULI[dtype]}
    store_index_tile[(programs,)](desc, **consts, num_warps=4)
    tma = min(at) >= 0 and at[1] * size % 16 == 0 and cols % 16 == 0
    assert len(_compiled(store_index_tile, (desc,), consts).metadata.get("tensor_maps") or ()) == int(tma)
    want = np.full((rows + 2 * guard, stride), -1, np.float64)
    for p in range(programs):
        for r in range(br):
            i = at[0] + p * br + r
            for c in range(bc):
                j = at[1] + c
                if 0 <= i < rows and 0 <= j < cols:
                    want[guard + i, j] = (p * br * bc + r * bc + c) % MODULI[dtype]
    np.testing.assert_array_equal(backing.double().cpu().numpy(), want)


@pytest.mark.parametrize("n,block,off", [(1000, 1024, 0), (1000, 256, -40), (300, 64, 7), (4096, 512, 0),
                                         (4000, 256, 64)])
def test_a_1d_tma_store_writes_only_inside_the_tensor(hopper: Any, n: int, block: int, off: int) -> None:
    """A 1-D block (boxes of up to 256 elements) written over an fp32 tensor of n elements amid sentinels."""
    torch = hopper
    backing = torch.full((n + 64,), -1.0, device="cuda", dtype=torch.float32)
    view = backing[32 : 32 + n]
    desc = TensorDescriptor(view, [n], [1], [block])
    programs = despina.cdiv(n - off, block) + 1
    store_index_row[(programs,)](desc, OFF=off, B=block, MOD=1 << 20, num_warps=4)
    # TMA stores it where the offset is provably non-negative and 16-byte aligned and n divisible by 16 (the
    # tensor ends on a 16-byte boundary); at -40 or 7 it raised an illegal instruction, and the store is a masked
    # one (gpuir.tma._store_fit).
    maps = _compiled(store_index_row, (desc,), {"OFF": off, "B": block, "MOD": 1 << 20}).metadata.get("tensor_maps")
    assert len(maps or ()) == (1 if off >= 0 and off * 4 % 16 == 0 and n % 16 == 0 else 0)
    want = np.full(n + 64, -1.0)
    for p in range(programs):
        for e in range(block):
            i = off + p * block + e
            if 0 <= i < n:
                want[32 + i] = (p * block + e) % (1 << 20)
    np.testing.assert_array_equal(backing.double().cpu().numpy(), want)


@despina.jit
def store_matmul(a_desc, b_desc, c_desc, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """benchmarks/kernels.py's matmul_tma_kernel with C of any dtype: its epilogue a TMA store."""
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        acc = tl.dot(a_desc.load([pid_m * BM, k]), b_desc.load([pid_n * BN, k]).T, acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))


# C's dtype, (M, N, K), (BM, BN, BK), warps, stages
STORE_MATMULS = [
    ("fp16", (256, 256, 256), (128, 128, 64), 8, 3),
    ("fp16", (200, 136, 208), (128, 128, 64), 8, 3),
    ("bf16", (300, 520, 144), (128, 256, 64), 8, 3),
    ("fp32", (130, 200, 112), (128, 128, 64), 8, 3),
    ("fp32", (256, 96, 64), (128, 64, 64), 4, 2),
    ("fp16", (72, 40, 48), (64, 64, 32), 4, 3),
    ("fp16", (256, 256, 256), (128, 128, 64), 8, 1),
    ("fp16", (200, 90, 64), (128, 128, 64), 8, 3),  # rows that end inside a 16-byte unit: a masked store
]


@pytest.mark.parametrize("case", STORE_MATMULS, ids=lambda c: f"{c[0]}-{'x'.join(map(str, c[1]))}-"
                         f"b{'x'.join(map(str, c[2]))}-w{c[3]}-s{c[4]}")
def test_a_matmul_stores_its_result_with_tma(hopper: Any, case: tuple[Any, ...]) -> None:
    """C = A @ B^T (fp16 A and B) through host descriptors, C a view with a guard of sentinels around it
    (rows before and after, columns past N), ragged M, N and K: C matches torch and no sentinel changed."""
    torch = hopper
    dtype, (m, n, k), (bm, bn, bk), warps, stages = case
    a, b = _operand(torch, "fp16", (m, k), 11), _operand(torch, "fp16", (n, k), 12)
    tdt = getattr(torch, TORCH[dtype])
    stride = despina.cdiv(n, 16) * 16 + 16  # what the specialization proves 16-byte aligned for any dtype
    backing = torch.full((m + 4, stride), -7.0, device="cuda", dtype=tdt)
    c = backing[2 : 2 + m, :n]
    descs = [TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, [bn, bk]),
             TensorDescriptor(c, [m, n], [stride, 1], [bm, bn])]
    consts = {"BM": bm, "BN": bn, "BK": bk}
    store_matmul[(despina.cdiv(m, bm), despina.cdiv(n, bn))](*descs, k, **consts, num_warps=warps, num_stages=stages)
    maps = _compiled(store_matmul, (*descs, k), consts, warps, stages).metadata["tensor_maps"]
    # TMA stores C where the specialization proves its rows end on a 16-byte boundary (n divisible by 16)
    assert [m["dtype"] for m in maps[2:]] == ([dtype] if n % 16 == 0 else [])
    want = (a.double() @ b.double().T).to(tdt).double()
    tol = {"fp16": 1e-2, "bf16": 3e-2, "fp32": 1e-2}[dtype]
    torch.testing.assert_close(c.double(), want, rtol=tol, atol=tol * k ** 0.5)
    guard = backing.clone()
    guard[2 : 2 + m, :n] = -7.0
    assert bool((guard == -7.0).all()), "the store wrote outside C"
