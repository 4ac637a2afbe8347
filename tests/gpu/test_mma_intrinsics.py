"""One test per tensor-core intrinsic the lowering uses, each lane's registers checked against the
layout model (gpuir/mma.py): `ldmatrix` (plain and `.trans`) of an index-valued tile, one
`mma.sync` on known inputs, and `cp.async` with its zero fill. The kernels are LLVM IR written
here around the one intrinsic, so a wrong fragment table shows as the lane and register it
breaks."""

from __future__ import annotations

import numpy as np
import pytest

from despina.compiler.backends.gpuir.mma import Mma, MmaOperand
from despina.compiler.backends.nvptx.lower.ldmatrix import LDMATRIX
from despina.compiler.ir import types as t
from despina.runtime import DeviceArray, driver, synchronize
from despina.runtime.launcher import Launcher

pytest.importorskip("llvmlite")
I32P = t.PointerType(t.int32)

HEAD = """target triple = "nvptx64-nvidia-cuda"
@smem = internal addrspace(3) global [1024 x i32] undef, align 16
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare void @llvm.nvvm.barrier0()
"""


def _run(gpu_device: driver.Device, body: str, decls: str, inputs: list[np.ndarray], out_words: int) -> np.ndarray:
    from despina.compiler.backends.nvptx.link import link_cubin
    from despina.compiler.backends.nvptx.llvm import emit_ptx

    params = ", ".join(f"ptr addrspace(1) %in{i}" for i in range(len(inputs)))
    text = HEAD + decls + f"define ptx_kernel void @k(ptr addrspace(1) %out, {params}) {{\n" + body + "  ret void\n}\n"
    arch = gpu_device.target
    _, ptx = emit_ptx(text, arch)
    cubin, _ = link_cubin(ptx, arch, "k.ptx")
    function = gpu_device.load(cubin, "k", 0, 1)
    arrays = [DeviceArray.from_numpy(np.ascontiguousarray(x).view(np.int32)) for x in inputs]
    out = DeviceArray.from_numpy(np.zeros(out_words, np.int32))
    names = ["out"] + [f"in{i}" for i in range(len(inputs))]
    values = {"out": out.data_ptr(), **{f"in{i}": a.data_ptr() for i, a in enumerate(arrays)}}
    Launcher(function, names, [I32P] * len(names)).launch((1, 1, 1), values)
    synchronize()
    return out.to_numpy()


def _load_word(name: str, ptr: str, index: str) -> str:
    return f"  %{name}.p = getelementptr i32, ptr addrspace(1) {ptr}, i32 {index}\n  %{name} = load i32, ptr addrspace(1) %{name}.p\n"


def _store_word(name: str, value: str, index: str) -> str:
    return f"  %{name}.p = getelementptr i32, ptr addrspace(1) %out, i32 {index}\n  store i32 {value}, ptr addrspace(1) %{name}.p\n"


@pytest.mark.parametrize(("op_idx", "contig"), [(0, 1), (0, 0), (1, 0), (1, 1)],
                         ids=["A-K-contiguous", "A-M-contiguous", "B-K-contiguous", "B-N-contiguous"])
def test_ldmatrix_of_an_index_valued_tile(gpu_device: driver.Device, op_idx: int, contig: int) -> None:
    """A 16x16 fp16 tile holding its own row-major indices, stored in shared memory with dimension
    `contig` contiguous and read as operand A or B: `ldmatrix.x4` when K is the contiguous
    dimension, `ldmatrix.x4.trans` when M (A read transposed) or N (B) is, as the lowering picks
    (attention's K, read transposed by strides, is B stored K-contiguous). Lane l's register r
    must hold the index that MmaOperand's layout gives for (r, l)."""
    ll = MmaOperand(op_idx, Mma(2, (1, 1)), 2).linear((16, 16))
    rows_dim = 1 - contig
    # Lane l addresses stored row l % 8 of matrix l / 8, whose origin is register pair 2 * (l / 8).
    addresses = np.zeros(32, np.int32)
    for lane in range(32):
        origin = ll.reg_index(2 * (lane >> 3))
        addresses[lane] = (origin[rows_dim] + lane % 8) * 16 + origin[contig]
    index = np.arange(256, dtype=np.int16).reshape(16, 16)
    tile = (index if contig == 1 else index.T).ravel()
    kdim = 1 if op_idx == 0 else 0
    name = LDMATRIX.format(n=4, trans="" if contig == kdim else ".trans")
    decls = f"declare {{i32, i32, i32, i32}} @{name}(ptr addrspace(3))\n"
    body = "  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n"
    for i in range(4):  # each lane copies 4 words (8 halves) of the tile into shared memory
        body += f"  %w{i}.i = add i32 %tid, {32 * i}\n" + _load_word(f"w{i}", "%in0", f"%w{i}.i")
        body += f"  %s{i} = getelementptr i32, ptr addrspace(3) @smem, i32 %w{i}.i\n  store i32 %w{i}, ptr addrspace(3) %s{i}\n"
    body += "  call void @llvm.nvvm.barrier0()\n" + _load_word("addr", "%in1", "%tid")
    body += "  %src = getelementptr i16, ptr addrspace(3) @smem, i32 %addr\n"
    body += f"  %m = call {{i32, i32, i32, i32}} @{name}(ptr addrspace(3) %src)\n  %base = mul i32 %tid, 4\n"
    for j in range(4):
        body += f"  %r{j} = extractvalue {{i32, i32, i32, i32}} %m, {j}\n  %o{j} = add i32 %base, {j}\n"
        body += _store_word(f"st{j}", f"%r{j}", f"%o{j}")
    got = _run(gpu_device, body, decls, [tile, addresses], 128).view(np.int16).reshape(32, 8)
    for lane in range(32):
        expected = [ll.index(r, lane, 0) for r in range(8)]
        assert [divmod(int(v), 16) for v in got[lane]] == expected, f"lane {lane}"


