"""The benchmark's pointer matmuls (tutorial 03 plain and as Triton ships it, tutorial 09's persistent pointer
kernel) on a compute-capability-9.0 device against torch, over a seeded sweep of shapes, element types, configs
and operand views: contiguous, transposed, rows padded (to a multiple of 16 bytes, and not), and views starting
1 or 8 elements into their buffer (a base 2 bytes off 16, and one 16 bytes in). Each view decides what its
signature specializes (strides `:16` or 1, pointers `:16`), hence whether TMA, versioned loops or cp.async copy
the operands; whichever the compiler takes, the product must be torch's."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import benchmark_kernels
import pytest

import despina

from .test_dot import TORCH
from .test_pointer_tiles import hopper  # noqa: F401 (fixture)

VIEWS = ("contiguous", "transposed", "padded16", "padded3", "offset1", "offset8")
CONFIGS = ((128, 128, 64, 8, 3), (128, 256, 64, 8, 3), (128, 128, 64, 4, 4), (64, 128, 32, 4, 3))
KERNELS = ("matmul_kernel", "matmul_grouped_kernel", "matmul_persistent_kernel")


def _size(rng: random.Random) -> int:
    """Half the sizes a multiple of 16 (what TMA's strides need), half anything up to 700."""
    return rng.randrange(16, 704, 16) if rng.random() < 0.5 else rng.randrange(1, 701)


def _cases() -> list[tuple[Any, ...]]:
    rng = random.Random(20261128)
    cases = []
    for kernel in KERNELS:
        for _ in range(14):
            mnk = (_size(rng), _size(rng), _size(rng))
            cases.append((kernel, rng.choice(("fp16", "bf16")), mnk, rng.choice(CONFIGS), rng.choice(VIEWS),
                          rng.choice(VIEWS), rng.random() < 0.25))
    return cases


def _view(torch: Any, dtype: str, rows: int, cols: int, view: str, seed: int) -> Any:
    """A rows x cols operand laid out as `view` says, every element of its buffer random (what reads past the
    view find)."""
    g = torch.Generator(device="cuda").manual_seed(seed)

    def buffer(*shape: int) -> Any:
        return torch.randn(*shape, generator=g, device="cuda", dtype=torch.float32).to(getattr(torch, TORCH[dtype]))

    if view == "transposed":
        return buffer(cols, rows).t()
    if view.startswith("padded"):
        return buffer(rows, cols + int(view[len("padded"):]))[:, :cols]
    if view.startswith("offset"):
        skip = int(view[len("offset"):])
        return buffer(rows * cols + skip)[skip:].view(rows, cols)
    return buffer(rows, cols)


@pytest.mark.parametrize("case", _cases(), ids=lambda c: f"{c[0]}-{c[1]}-{'x'.join(map(str, c[2]))}"
                         f"-b{'x'.join(map(str, c[3][:3]))}w{c[3][3]}s{c[3][4]}-a_{c[4]}-b_{c[5]}{'-ct' if c[6] else ''}")
def test_the_pointer_matmuls_match_torch_on_any_view(hopper: Any, tmp_path: Path, case: tuple[Any, ...]) -> None:  # noqa: F811
    torch = hopper
    name, dtype, (m, n, k), (bm, bn, bk, warps, stages), a_view, b_view, c_transposed = case
    a, b = _view(torch, dtype, m, k, a_view, 1), _view(torch, dtype, k, n, b_view, 2)
    c = torch.full((n, m) if c_transposed else (m, n), float("nan"), device="cuda", dtype=torch.float16)
    c = c.t() if c_transposed else c
    kernel = getattr(benchmark_kernels.load(tmp_path), name)
    args = (a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    consts = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}
    tiles = despina.cdiv(m, bm) * despina.cdiv(n, bn)
    if name == "matmul_kernel":
        grid: tuple[int, ...] = (despina.cdiv(m, bm), despina.cdiv(n, bn))
    elif name == "matmul_grouped_kernel":
        grid, consts["GROUP_M"] = (tiles,), 8
    else:
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        grid, consts["GROUP_SIZE_M"], consts["NUM_SMS"] = (min(sms, tiles),), 8, sms
    kernel[grid](*args, **consts, num_warps=warps, num_stages=stages)
    tol = 1e-2 if dtype == "fp16" else 3e-2
    want = (a.double() @ b.double()).half().double()
    torch.testing.assert_close(c.double(), want, rtol=tol, atol=tol * k**0.5)
