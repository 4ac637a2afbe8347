"""fp8 on the GPU against torch: conversions (`x.to(tl.float8e4nv)` as torch's `.to(torch.float8_e4m3fn)`
and back, on the device's target and on sm_80 code, which widens fp8 in integer arithmetic) and
`tl.dot` of fp8 tiles (wgmma k32 on a compute-capability-9.0 device) with every operand layout,
ragged shapes and both formats. The fp8 language suite (tests/language/test_fp8.py) runs here too,
through test_language.py."""

from __future__ import annotations

from typing import Any

import pytest

import despina
import despina.language as tl

from .test_dot import matmul, triton_cdiv

FORMATS = {"fp8e4nv": "float8_e4m3fn", "fp8e5": "float8_e5m2"}


@despina.jit
def convert_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n).to(out_ptr.dtype.element_ty), mask=offs < n)


def _convert(x: Any, out: Any) -> None:
    convert_kernel[(triton_cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("src", ["float32", "float16", "bfloat16"])
def test_conversions_match_torch(torch_cuda: Any, gpu_device: Any, fmt: str, src: str) -> None:
    torch = torch_cuda
    if gpu_device.capability < (8, 9):
        pytest.skip("converting to fp8 needs sm_89 or later")
    fp8 = getattr(torch, FORMATS[fmt])
    g = torch.Generator(device="cuda").manual_seed(0)
    x = (torch.randn(10_000, generator=g, device="cuda") * torch.exp2(torch.randint(-20, 18, (10_000,), device="cuda",
                                                                                       generator=g))).to(getattr(torch, src))
    top = torch.finfo(fp8).max
    x[:4] = torch.tensor([float("inf"), -float("inf"), 2 * top, -3 * top])
    out = torch.empty(x.shape, device="cuda", dtype=fp8)
    _convert(x, out)
    # torch saturates nothing (values beyond the range become NaN or inf); cvt.rn.satfinite clamps them.
    want = x.float().clamp(-top, top).to(fp8)
    assert torch.equal(out.view(torch.uint8), want.view(torch.uint8))
    back = torch.empty(x.shape, device="cuda", dtype=getattr(torch, src))
    _convert(out, back)
    assert torch.equal(back, out.to(getattr(torch, src)))


@pytest.mark.parametrize("fmt", FORMATS)
def test_sm80_code_widens_every_bit_pattern(torch_cuda: Any, gpu_device: Any, monkeypatch: pytest.MonkeyPatch,
                                            fresh_cache: Any, fmt: str) -> None:
    """Code generated for sm_80, which widens fp8 in integer arithmetic, run on this device: its PTX
    linked for the device's own target (an sm_80 cubin runs on compute capability 8.x only)."""
    from dataclasses import replace

    from despina.compiler.backends.nvptx.link import link_cubin
    from despina.runtime import kernels

    torch = torch_cuda
    real = kernels.compile_binary
    ptx: list[str] = []

    def sm80_code(module: Any, options: Any, target: str) -> Any:
        binary = real(module, options, "sm_80")
        ptx.append(binary.asm["ptx"])
        return replace(binary, cubin=link_cubin(binary.asm["ptx"], target)[0])

    monkeypatch.setattr(kernels, "compile_binary", sm80_code)
    widen = despina.jit(convert_kernel.fn)  # a kernel of its own: no launcher loaded by another test
    bits = torch.arange(256, device="cuda", dtype=torch.int32).to(torch.uint8)
    fp8 = bits.view(getattr(torch, FORMATS[fmt]))
    for dst in (torch.float16, torch.float32, torch.bfloat16):
        out = torch.empty(256, device="cuda", dtype=dst)
        widen[(1,)](fp8, out, 256, BLOCK=256)
        torch.testing.assert_close(out, fp8.to(dst), rtol=0, atol=0, equal_nan=True)
    assert len(ptx) == 3 and all(".target sm_80" in p and "e4m3x2" not in p and "e5m2x2" not in p for p in ptx)


# format, (M, N, K), (BM, BN, BK), warps, stages, layout ("nt": B K-major, the layout fp8 wgmma reads
# without a transposition; "nn": B N-major, stored transposed; "tn": A M-major, transposed too)
CASES = [
    ("fp8e4nv", (256, 512, 512), (128, 256, 64), 8, 3, "nt"),
    ("fp8e5", (256, 256, 256), (128, 128, 64), 8, 3, "nt"),
    ("fp8e4nv", (200, 136, 208), (128, 128, 64), 8, 3, "nt"),
    ("fp8e4nv", (256, 256, 256), (128, 128, 128), 8, 3, "nt"),
    ("fp8e4nv", (256, 256, 192), (128, 128, 64), 8, 3, "nn"),
    ("fp8e5", (192, 320, 96), (64, 128, 32), 4, 4, "tn"),
    ("fp8e4nv", (128, 128, 40), (128, 128, 64), 4, 3, "nt"),
    ("fp8e4nv", (128, 128, 64), (64, 64, 16), 4, 2, "nt"),  # BK=16: upcast to fp16
]


def _fp8_operand(torch: Any, fmt: str, shape: tuple[int, int], seed: int, transposed: bool) -> Any:
    if transposed:
        return _fp8_operand(torch, fmt, shape[::-1], seed, False).t()
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(shape, generator=g, device="cuda").to(getattr(torch, FORMATS[fmt]))


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{'x'.join(map(str, c[1]))}-b{'x'.join(map(str, c[2]))}-w{c[3]}-s{c[4]}-{c[5]}")
def test_fp8_dot_matches_torch(torch_cuda: Any, gpu_device: Any, case: tuple[Any, ...]) -> None:
    torch = torch_cuda
    fmt, (m, n, k), (bm, bn, bk), warps, stages, layout = case
    a = _fp8_operand(torch, fmt, (m, k), 1, layout == "tn")
    b = _fp8_operand(torch, fmt, (k, n), 2, layout == "nt")
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    consts = {"BM": bm, "BN": bn, "BK": bk, "TRANS_B": False, "PRECISION": "ieee", "ACC": tl.float32}
    matmul[(triton_cdiv(m, bm), triton_cdiv(n, bn))](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0),
                                                      b.stride(1), c.stride(0), c.stride(1), num_warps=warps,
                                                      num_stages=stages, **consts)
    if gpu_device.capability == (9, 0) and bk >= 32:
        sig = f"*{fmt}:16,*{fmt}:16,*fp32:16," + ",".join(["i32"] * 9)
        planned = despina.compile(matmul, sig, consts, num_warps=warps, num_stages=stages, target="sm_90a")
        assert 'engine = "wgmma.m64n' in [line for line in planned.asm["gpuir"].splitlines() if " dot(" in line][0]
    # Hopper's fp8 tensor cores add each instruction's 32 products in fewer bits than fp32 (about 14:
    # DeepSeek-V3's measurement; Triton's default too): the error is bounded by the magnitudes added,
    # |a| @ |b| (a 256x512x512 case missed a |c|-relative 2e-3 bound by 0.02 at |c| 8, on an H100),
    # where a wrong fragment or a lost K step is off by about |c| itself.
    want = a.double() @ b.double()
    bound = 2.0 ** -10 * (a.double().abs() @ b.double().abs())
    err = (c.double() - want).abs()
    worst = int((err - bound).argmax())
    assert bool((err <= bound).all()), (f"{int((err > bound).sum())} of {c.numel()} elements off; worst at "
                                        f"{divmod(worst, n)}: {c.flatten()[worst].item()} for {want.flatten()[worst].item()}")
