"""Private address computations (gpuir/coalesce.py): two loads that share index tiles each take
the coalesced layout of their own memory order, and the copies leave the kernel's own unused ops
alone. Leaves (an `arange`, a tile constant, the splat of a scalar) are made again for each reader after the
first, so that a tile two readers need in different layouts reaches neither through a conversion."""

from __future__ import annotations

import re

import benchmark_kernels
import pytest

pytest.importorskip("llvmlite")

import despina  # noqa: E402
import despina.language as tl  # noqa: E402
from despina.compiler.backends.gpuir.coalesce import private_leaves  # noqa: E402
from despina.compiler.ir.core import Op  # noqa: E402
from despina.compiler.ir.parser import parse_module  # noqa: E402


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
    private_leaves(fn)
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
    private_leaves(fn)
    assert twice.operands[0] is twice.operands[1]
    assert twice.operands[0] is not arange.result


def test_tutorial_09_s_pointer_kernel_converts_no_offsets_in_its_fused_loop() -> None:
    """Its row and column offsets come from one `arange` (BLOCK_M = BLOCK_N), carried through the fused loop;
    shared, one of them met the other's layout through shared memory on every K step (4 CTA barriers)."""
    kernel = benchmark_kernels.load().matmul_persistent_kernel
    signature = "*fp16:16,*fp16:16,*fp16:16,i32:16,i32:16,i32:16,i32:16,i32:1,i32:16,i32:1,i32:16,i32:1"
    consts = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8, "NUM_SMS": 132}
    for target in ("sm_90a", "sm_80"):
        k = despina.compile(kernel, signature, consts, num_warps=8, num_stages=3, target=target)
        converted = re.findall(r"convert_layout\(%\d+\) : tile<([^>]*)>", k.asm["gpuir"])
        assert converted and all(t.endswith("fp16") for t in converted), converted
        assert k.metadata["spill_stores"] == 0
