"""A loop-invariant dot operand is converted once, before the loop (gpuir/hoist.py)."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("llvmlite")

import despina  # noqa: E402
import despina.language as tl  # noqa: E402


@despina.jit
def invariant_a(a_ptr, b_ptr, out_ptr, n):
    i = tl.arange(0, 32)
    a = tl.load(a_ptr + i[:, None] * 32 + i[None, :])
    acc = tl.zeros((32, 32), tl.float32)
    for k in range(0, n):
        b = tl.load(b_ptr + k * 1024 + i[:, None] * 32 + i[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(out_ptr + i[:, None] * 32 + i[None, :], acc)


def test_the_invariant_operand_is_converted_before_the_loop() -> None:
    k = despina.compile(invariant_a, "*fp16:16,*fp16:16,*fp32:16,i32", {}, num_warps=4, target="sm_80")
    gpuir = k.asm["gpuir"]
    layouts = dict(re.findall(r"^(#L\d+) = (.*)$", gpuir, re.M))
    loop = gpuir.index("= for(")
    before = re.findall(r"= convert_layout\(.*(#L\d+)$", gpuir[:loop], re.M)
    assert [layouts[x].split(",")[0] for x in before] == ["dot_op<0"]
    assert gpuir[loop : gpuir.index("\n  ) :", loop)].count("convert_layout(") == 1  # B's, loaded in the loop
    ptx = k.asm["ptx"]
    body = ptx[ptx.index("cp.async.wait_group") :]
    assert "st.shared" not in body[: body.index("bra")]  # A is not stored again in each iteration
