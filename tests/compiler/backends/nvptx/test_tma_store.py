"""TMA stores on the CPU: which descriptor stores TMA stores (and why not, in the GPU IR), what the PTX of one
holds (the tile written to shared memory, the proxy fence, one thread's bulk stores, their commit and wait), the
maps a store shares with loads, 1-D boxes, the flattened persistent kernel's epilogue, and targets without TMA
(whose descriptor stores are the block pointer's masked stores)."""

from __future__ import annotations

import collections
import re
from typing import Any

import benchmark_kernels
import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

import numpy as np  # noqa: E402

import despina  # noqa: E402
import despina.language as tl  # noqa: E402
from despina.runtime import kernels  # noqa: E402
from despina.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

from .test_tma import tma_attrs  # noqa: E402


@despina.jit
def store_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                 INTO_A: tl.constexpr = False):
    """Tutorial 09's epilogue: C (or, INTO_A, A itself) through a descriptor store of the accumulator."""
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        acc = tl.dot(a_desc.load([pid_m * BM, k]), b_desc.load([pid_n * BN, k]).T, acc)
    if INTO_A:
        a_desc.store([pid_m * BM, pid_n * BN], acc.to(a_ptr.dtype.element_ty))
    else:
        c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_ptr.dtype.element_ty))


@despina.jit
def block_ptr_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                     INTO_A: tl.constexpr = False):
    """store_matmul with C written as `desc.store` was before it was an op: a block pointer's store."""
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    c_block = tl.make_block_ptr(c_ptr, shape=[M, N], strides=[N, 1], offsets=[pid_m * BM, pid_n * BN],
                                block_shape=[BM, BN], order=[1, 0])
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        acc = tl.dot(a_desc.load([pid_m * BM, k]), b_desc.load([pid_n * BN, k]).T, acc)
    tl.store(c_block, acc.to(c_ptr.dtype.element_ty), boundary_check=(0, 1))


@despina.jit
def store_rows(x_ptr, R, C, D, BR: tl.constexpr, BC: tl.constexpr, RANK: tl.constexpr, SKIP: tl.constexpr = 0):
    """A tile of indices stored through a descriptor of rank RANK (1: the tile's first row) of the tensor at
    x_ptr + SKIP."""
    tile = tl.arange(0, BR)[:, None] * BC + tl.arange(0, BC)[None, :]
    if RANK == 1:
        desc = tl.make_tensor_descriptor(x_ptr, [C], [1], [BC])
        desc.store([tl.program_id(0) * BC], tl.arange(0, BC).to(x_ptr.dtype.element_ty))
    elif RANK == 2:
        base = x_ptr
        if SKIP:
            base += SKIP
        desc = tl.make_tensor_descriptor(base, [R, C], [C, 1], [BR, BC])
        desc.store([tl.program_id(0) * BR, 0], tile.to(x_ptr.dtype.element_ty))
    else:
        desc = tl.make_tensor_descriptor(x_ptr, [D, R, C], [R * C, C, 1], [1, BR, BC])
        desc.store([0, tl.program_id(0) * BR, 0], tile.reshape(1, BR, BC).to(x_ptr.dtype.element_ty))


STORE_SIG = "*fp16:16,*fp16:16,*{c}:16,i32,i32:16,i32:16"


def compile_store(c: str = "fp16", block: tuple[int, int, int] = (128, 128, 64), target: str = "sm_90a",
                  sig: str = STORE_SIG, kernel: Any = store_matmul, into_a: bool = False) -> Any:
    bm, bn, bk = block
    return despina.compile(kernel, sig.format(c=c), {"BM": bm, "BN": bn, "BK": bk, "INTO_A": into_a}, num_warps=8,
                           num_stages=3, target=target)


def store_tma(kernel: Any) -> list[str]:
    """The `tma` attribute of each descriptor store, and of each store expanded from one."""
    gpuir = kernel.asm["gpuir"]
    return re.findall(r"descriptor_store\(.*?tma = (\d+|\"[^\"]*\")", gpuir) + \
        re.findall(r" store\(.*?tma = (\"[^\"]*\")", gpuir)