def test_one_mma_sync_on_known_inputs(gpu_device: driver.Device) -> None:
    """m16n8k16 fp16 -> fp32: each lane's A, B and C registers placed from the layout model, its D
    registers compared with A @ B + C at the indices the accumulator layout names."""
    rng = np.random.default_rng(5)
    a = rng.integers(-4, 5, (16, 16)).astype(np.float16)
    b = rng.integers(-4, 5, (16, 8)).astype(np.float16)
    c = rng.integers(-8, 9, (16, 8)).astype(np.float32)
    parent = Mma(2, (1, 1))
    la, lb, lc = MmaOperand(0, parent, 2).linear((16, 16)), MmaOperand(1, parent, 2).linear((16, 8)), parent.linear((16, 8))
    regs_a = np.array([[a[la.index(r, lane, 0)] for r in range(8)] for lane in range(32)], np.float16)
    regs_b = np.array([[b[lb.index(r, lane, 0)] for r in range(4)] for lane in range(32)], np.float16)
    regs_c = np.array([[c[lc.index(r, lane, 0)] for r in range(4)] for lane in range(32)], np.float32)
    name = "llvm.nvvm.mma.m16n8k16.row.col.f32.f32"
    h2 = "<2 x half>"
    decls = f"declare {{float, float, float, float}} @{name}({', '.join([h2] * 6 + ['float'] * 4)})\n"
    body = "  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n"
    operands = []
    for src, count, words, kind in (("%in0", 4, 4, h2), ("%in1", 2, 2, h2), ("%in2", 4, 4, "float")):
        for j in range(count):
            tag = f"{src[1:]}_{j}"
            body += f"  %{tag}.i0 = mul i32 %tid, {words}\n  %{tag}.i = add i32 %{tag}.i0, {j}\n"
            body += _load_word(tag, src, f"%{tag}.i") + f"  %{tag}.v = bitcast i32 %{tag} to {kind}\n"
            operands.append(f"{kind} %{tag}.v")
    body += f"  %d = call {{float, float, float, float}} @{name}({', '.join(operands)})\n  %base = mul i32 %tid, 4\n"
    for j in range(4):
        body += f"  %d{j} = extractvalue {{float, float, float, float}} %d, {j}\n  %d{j}.w = bitcast float %d{j} to i32\n"
        body += f"  %o{j} = add i32 %base, {j}\n" + _store_word(f"st{j}", f"%d{j}.w", f"%o{j}")
    got = _run(gpu_device, body, decls, [regs_a, regs_b, regs_c], 128).view(np.float32).reshape(32, 4)
    expected = a.astype(np.float32) @ b.astype(np.float32) + c
    for lane in range(32):
        assert list(got[lane]) == [expected[lc.index(r, lane, 0)] for r in range(4)], f"lane {lane}"


def test_cp_async_zero_fills_the_masked_bytes(gpu_device: driver.Device) -> None:
    """cp.async.cg 16 bytes with src-size 16, 8 and 0 (as a masked operand load issues it): the
    bytes past src-size are zeros in shared memory after wait_group 0."""
    src = np.arange(1, 32 * 4 + 1, dtype=np.int32)
    sizes = np.array([(16, 8, 0, 16)[lane % 4] for lane in range(32)], np.int32)
    decls = ("declare void @llvm.nvvm.cp.async.cg.shared.global.16.s(ptr addrspace(3), ptr addrspace(1), i32)\n"
             "declare void @llvm.nvvm.cp.async.commit.group()\ndeclare void @llvm.nvvm.cp.async.wait.group(i32)\n")
    body = "  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n  %w = mul i32 %tid, 4\n"
    body += "  %g = getelementptr i32, ptr addrspace(1) %in0, i32 %w\n  %s = getelementptr i32, ptr addrspace(3) @smem, i32 %w\n"
    body += "  store <4 x i32> <i32 -1, i32 -1, i32 -1, i32 -1>, ptr addrspace(3) %s, align 16\n" + _load_word("n", "%in1", "%tid")
    body += "  call void @llvm.nvvm.cp.async.cg.shared.global.16.s(ptr addrspace(3) %s, ptr addrspace(1) %g, i32 %n)\n"
    body += "  call void @llvm.nvvm.cp.async.commit.group()\n  call void @llvm.nvvm.cp.async.wait.group(i32 0)\n"
    body += "  call void @llvm.nvvm.barrier0()\n  %v = load <4 x i32>, ptr addrspace(3) %s, align 16\n"
    body += "  %o = getelementptr i32, ptr addrspace(1) %out, i32 %w\n  store <4 x i32> %v, ptr addrspace(1) %o, align 16\n"
    got = _run(gpu_device, body, decls, [src, sizes], 128).reshape(32, 4)
    for lane in range(32):
        words = sizes[lane] // 4
        expected = list(src[lane * 4 : lane * 4 + words]) + [0] * (4 - words)
        assert list(got[lane]) == expected, f"lane {lane}"
