"""The tutorial matmul pipelined (cp.async ring, ldmatrix or element reads) on tf32 and int8
operands against torch: the 8- and 32-bit reads of the ring (lower/ldmatrix.py), with ragged M and N,
K not a multiple of BLOCK_K, and fewer K steps than stages."""

from __future__ import annotations

from typing import Any

import pytest

import despina
import despina.language as tl


@despina.jit
def tutorial_matmul(a_ptr, b_ptr, c_ptr, M, N, K, s_am, s_ak, s_bk, s_bn, s_cm, s_cn,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, ACC: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    ram = tl.max_contiguous(tl.multiple_of(rm % M, BM), BM)
    rbn = tl.max_contiguous(tl.multiple_of(rn % N, BN), BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + ram[:, None] * s_am + rk[None, :] * s_ak
    b_ptrs = b_ptr + rk[:, None] * s_bk + rbn[None, :] * s_bn
    acc = tl.zeros((BM, BN), ACC)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BK, other=0)
        b = tl.load(b_ptrs, mask=rk[:, None] < K - k * BK, other=0)
        acc = tl.dot(a, b, acc, out_dtype=ACC)
        a_ptrs += BK * s_ak
        b_ptrs += BK * s_bk
    tl.store(c_ptr + rm[:, None] * s_cm + rn[None, :] * s_cn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


# (M, N, K), (BM, BN, BK), warps
CASES = {
    "tf32": [((256, 256, 256), (128, 128, 32), 8), ((200, 136, 208), (128, 128, 32), 8), ((96, 80, 48), (64, 64, 32), 4)],
    "int8": [((256, 256, 512), (128, 128, 64), 8), ((200, 136, 208), (128, 256, 64), 8), ((96, 80, 96), (64, 64, 64), 4)],
}
SIG = {"tf32": "*fp32:16,*fp32:16,*fp32:16", "int8": "*i8:16,*i8:16,*i32:16"}


@pytest.mark.parametrize("stages", [2, 3, 4])
@pytest.mark.parametrize("case", [(d, c) for d, cases in CASES.items() for c in cases],
                         ids=lambda c: f"{c[0]}-{'x'.join(map(str, c[1][0]))}-b{'x'.join(map(str, c[1][1]))}")
def test_pipelined_tf32_and_int8_match_torch(torch_cuda: Any, case: tuple[str, Any], stages: int) -> None:
    torch = torch_cuda
    dtype, ((m, n, k), (bm, bn, bk), warps) = case
    g = torch.Generator(device="cuda").manual_seed(7)
    if dtype == "int8":
        a, b = (torch.randint(-128, 128, s, generator=g, device="cuda", dtype=torch.int8) for s in ((m, k), (k, n)))
        c = torch.zeros((m, n), device="cuda", dtype=torch.int32)
    else:
        a, b = (torch.randn(s, generator=g, device="cuda") for s in ((m, k), (k, n)))
        c = torch.zeros((m, n), device="cuda", dtype=torch.float32)
    acc = tl.int32 if dtype == "int8" else tl.float32
    consts = {"BM": bm, "BN": bn, "BK": bk, "ACC": acc}
    ints = (m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    sig = ",".join([SIG[dtype], *(_spec(x) for x in ints)])  # as the launch specializes them
    plan = despina.compile(tutorial_matmul, sig, consts, num_warps=warps, num_stages=stages, target="sm_80")
    assert "cp.async.cg.shared.global" in plan.asm["ptx"], "the test must exercise the pipelined loop"
    grid = (-(-m // bm), -(-n // bn))
    tutorial_matmul[grid](a, b, c, *ints, num_warps=warps, num_stages=stages, **consts)
    if dtype == "int8":
        torch.testing.assert_close(c.cpu(), (a.cpu().long() @ b.cpu().long()).int(), rtol=0, atol=0)
        return
    expected = _tf32(torch, a).double() @ _tf32(torch, b).double()  # cvt.rna: both operands rounded, products exact
    torch.testing.assert_close(c.double(), expected, rtol=1e-4, atol=1e-4 * k ** 0.5)


def _spec(x: int) -> str:
    return "i32:1" if x == 1 else "i32:16" if x % 16 == 0 else "i32"


def _tf32(torch: Any, x: Any) -> Any:
    bits = (x.contiguous().view(torch.int32) + 0x1000) & ~0x1FFF
    return bits.view(torch.float32)
