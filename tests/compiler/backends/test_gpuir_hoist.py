"""A loop-invariant dot operand is converted once, before the loop, or kept in a shared-memory
buffer (`local_alloc` before the loop, `local_load` in it) when it is a 16-bit mma.sync operand
(gpuir/hoist.py), one buffer for loops one after another; buffers take shared layouts, and only `local_load` reads them (`local_store`, which
writes one, is tested with gpuir/staging.py)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

pytest.importorskip("llvmlite")

import despina  # noqa: E402
import despina.language as tl  # noqa: E402
from despina.compiler.backends.errors import BackendError  # noqa: E402
from despina.compiler.backends.gpuir.assign import GpuFunction  # noqa: E402
from despina.compiler.backends.gpuir.encodings import Blocked  # noqa: E402
from despina.compiler.backends.gpuir.passes import build_gpuir  # noqa: E402
from despina.compiler.backends.gpuir.verifier import GpuIRError, verify_gpuir  # noqa: E402
from despina.compiler.ir.core import Op  # noqa: E402
from despina.compiler.ir.parser import parse_module  # noqa: E402
from despina.compiler.ir.types import BufferType, TileType  # noqa: E402
from despina.compiler.ir.verifier import VerificationError, verify  # noqa: E402
from despina.compiler.options import CompileOptions  # noqa: E402

from .nvptx.loops import pipelined_loop  # noqa: E402


@despina.jit
def invariant_a(a_ptr, b_ptr, out_ptr, n):
    i = tl.arange(0, 32)
    a = tl.load(a_ptr + i[:, None] * 32 + i[None, :])
    acc = tl.zeros((32, 32), tl.float32)
    for k in range(0, n):
        b = tl.load(b_ptr + k * 1024 + i[:, None] * 32 + i[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(out_ptr + i[:, None] * 32 + i[None, :], acc)


def test_the_invariant_operand_is_stored_in_shared_memory_before_the_loop() -> None:
    k = despina.compile(invariant_a, "*fp16:16,*fp16:16,*fp32:16,i32", {}, num_warps=4, target="sm_80")
    gpuir = k.asm["gpuir"]
    layouts = dict(re.findall(r"^(#L\d+) = (.*)$", gpuir, re.M))
    loop = gpuir.index("= for(")
    body = gpuir[loop : gpuir.index("\n  ) :", loop)]
    (alloc,) = re.findall(r"^  (%\d+) = local_alloc\(%\d+\) : shared<32x32xfp16> (#L\d+)$", gpuir[:loop], re.M)
    assert layouts[alloc[1]] == "swizzled_shared<vec=8, perPhase=2, maxPhase=4, order=[1, 0]>"
    assert "convert_layout(" not in gpuir[:loop]
    (read,) = re.findall(rf"= local_load\({alloc[0]}\) : tile<32x32xfp16> (#L\d+)$", body, re.M)
    assert layouts[read].startswith("dot_op<0, parent=mma<v2")
    assert body.count("convert_layout(") == 1  # B's, loaded in the loop
    ptx = k.asm["ptx"]
    assert "st.shared" not in pipelined_loop(ptx)  # A is not stored again in each iteration


@despina.jit
def two_stages(q_ptr, k_ptr, out_ptr, n, SPLIT: tl.constexpr):
    """Tutorial 06's causal form: one loop over the blocks before the diagonal, another over the rest, both
    multiplying the same Q (with SPLIT, the second loop multiplies a tile of its own instead)."""
    i = tl.arange(0, 64)
    q = tl.load(q_ptr + i[:, None] * 64 + i[None, :])
    acc = tl.zeros((64, 64), tl.float32)
    for j in range(0, n):
        acc = tl.dot(q, tl.load(k_ptr + j * 4096 + i[:, None] * 64 + i[None, :]), acc)
    other = tl.load(q_ptr + 4096 + i[:, None] * 64 + i[None, :]) if SPLIT else q
    for j in range(n, 2 * n):
        acc = tl.dot(other, tl.load(k_ptr + j * 4096 + i[:, None] * 64 + i[None, :]), acc)
    tl.store(out_ptr + i[:, None] * 64 + i[None, :], acc)


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_loops_one_after_another_read_one_buffer_of_the_same_invariant(target: str) -> None:
    """Q is stored once, before the first loop; the second loop reads that buffer (a buffer is never written
    after its local_alloc). Each loop storing its own copy took 32 KiB more of a 128x128 fp16 Q: tutorial 06's
    causal form at d128, 128x128 blocks and 2 stages, needed 262168 bytes of shared memory, past the limit."""
    sig = "*fp16:16,*fp16:16,*fp32:16,i32"
    one = despina.compile(two_stages, sig, {"SPLIT": False}, num_warps=4, num_stages=2, target=target)
    gpuir = one.asm["gpuir"]
    (alloc,) = re.findall(r"^  (%\d+) = local_alloc\(", gpuir, re.M)
    assert len(re.findall(rf"= local_load\({alloc}\)", gpuir)) == 2
    two = despina.compile(two_stages, sig, {"SPLIT": True}, num_warps=4, num_stages=2, target=target)
    assert two.asm["gpuir"].count("local_alloc(") == 2  # different tiles keep their own buffers
    assert one.metadata["shared"] < two.metadata["shared"]


def _buffered() -> tuple[GpuFunction, Op, Op]:
    """The GPU IR of `invariant_a` for sm_80, its `local_alloc` and its `local_load`."""
    k = despina.compile(invariant_a, "*fp16:16,*fp16:16,*fp32:16,i32", {}, num_warps=4, target="sm_80")
    gpu = build_gpuir(parse_module(k.asm["ir"]), CompileOptions(num_warps=4))
    ops = list(gpu.fn.walk())
    return gpu, next(o for o in ops if o.name == "local_alloc"), next(o for o in ops if o.name == "local_load")


def test_a_buffer_takes_a_shared_layout() -> None:
    gpu, alloc, _ = _buffered()
    alloc.result.type = replace(alloc.result.type, encoding=Blocked((1, 1), (8, 4), (2, 2), (1, 0)))
    with pytest.raises(GpuIRError, match=r"op 'local_alloc'.*: result 0 shared<32x32xfp16, blocked<.*>> names no "
                                         "shared-memory layout"):
        verify_gpuir(gpu)


def test_only_local_load_and_local_store_take_a_buffer() -> None:
    gpu, alloc, read = _buffered()
    read.name = "convert_layout"
    with pytest.raises(GpuIRError, match="op 'convert_layout'.*: only local_load and local_store take a "
                                         "shared-memory buffer"):
        verify_gpuir(gpu)


def test_a_buffer_is_read_only_into_a_tensor_core_operand() -> None:
    from despina.compiler.backends.nvptx.lower import lower
    from despina.compiler.backends.nvptx.target import get_target

    gpu, alloc, read = _buffered()
    read.result.type = replace(read.result.type, encoding=Blocked((1, 1), (8, 4), (2, 2), (1, 0)))
    with pytest.raises(BackendError, match=r"op 'local_load': a shared-memory buffer is read only into a tensor-core "
                                           r"operand \(a 16-bit one by ldmatrix, a wgmma one from swizzle atoms\)"):
        lower(gpu, get_target("sm_80"))


def test_the_tile_ir_has_no_buffers() -> None:
    k = despina.compile(invariant_a, "*fp16:16,*fp16:16,*fp32:16,i32", {}, num_warps=4, target="sm_80")
    module = parse_module(k.asm["ir"])
    load = next(op for op in module.kernel.walk() if op.name == "load")
    ty = load.result.type
    assert isinstance(ty, TileType)
    load.result.type = BufferType(ty.shape, ty.element_ty)
    with pytest.raises(VerificationError, match=r"shared<32x32xfp16> is a shared-memory buffer: buffers exist only "
                                                 "in the GPU IR"):
        verify(module)