@pytest.mark.parametrize("c,block,box,swizzle,atoms,index", [
    ("fp16", (128, 128, 64), [128, 64], 128, 2, 2),
    ("bf16", (128, 256, 64), [128, 64], 128, 4, 2),
    ("fp32", (128, 128, 64), [128, 32], 128, 4, 2),
    ("fp32", (128, 16, 64), [128, 16], 64, 1, 0),  # an mma.sync dot (N < 64), whose loads are masked loads
])
def test_the_epilogue_stores_its_tile_with_tma(c: str, block: tuple[int, int, int], box: list[int], swizzle: int,
                                               atoms: int, index: int) -> None:
    """The accumulator, cast, is written from its own layout (no conversion) into shared memory in the swizzled
    atoms of C's boxes; every thread fences it for the async proxy; after a barrier one thread stores each atom
    with a bulk copy, commits them, and waits until they have read the buffer."""
    k = compile_store(c, block)
    assert store_tma(k) == [str(index)]
    gpuir = k.asm["gpuir"]
    assert "convert_layout" not in gpuir[gpuir.index("\n  ) :") :]  # after the loop
    assert k.metadata["tensor_maps"][index] == {
        "dtype": c, "base": {"arg": 2}, "shape": [{"arg": 3}, {"arg": 4}], "strides": [{"arg": 4}], "box": box,
        "swizzle": swizzle, "fill": "zero"}
    ptx = k.asm["ptx"]
    assert len(re.findall(r"\.param \.align 64 \.b8 store_matmul_param_\d+\[128\]", ptx)) == index + 1
    assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group") == atoms
    first = ptx.index("cp.async.bulk.tensor.2d.global")
    fence = ptx.rindex("fence.proxy.async.shared::cta", 0, first)
    bar = ptx.index("bar.sync", fence)
    commit, wait = ptx.index("cp.async.bulk.commit_group"), ptx.index("cp.async.bulk.wait_group.read \t0;")
    assert ptx.rindex("st.shared", 0, fence) > ptx.rindex("mma", 0, fence)
    assert fence < bar < first < commit < wait
    assert "st.global" not in ptx
    assert k.metadata["spill_stores"] == 0


def test_a_store_is_wide_shared_writes_where_the_registers_allow() -> None:
    """A 1-D tile TMA stores (its thread's elements 16 bytes in a row) is written to shared memory 16 bytes at
    a time. A 2-D tile from any layout is TMA's too (an index tile here; stop 22 kept TMA to dots' results after
    index tiles came back wrong, which was TMA storing whole 16-byte units past the rows' end)."""
    k = despina.compile(store_rows, "*fp16:16,i32,i32:16,i32", {"BR": 64, "BC": 1024, "RANK": 1}, num_warps=4,
                        target="sm_90a")
    assert store_tma(k) == ["0"] and "st.shared.v4.b32" in k.asm["ptx"]
    k = despina.compile(store_rows, "*fp16:16,i32,i32:16,i32", {"BR": 64, "BC": 64, "RANK": 2}, num_warps=4,
                        target="sm_90a")
    assert store_tma(k) == ["0"] and "st.global" not in k.asm["ptx"]


@pytest.mark.parametrize("sig", ["*fp16:16,i32,i32,i32", "*fp32:16,i32,i32,i32"])
def test_rows_that_may_end_inside_16_bytes_are_a_masked_store(sig: str) -> None:
    """On an H100 TMA stored a row's last 16-byte unit whole, past the row's end: the tensor's innermost extent
    must be a multiple of 16 bytes, which the specialization proves only for a size divisible by 16 (`i32:16`)."""
    k = despina.compile(store_rows, sig, {"BR": 8, "BC": 1024, "RANK": 1}, num_warps=4, target="sm_90a")
    assert store_tma(k) == ['"none: its rows are not known to end on a 16-byte boundary (TMA stores whole 16-byte '
                            'units)"']
    assert "cp.async.bulk" not in k.asm["ptx"] and "st.global" in k.asm["ptx"]


def test_targets_without_tma_store_as_the_block_pointer_did() -> None:
    """On sm_80 and sm_90 a descriptor store is the masked store of a block pointer: the PTX of the kernel has
    the instructions of the same kernel with C written through `tl.make_block_ptr` (registers aside; the
    block pointer's offsets are computed earlier, which orders a few of them differently)."""
    def code(ptx: str) -> collections.Counter[str]:
        lines = [line.strip() for line in ptx.splitlines() if line.startswith("\t")]
        return collections.Counter(re.sub(r"%[a-z]+\d+|_param_\d+", "%", line) for line in lines
                                   if not line.startswith((".", "//", "$")) and not line.endswith(":"))

    for target in ("sm_80", "sm_90"):
        k = compile_store(target=target)
        ptx = [k.asm["ptx"], compile_store(target=target, kernel=block_ptr_matmul).asm["ptx"]]
        assert "descriptor_store" not in k.asm["gpuir"] and "tensor_maps" not in k.metadata
        assert "cp.async.bulk" not in ptx[0] and "st.global" in ptx[0]
        assert code(ptx[0].replace("store_matmul", "k")) == code(ptx[1].replace("block_ptr_matmul", "k")), target


@pytest.mark.parametrize("sig,reason", [
    ("*fp16:16,*fp16:16,*fp16,i32,i32:16,i32:16", "its base is not known to be 16-byte aligned"),
    ("*fp16:16,*fp16:16,*fp16:16,i32,i32,i32:16", "its strides are not known to be multiples of 16 bytes"),
])
def test_what_the_specialization_does_not_prove_is_a_masked_store(sig: str, reason: str) -> None:
    k = compile_store(sig=sig)
    assert store_tma(k) == [f'"none: {reason}"']
    assert len(k.metadata["tensor_maps"]) == 2 and "cp.async.bulk.tensor.2d.global" not in k.asm["ptx"]


