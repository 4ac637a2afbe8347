"""Private address computations (gpuir/coalesce.py): two loads that share index tiles each take
the coalesced layout of their own memory order, and the copies leave the kernel's own unused ops
alone."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("llvmlite")

import despina  # noqa: E402
import despina.language as tl  # noqa: E402


@despina.jit
def straight_and_transposed(x_ptr, y_ptr, out_ptr):
    i = tl.arange(0, 64)
    a = tl.load(x_ptr + i[:, None] * 64 + i[None, :])  # contiguous along dimension 1
    b = tl.load(y_ptr + i[:, None] + i[None, :] * 64)  # read transposed: contiguous along dimension 0
    tl.store(out_ptr + i[:, None] * 64 + i[None, :], a + b)


def _layouts(gpuir: str) -> dict[str, str]:
    return dict(re.findall(r"^(#L\d+) = (.*)$", gpuir, re.M))


def test_each_load_reads_along_its_own_contiguous_dimension() -> None:
    k = despina.compile(straight_and_transposed, "*fp32:16,*fp32:16,*fp32:16", {}, num_warps=4, target="sm_80")
    gpuir = k.asm["gpuir"]
    layouts = _layouts(gpuir)
    loads = re.findall(r"= load\(.*(#L\d+)$", gpuir, re.M)
    assert [layouts[x] for x in loads] == [
        "blocked<spt=[1, 4], tpw=[2, 16], wpc=[4, 1], order=[1, 0]>",
        "blocked<spt=[4, 1], tpw=[16, 2], wpc=[1, 4], order=[0, 1]>",
    ]
    assert gpuir.count("convert_layout(") == 1  # `a + b` meets them once
    assert "ld.global.v4.b32" in k.asm["ptx"] and "ld.global.b32" not in k.asm["ptx"]


@despina.jit
def masked_histogram(x_ptr, out_ptr):
    offs = tl.arange(0, 512)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + tl.arange(0, 256), tl.histogram(x, 256, mask=offs % 3 != 0))


def test_a_histogram_reads_its_values_and_mask_in_one_layout() -> None:
    """The mask no longer shares the load's address class, so it took the default layout while the
    values took the load's 16-byte one; the lowering pairs them register by register (GPU: wrong counts)."""
    k = despina.compile(masked_histogram, "*u8:16,*i32:16", {}, num_warps=4, target="sm_80")
    gpuir = k.asm["gpuir"]
    (x, mask) = re.findall(r"= histogram\((%\d+), (%\d+)\)", gpuir)[0]
    layout = {v: enc for v, enc in re.findall(r"^\s*(%\d+) = .*(#L\d+)$", gpuir, re.M)}
    assert layout[x] == layout[mask]
