"""Float constants beyond their type's range: rounded to infinity as a cast rounds them, on the GPU as
in the interpreter (the backend used to crash packing them: OverflowError)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

import despina  # noqa: E402
import despina.language as tl  # noqa: E402


@despina.jit
def fill_kernel(h_ptr, f_ptr, BIG: tl.constexpr):
    offs = tl.arange(0, 128)
    tl.store(h_ptr + offs, tl.full((128,), BIG, tl.float16))
    tl.store(f_ptr + offs, tl.full((128,), -BIG, tl.float32) * 1e35)


def test_out_of_range_constants_are_infinities_in_the_ptx_and_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    k = despina.compile(fill_kernel, signature={"h_ptr": "*fp16", "f_ptr": "*fp32"}, constexprs={"BIG": 70000.0},
                        target="sm_90")
    moves = [line.split(",")[-1].strip(" ;") for line in k.asm["ptx"].splitlines() if "mov." in line]
    assert "31744" in moves or "0x7C00" in moves, moves  # fp16 +inf
    h, f = np.zeros(128, np.float16), np.zeros(128, np.float32)
    monkeypatch.setenv("DESPINA_INTERPRET", "1")
    fill_kernel[(1,)](h, f, BIG=70000.0)
    assert np.all(np.isposinf(h)) and np.all(np.isneginf(f))
