"""`c + tl.dot(a, b)` accumulates into `c` (gpuir/combine.py) when the product has no other use."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("llvmlite")

import despina  # noqa: E402
import despina.language as tl  # noqa: E402


@despina.jit
def add_a_product(a_ptr, b_ptr, c_ptr, out_ptr, TWICE: tl.constexpr):
    i = tl.arange(0, 32)
    a = tl.load(a_ptr + i[:, None] * 32 + i[None, :])
    b = tl.load(b_ptr + i[:, None] * 32 + i[None, :])
    c = tl.load(c_ptr + i[:, None] * 32 + i[None, :])
    d = tl.dot(a, b)
    r = c + d
    if TWICE:
        r = r + d
    tl.store(out_ptr + i[:, None] * 32 + i[None, :], r)


def _gpuir(twice: bool) -> str:
    k = despina.compile(add_a_product, "*fp16:16,*fp16:16,*fp32:16,*fp32:16", {"TWICE": twice}, target="sm_80")
    return str(k.asm["gpuir"])


def _dot_accumulator(gpuir: str) -> str:
    (acc,) = re.findall(r"= dot\(%\d+, %\d+, (%\d+)\)", gpuir)
    (owner,) = re.findall(rf"^\s*{acc} = (\w+)\(", gpuir, re.M)
    return owner


def test_the_product_accumulates_into_the_added_tile() -> None:
    gpuir = _gpuir(False)
    assert _dot_accumulator(gpuir) != "constant"  # c (through its conversion), not zeros
    assert not re.search(r"= add\(.*tile<32x32xfp32>", gpuir)


def test_a_product_used_twice_stays_apart() -> None:
    gpuir = _gpuir(True)
    assert _dot_accumulator(gpuir) == "constant"
    assert len(re.findall(r"= add\(.*tile<32x32xfp32>", gpuir)) == 2
