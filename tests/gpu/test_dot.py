"""`tl.dot` on the GPU against torch: every dtype the tensor cores take (and the FMA fallbacks),
shapes from one instruction to 128x256 tiles, operands transposed by strides or `tl.trans`,
masked edge tiles and K not a multiple of BLOCK_K."""

from __future__ import annotations

from typing import Any

import pytest

import despina
import despina.language as tl


@despina.jit
def matmul(a_ptr, b_ptr, c_ptr, M, N, K, s_am, s_ak, s_bk, s_bn, s_cm, s_cn,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, TRANS_B: tl.constexpr,
           PRECISION: tl.constexpr, ACC: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), ACC)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + rk
        a = tl.load(a_ptr + rm[:, None] * s_am + kk[None, :] * s_ak, mask=(rm[:, None] < M) & (kk[None, :] < K),
                    other=0)
        if TRANS_B:  # B^T's tile, transposed in registers
            bt = tl.load(b_ptr + rn[:, None] * s_bn + kk[None, :] * s_bk, mask=(rn[:, None] < N) & (kk[None, :] < K),
                         other=0)
            b = tl.trans(bt)
        else:
            b = tl.load(b_ptr + kk[:, None] * s_bk + rn[None, :] * s_bn, mask=(kk[:, None] < K) & (rn[None, :] < N),
                        other=0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=ACC)
    tl.store(c_ptr + rm[:, None] * s_cm + rn[None, :] * s_cn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


TORCH = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "int8": "int8"}
TOL = {"fp16": 1e-2, "bf16": 3e-2, "tf32": 1e-2, "tf32x3": 1e-4, "ieee": 1e-4}

# (dtype, precision, acc, (M, N, K), (BM, BN, BK), warps)
CASES = [
    ("fp16", "ieee", "fp32", (16, 16, 16), (16, 16, 16), 1),
    ("fp16", "ieee", "fp32", (100, 90, 72), (32, 32, 32), 4),
    ("fp16", "ieee", "fp32", (256, 256, 192), (128, 128, 64), 8),
    ("fp16", "ieee", "fp32", (256, 512, 128), (128, 256, 64), 8),
    ("fp16", "ieee", "fp32", (64, 64, 64), (64, 16, 32), 4),
    ("fp16", "ieee", "fp32", (64, 64, 64), (16, 64, 16), 8),
    ("fp16", "ieee", "fp16", (128, 128, 96), (64, 64, 32), 4),
    ("bf16", "ieee", "fp32", (130, 70, 100), (64, 64, 32), 4),
    ("fp32", "tf32", "fp32", (128, 128, 80), (64, 64, 32), 4),
    ("fp32", "tf32x3", "fp32", (64, 64, 64), (64, 64, 16), 4),
    ("fp32", "ieee", "fp32", (64, 48, 40), (32, 32, 16), 4),
    ("int8", "ieee", "int32", (128, 96, 160), (64, 32, 64), 4),
    ("int8", "ieee", "int32", (32, 32, 32), (16, 16, 16), 4),
]


def _operand(torch: Any, dtype: str, shape: tuple[int, int], seed: int, transposed: bool) -> Any:
    g = torch.Generator(device="cuda").manual_seed(seed)
    if transposed:
        return _operand(torch, dtype, shape[::-1], seed, False).t()
    if dtype == "int8":
        return torch.randint(-128, 128, shape, generator=g, device="cuda", dtype=torch.int8)
    return torch.randn(shape, generator=g, device="cuda", dtype=getattr(torch, TORCH[dtype]))


@pytest.mark.parametrize("layout", ["nn", "tn", "nt", "trans"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}-{'x'.join(map(str, c[3]))}-b{'x'.join(map(str, c[4]))}-w{c[5]}")
def test_dot_matches_torch(torch_cuda: Any, case: tuple[Any, ...], layout: str) -> None:
    torch = torch_cuda
    dtype, precision, acc, (m, n, k), (bm, bn, bk), warps = case
    if layout != "nn" and (m, n, k) not in ((100, 90, 72), (128, 128, 80), (128, 96, 160), (256, 256, 192), (130, 70, 100)):
        pytest.skip("transpositions are covered on the masked shapes")
    a = _operand(torch, dtype, (m, k), 1, layout == "tn")
    b = _operand(torch, dtype, (k, n), 2, layout in ("nt", "trans"))
    c = torch.empty((m, n), device="cuda", dtype={"fp32": torch.float32, "fp16": torch.float16, "int32": torch.int32}[acc])
    grid = (triton_cdiv(m, bm), triton_cdiv(n, bn))
    matmul[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                 BM=bm, BN=bn, BK=bk, TRANS_B=layout == "trans", PRECISION=precision,
                 ACC={"fp32": tl.float32, "fp16": tl.float16, "int32": tl.int32}[acc], num_warps=warps)
    if dtype == "int8":
        torch.testing.assert_close(c.cpu(), (a.cpu().long() @ b.cpu().long()).int(), rtol=0, atol=0)  # no int matmul on CUDA
        return
    expected = a.double() @ b.double()
    if precision == "tf32":
        expected = _tf32(torch, a).double() @ _tf32(torch, b).double()
    tol = TOL[dtype if dtype != "fp32" else precision]
    torch.testing.assert_close(c.double(), expected, rtol=tol, atol=tol * k ** 0.5)


def _tf32(torch: Any, x: Any) -> Any:
    bits = (x.contiguous().view(torch.int32) + 0x1000) & ~0x1FFF
    return bits.view(torch.float32)


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)