def test_a_store_through_a_loaded_map_shares_it() -> None:
    """Storing the product into A's own descriptor (a box of the same shape): one map serves the load and the
    store."""
    k = compile_store(block=(128, 64, 64), into_a=True)
    assert store_tma(k) == ["0"] and tma_attrs(k) == ["0", "1"]
    assert len(k.metadata["tensor_maps"]) == 2


@pytest.mark.parametrize("rank,reason", [
    (3, "its block has rank 3 (TMA moves 2-D blocks here, and stores 1-D ones)"),
])
def test_blocks_tma_does_not_store(rank: int, reason: str) -> None:
    k = despina.compile(store_rows, "*fp16:16,i32:16,i32:16,i32", {"BR": 64, "BC": 64, "RANK": rank}, num_warps=4,
                        target="sm_90a")
    assert store_tma(k) == [f'"none: {reason}"'] and "tensor_maps" not in k.metadata


def test_a_1d_block_is_stored_in_boxes_of_256_elements() -> None:
    k = despina.compile(store_rows, "*fp32:16,i32,i32:16,i32", {"BR": 8, "BC": 1024, "RANK": 1}, num_warps=4,
                        target="sm_90a")
    assert store_tma(k) == ["0"]
    assert k.metadata["tensor_maps"] == [{"dtype": "fp32", "base": {"arg": 0}, "shape": [{"arg": 2}], "strides": [],
                                          "box": [256], "swizzle": 0, "fill": "zero"}]
    assert k.asm["ptx"].count("cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group") == 4


def test_a_store_of_a_base_that_is_no_parameter_is_a_masked_store() -> None:
    k = despina.compile(store_rows, "*fp16:16,i32,i32:16,i32", {"BR": 64, "BC": 64, "RANK": 2, "SKIP": 64},
                        num_warps=4, target="sm_90a")
    assert store_tma(k) == ['"none: its base, shape or strides are not kernel parameters or constants"']
    assert "tensor_maps" not in k.metadata and "cp.async.bulk" not in k.asm["ptx"]


def test_the_gpu_ir_of_a_tma_store_parses_and_lowers_to_the_same_llvm_ir() -> None:
    from despina.compiler.backends.gpuir.parser import parse_gpuir
    from despina.compiler.backends.gpuir.passes import build_gpuir
    from despina.compiler.backends.gpuir.pipeline import plan_pipelines
    from despina.compiler.backends.gpuir.printer import print_gpuir
    from despina.compiler.backends.gpuir.verifier import verify_gpuir
    from despina.compiler.backends.nvptx.lower import lower
    from despina.compiler.backends.nvptx.target import get_target
    from despina.compiler.ir.parser import parse_module
    from despina.compiler.options import CompileOptions

    module = parse_module(compile_store().asm["ir"])
    gpu = build_gpuir(module, CompileOptions(num_warps=8, num_stages=3), True)
    text = print_gpuir(gpu, True)
    parsed = parse_gpuir(text)
    verify_gpuir(parsed)
    assert print_gpuir(parsed, True) == text and "descriptor_store(" in text
    plan_pipelines(parsed, 3)
    target = get_target("sm_90a")
    assert str(lower(parsed, target)[0]) == str(lower(gpu, target)[0])


def test_the_flattened_persistent_kernel_stores_each_tile_with_tma_and_fits(tmp_path: Any) -> None:
    """benchmarks/kernels.py's persistent kernel at 128 x 256 x 64, 3 stages: its epilogue (in the flattened loop's
    branch of a tile's last K step) is a masked store, its offsets not provably non-negative (grouped order
    subtracts), and the kernel fits."""
    kernel = benchmark_kernels.load(tmp_path).matmul_tma_persistent_kernel
    h = np.zeros((256, 256), np.float16)
    descs = [TensorDescriptor.from_tensor(h, block) for block in ([128, 64], [256, 64], [128, 256])]
    options = kernel.options({"num_warps": 8, "num_stages": 3}, interpret=False)
    meta = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_SIZE_M": 8, "NUM_SMS": 132}
    bound = kernel.bind((*descs, 256, 256, 256), meta)
    k, _ = kernels.local(kernel.ir(kernel.specialize(bound, options), options), options, "sm_90a")
    fused = next(line for line in k.asm["gpuir"].splitlines() if 'flattened = "yes' in line)
    assert "2 loads by TMA" in fused
    why = '"none: its offsets are not provably non-negative, the last a multiple of 16 bytes"'
    assert store_tma(k) == [why, why]  # the fused loop's epilogue, and the nest's as written
    assert k.metadata["shared"] <= 232448 and k.metadata["spill_stores"] == 0
    assert "cp.async.bulk.wait_group.read" not in k.asm["ptx"]
