"""Layouts, axis analysis and layout assignment (no LLVM needed)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from despina.compiler.backends.errors import BackendError
from despina.compiler.backends.gpuir import (
    CONVERT,
    Blocked,
    DotOperand,
    Slice,
    assign_layouts,
    coalesced_blocked,
    default_blocked,
    print_gpuir,
)
from despina.compiler.ir.types import PointerType, TileType, float32, int32

from . import kernels
from .kernel_builder import KernelBuilder


def test_blocked_linear_layout_bases() -> None:
    enc = Blocked((4,), (32,), (4,), (0,))
    ll = enc.linear((1024,))
    assert ll.reg == ((1,), (2,), (512,))
    assert ll.lane == ((4,), (8,), (16,), (32,), (64,))
    assert ll.warp == ((128,), (256,))
    assert ll.num_regs == 8
    assert ll.contiguous_regs(0) == 4


def test_blocked_replicates_when_the_tile_is_smaller_than_the_cta() -> None:
    ll = Blocked((1,), (32,), (4,), (0,)).linear((64,))
    assert ll.warp == ((32,), (0,))
    assert ll.warp_free_mask() == 2 and ll.lane_free_mask() == 0


def test_every_element_has_an_owner() -> None:
    enc = Blocked((1, 4), (8, 4), (4, 1), (1, 0))
    ll = enc.linear((32, 16))
    seen = {ll.index(r, lane, w) for r in range(ll.num_regs) for lane in range(32) for w in range(4)}
    assert seen == {(i, j) for i in range(32) for j in range(16)}


def test_slice_of_blocked_projects_the_axis_out() -> None:
    parent = Blocked((1, 4), (8, 4), (4, 1), (1, 0))
    row = Slice(1, parent).linear((32,))
    assert row.reg == ()
    assert row.lane == ((0,), (0,), (1,), (2,), (4,))
    assert row.warp == ((8,), (16,))
    assert parent.linear((32, 16)).project(1) == row


def test_dot_operand_holds_whole_rows() -> None:
    parent = Blocked((1, 4), (8, 4), (4, 1), (1, 0))
    a = DotOperand(0, parent).linear((32, 16))
    assert a.reg[:4] == ((0, 1), (0, 2), (0, 4), (0, 8))
    assert all(b[1] == 0 for b in a.lane + a.warp)


def test_default_and_coalesced_blocked() -> None:
    assert default_blocked((32, 32), 4) == Blocked((1, 1), (1, 32), (4, 1), (1, 0))
    assert coalesced_blocked((1024,), (0,), 4, 4) == Blocked((4,), (32,), (4,), (0,))
    assert coalesced_blocked((128,), (0,), 4, 4).size_per_thread == (1,)


def _ops(gpu, name):  # type: ignore[no-untyped-def]
    return [op for op in gpu.fn.walk() if op.name == name]


def test_axis_analysis_of_vector_add() -> None:
    gpu = assign_layouts(kernels.vector_add(), 4)
    (ptr_x, *_rest) = [op.result for op in _ops(gpu, "addptr")]
    info = gpu.axis.info(ptr_x)
    assert info.contig == (1024,) and info.div == (16,)
    masks = [op.result for op in _ops(gpu, "cmp")]  # one for each access: its private copy (coalesce.py)
    assert len(masks) == 3 and all(gpu.axis.info(m).const == (16,) for m in masks)


def test_unaligned_arguments_give_no_divisibility() -> None:
    gpu = assign_layouts(kernels.vector_add(aligned=False), 4)
    ptr = _ops(gpu, "addptr")[0].result
    assert gpu.axis.info(ptr).div == (4,)
    assert gpu.axis.info(_ops(gpu, "cmp")[0].result).const == (1,)


def test_a_causal_mask_is_no_run_of_equal_values() -> None:
    """`rows[:, None] >= cols[None, :]` changes along both axes. Expand_dims claimed a column's values
    (0, 1, 2, ...) all divisible by 32 along the new axis, so the mask counted as constant over runs of
    32 rows and its registers were shared between rows: causal attention was wrong from row 16 on."""
    k = KernelBuilder("causal", [("y", PointerType(int32))])
    rows = k.bin("add", k.bin("mul", k.program_id(0), 32), k.arange(0, 32))
    cols = k.arange(0, 32)
    below = k.expand(cols, 0)
    mask = k.cmp("ge", k.expand(rows, 1), below)
    k.store(k.ptrs(k["y"], k.bin("add", k.bin("mul", k.expand(rows, 1), 32), below)), k.cast(mask, int32))
    gpu = assign_layouts(k.module(divisibility=[0]), 4)
    row_vectors = [op.result for op in _ops(gpu, "expand_dims") if op.attrs["axis"] == 0]  # the mask's, the store's
    assert len(row_vectors) == 2
    assert all(gpu.axis.info(v).div[0] == 1 for v in row_vectors)  # 0, 1, 2, ... down the new axis: only 1 divides them all
    assert gpu.axis.info(_ops(gpu, "cmp")[0].result).const == (1, 1)


def test_hints_and_equal_to_1() -> None:
    k = KernelBuilder("hints", [("x", int32), ("one", int32)])
    h = k.op("multiple_of", k.op("max_contiguous", k.arange(0, 64), values=[64]), values=[8])
    prod = k.bin("mul", k["x"], k["one"])
    k.void("return")
    module = k.module(equal_to_1=[1], divisibility=[0])
    gpu = assign_layouts(module, 4)
    infos = {op.name: gpu.axis.info(op.result) for op in gpu.fn.walk() if op.results}
    assert infos["multiple_of"].div == (8,) and infos["multiple_of"].contig == (64,)
    assert infos["mul"].div == (16,)
    assert h is not None and prod is not None


def test_vector_add_is_one_coalesced_layout() -> None:
    gpu = assign_layouts(kernels.vector_add(), 4)
    encodings = {v.type.encoding for op in gpu.fn.walk() for v in op.results if isinstance(v.type, TileType)}
    assert encodings == {Blocked((4,), (32,), (4,), (0,))}
    assert not _ops(gpu, CONVERT)


def test_matmul_converts_dot_operands_and_slices_expand_dims() -> None:
    gpu = assign_layouts(kernels.matmul(), 4)
    dot = _ops(gpu, "dot")[0]
    a, b, c = (gpu.encoding(v) for v in dot.operands)
    assert isinstance(a, DotOperand) and a.op_idx == 0 and a.parent == c
    assert isinstance(b, DotOperand) and b.op_idx == 1 and b.parent == c
    for op in _ops(gpu, "expand_dims"):
        enc = gpu.encoding(op.operands[0])
        assert isinstance(enc, Slice) and enc.parent == gpu.encoding(op.result)
    text = print_gpuir(gpu)
    assert "dot_op<0" in text and "convert_layout" in text


def test_reduce_result_is_a_slice() -> None:
    k = KernelBuilder("rowsum", [("x", float32)])
    k.reduce(k.full([16, 64], 1.0, float32), 1, "add")
    gpu = assign_layouts(k.module(), 4)
    (op,) = _ops(gpu, "reduce")
    enc = gpu.encoding(op.result)
    assert isinstance(enc, Slice) and enc.dim == 1 and enc.parent == gpu.encoding(op.operands[0])


def test_non_power_of_two_tiles_are_refused() -> None:
    k = KernelBuilder("odd", [])
    k.arange(0, 12)
    with pytest.raises(BackendError, match="power of two"):
        assign_layouts(k.module(), 4)


def test_the_input_module_is_not_modified() -> None:
    module = kernels.matmul()
    before = [op.name for op in module.kernel.walk()]
    assign_layouts(module, 4)
    assert [op.name for op in module.kernel.walk()] == before


def test_importing_despina_does_not_import_llvmlite() -> None:
    code = (
        "import sys, despina, despina.compiler, despina.compiler.backends, despina.compiler.backends.gpuir\n"
        "assert not [m for m in sys.modules if m.startswith('llvmlite')], 'llvmlite imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