@despina.jit
def tutorial_matmul(a_ptr, b_ptr, c_ptr, M, N, K, s_am, s_ak, s_bk, s_bn, s_cm, s_cn,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, LOOP_STAGES: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    ram = tl.max_contiguous(tl.multiple_of(rm % M, BM), BM)
    rbn = tl.max_contiguous(tl.multiple_of(rn % N, BN), BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + ram[:, None] * s_am + rk[None, :] * s_ak
    b_ptrs = b_ptr + rk[:, None] * s_bk + rbn[None, :] * s_bn
    acc = tl.zeros((BM, BN), tl.float32)
    for k in tl.range(0, tl.cdiv(K, BK), num_stages=LOOP_STAGES):
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * s_ak
        b_ptrs += BK * s_bk
    c = acc.to(c_ptr.dtype.element_ty)
    tl.store(c_ptr + rm[:, None] * s_cm + rn[None, :] * s_cn, c, mask=(rm[:, None] < M) & (rn[None, :] < N))


# (M, N, K), (BM, BN, BK), warps: ragged M and N, K a multiple of 16 but not of BK, one K step only,
# fewer K steps than stages
PIPELINED = [
    ((256, 256, 256), (128, 128, 64), 8),
    ((200, 136, 208), (128, 128, 64), 8),
    ((256, 512, 320), (128, 256, 64), 8),
    ((96, 80, 48), (64, 64, 32), 4),
    ((64, 64, 32), (64, 64, 32), 4),
]


@pytest.mark.parametrize("stages", [1, 2, 3, 4])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("case", PIPELINED, ids=lambda c: f"{'x'.join(map(str, c[0]))}-b{'x'.join(map(str, c[1]))}")
def test_pipelined_matmul_matches_torch(torch_cuda: Any, case: tuple[Any, ...], dtype: str, stages: int) -> None:
    """The tutorial loop, its loads copied asynchronously `stages - 1` iterations ahead (the
    kernel's num_stages, and the loop's own through tl.range), against torch."""
    torch = torch_cuda
    (m, n, k), (bm, bn, bk), warps = case
    a = _operand(torch, dtype, (m, k), 1, False)
    b = _operand(torch, dtype, (k, n), 2, False)
    expected = a.double() @ b.double()
    grid = (triton_cdiv(m, bm), triton_cdiv(n, bn))
    for loop_stages, kernel_stages in ((None, stages), (stages, 1)):
        c = torch.zeros((m, n), device="cuda", dtype=a.dtype)
        tutorial_matmul[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                              c.stride(1), BM=bm, BN=bn, BK=bk, LOOP_STAGES=loop_stages, num_warps=warps,
                              num_stages=kernel_stages)
        tol = TOL[dtype]
        torch.testing.assert_close(c.double(), expected, rtol=tol, atol=tol * k ** 0.5)


@despina.jit
def matmul_counting_rows(a_ptr, b_ptr, c_ptr, n_ptr, K, BK: tl.constexpr):
    """The loop also needs the pipelined loads' mask for itself (it counts the K elements read)."""
    r, rk = tl.arange(0, 64), tl.arange(0, BK)
    a_ptrs = a_ptr + r[:, None] * K + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * 64 + r[None, :]
    acc = tl.zeros((64, 64), tl.float32)
    count = 0
    for k in range(0, tl.cdiv(K, BK)):
        in_k = rk < K - k * BK
        a = tl.load(a_ptrs, mask=in_k[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=in_k[:, None], other=0.0)
        acc = tl.dot(a, b, acc)
        count += tl.sum(in_k.to(tl.int32), axis=0)
        a_ptrs += BK
        b_ptrs += BK * 64
    tl.store(c_ptr + r[:, None] * 64 + r[None, :], acc)
    tl.store(n_ptr, count)


def test_pipelined_loop_that_uses_the_mask_itself(torch_cuda: Any) -> None:
    torch = torch_cuda
    k = 208
    a = torch.randn((64, k), device="cuda", dtype=torch.float16)
    b = torch.randn((k, 64), device="cuda", dtype=torch.float16)
    c = torch.empty((64, 64), device="cuda", dtype=torch.float32)
    n = torch.zeros(1, device="cuda", dtype=torch.int32)
    matmul_counting_rows[(1,)](a, b, c, n, k, BK=64, num_warps=4, num_stages=3)
    assert int(n.item()) == k
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-2, atol=1e-2 * k ** 0.5)
