"""Cheap tiles (an `arange`, a tile constant, the splat of a scalar) made again for each reader after the first
(gpuir/remat.py), so that a tile two readers need in different layouts reaches neither through a conversion;
where the copies land in one layout, the PTX is what one tile gives."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import benchmark_kernels
import pytest

pytest.importorskip("llvmlite")

import despina  # noqa: E402
import despina.language as tl  # noqa: E402
from despina.compiler.backends.gpuir.remat import rematerialize  # noqa: E402
from despina.compiler.ir.core import Op  # noqa: E402
from despina.compiler.ir.parser import parse_module  # noqa: E402


@despina.jit
def rows_and_columns(x_ptr, out_ptr, n, B: tl.constexpr):
    """out = the sum over k < n of the B x B blocks of x; one arange gives the rows and the columns."""
    r = tl.arange(0, B)
    acc = tl.zeros((B, B), tl.float32)
    for k in range(n):
        acc += tl.load(x_ptr + k * B * B + r[:, None] * B + r[None, :])
    tl.store(out_ptr + r[:, None] * B + r[None, :], acc)


def _module(kernel, signature: str, consts: dict) -> object:
    return parse_module(despina.compile(kernel, signature, consts, num_warps=4, target="sm_80").asm["ir"])


def test_each_reader_after_the_first_gets_a_copy_in_its_own_block() -> None:
    module = _module(rows_and_columns, "*fp32:16,*fp32:16,i32", {"B": 32})
    fn = module.kernel
    aranges = [op for op in fn.walk() if op.name == "arange"]
    assert len(aranges) == 1  # the frontend's one tile, read in the loop and after it
    readers = [op for op in fn.walk() if any(v is aranges[0].result for v in op.operands)]
    assert len(readers) >= 3
    rematerialize(fn)
    made = [op for op in fn.walk() if op.name == "arange"]
    assert len(made) == len(readers)
    for op in fn.walk():
        for region in op.regions:  # a copy sits in the block of its reader, right before it
            for i, inner in enumerate(region.ops):
                if inner.name == "arange":
                    user = region.ops[i + 1]
                    assert any(v is inner.result for v in user.operands)
    assert all(sum(1 for u in fn.walk() if any(v is a.result for v in u.operands)) == 1 for a in made)


def test_an_op_reading_a_tile_twice_reads_one_copy() -> None:
    module = _module(rows_and_columns, "*fp32:16,*fp32:16,i32", {"B": 32})
    fn = module.kernel
    arange = next(op for op in fn.walk() if op.name == "arange")
    twice = Op("add", [arange.result, arange.result], [arange.result.type], {}, (), arange.loc)
    fn.body.ops.insert(len(fn.body.ops) - 1, twice)  # the last reader, before the terminator
    rematerialize(fn)
    assert twice.operands[0] is twice.operands[1]
    assert twice.operands[0] is not arange.result


def test_tutorial_09_s_pointer_kernel_converts_no_offsets_in_its_fused_loop() -> None:
    """Its row and column offsets come from one `arange` (BLOCK_M = BLOCK_N), carried through the fused loop;
    shared, one of them met the other's layout through shared memory on every K step (4 CTA barriers)."""
    kernel = benchmark_kernels.load(Path(tempfile.mkdtemp())).matmul_persistent_kernel
    signature = "*fp16:16,*fp16:16,*fp16:16,i32:16,i32:16,i32:16,i32:16,i32:1,i32:16,i32:1,i32:16,i32:1"
    consts = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8, "NUM_SMS": 132}
    for target in ("sm_90a", "sm_80"):
        k = despina.compile(kernel, signature, consts, num_warps=8, num_stages=3, target=target)
        converted = re.findall(r"convert_layout\(%\d+\) : tile<([^>]*)>", k.asm["gpuir"])
        assert converted and all(t.endswith("fp16") for t in converted), converted
        assert k.metadata["spill_stores"] == 0
