"""Golden FileCheck-style patterns on the LLVM IR and PTX of each lowering rule; every kernel
here also links to a cubin for sm_80 and sm_90."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

import despina  # noqa: E402
import despina.language as tl  # noqa: E402
from despina.compiler.backends.nvptx import NvptxKernel, compile_module  # noqa: E402
from despina.compiler.ir.core import Block, Module  # noqa: E402
from despina.compiler.ir.types import (  # noqa: E402
    PointerType,
    bfloat16,
    float16,
    float32,
    int1,
    int32,
    uint32,
)

from .. import kernels  # noqa: E402
from ..filecheck import filecheck  # noqa: E402
from ..kernel_builder import KernelBuilder  # noqa: E402

f32p, i32p = PointerType(float32), PointerType(int32)


def build(module: Module, **kw: object) -> NvptxKernel:
    """Compile for sm_90 (checked) and link for sm_80 too."""
    compile_module(module, target="sm_80", isolate=False, **kw)  # type: ignore[arg-type]
    return compile_module(module, target="sm_90", isolate=False, **kw)  # type: ignore[arg-type]


def ptx(k: NvptxKernel) -> str:
    return str(k.asm["ptx"])


def llir(k: NvptxKernel) -> str:
    return str(k.asm["llir"])


def unary_kernel(
    name: str, op: Callable[[KernelBuilder, object], object], src=float32, dst=float32, block: int = 512
) -> Module:  # type: ignore[no-untyped-def]
    k = KernelBuilder(name, [("x", PointerType(src)), ("y", PointerType(dst))])
    offs = k.bin("add", k.bin("mul", k.program_id(0), block), k.arange(0, block))
    x = k.load(k.ptrs(k["x"], offs))
    k.store(k.ptrs(k["y"], offs), op(k, x))  # type: ignore[arg-type]
    return k.module(divisibility=[0, 1])


# ---- memory -----------------------------------------------------------------------------------


def test_aligned_vector_add_uses_128_bit_accesses() -> None:
    k = build(kernels.vector_add())
    filecheck(
        ptx(k),
        """
        CHECK: .maxntid 128
        CHECK: @%p1 ld.global.v4.b32
        CHECK: @%p2 ld.global.v4.b32
        CHECK: @%p1 ld.global.v4.b32
        CHECK: add.f32
        CHECK: @%p1 st.global.v4.b32
        CHECK: @%p2 st.global.v4.b32
        CHECK-COUNT-4: ld.global.v4.b32
        CHECK-COUNT-2: st.global.v4.b32
        """,
    )


def test_unaligned_vector_add_falls_back_to_scalar_accesses() -> None:
    k = build(kernels.vector_add(aligned=False))
    filecheck(ptx(k), "CHECK: ld.global.b32\nCHECK-COUNT-0: ld.global.v4\nCHECK-COUNT-8: st.global.b32")


def test_masked_load_moves_other_before_the_predicated_load() -> None:
    k = build(kernels.softmax())
    filecheck(ptx(k), "CHECK: mov.b32 %r\nCHECK-NOT: ld.global.b32\nCHECK: ld.global.v4.b32")
    filecheck(llir(k), 'CHECK: "=&r,=&r,=&r,=&r,b,l,r,r,r,r"')


def test_fp16_rows_load_eight_halves_per_access() -> None:
    k = build(kernels.layer_norm())
    filecheck(
        ptx(k), "CHECK: ld.global.v4.b32\nCHECK: rsqrt.approx.ftz.f32\nCHECK: cvt.rn.f16x2.f32\nCHECK: st.global.v4.b32"
    )


def test_cache_modifiers_and_eviction() -> None:
    k = KernelBuilder("cached", [("x", f32p), ("y", f32p)])
    offs = k.arange(0, 512)
    v = k.load(k.ptrs(k["x"], offs), cache=".cg")
    w = k.load(k.ptrs(k["y"], offs), evict="evict_last")
    k.store(k.ptrs(k["y"], offs), k.bin("add", v, w), cache=".cs", evict="evict_first")
    k.store(k.ptrs(k["x"], offs), v, evict="evict_first")
    compiled = build(k.module(divisibility=[0, 1]))
    filecheck(
        ptx(compiled),
        "CHECK: ld.global.cg.v4.b32\nCHECK: ld.global.L1::evict_last.v4.b32\n"
        "CHECK: st.global.cs.v4.b32\nCHECK: st.global.L1::evict_first.v4.b32",
    )


def test_bool_and_int8_memory() -> None:
    k = KernelBuilder("bools", [("m", PointerType(int1)), ("y", i32p)])
    offs = k.arange(0, 128)
    m = k.load(k.ptrs(k["m"], offs))
    k.store(k.ptrs(k["y"], offs), k.op("select", m, k.full([128], 1, int32), k.full([128], 0, int32)))
    build(k.module())


# ---- arithmetic, casts, math ------------------------------------------------------------------


def test_math_uses_hardware_approximations() -> None:
    def body(k, x):  # type: ignore[no-untyped-def]
        s = k.bin("add", k.op("sin", x), k.op("cos", x))
        s = k.bin("add", s, k.op("log", x))
        s = k.bin("add", s, k.op("sqrt", x))
        return k.bin("add", s, k.op("exp2", x))

    k = build(unary_kernel("math_kernel", body))
    filecheck(
        ptx(k),
        "CHECK: sin.approx.f32\nCHECK: cos.approx.f32\nCHECK: lg2.approx.f32\nCHECK: sqrt.approx.ftz.f32\nCHECK: ex2.approx.ftz.f32",
    )


def test_fp16_and_bf16_casts_round_to_nearest() -> None:
    def body(k, x):  # type: ignore[no-untyped-def]
        h = k.cast(k.cast(x, bfloat16), float16)
        return k.cast(h, float32)

    k = build(unary_kernel("casts", body))
    filecheck(ptx(k), "CHECK: cvt.rn.bf16.f32\nCHECK: cvt.f32.bf16\nCHECK: cvt.rn.f16.f32\nCHECK: cvt.f32.f16")


def test_rtz_cast() -> None:
    k = build(unary_kernel("rtz", lambda k, x: k.cast(k.op("cast", x, to=float16, rounding="rtz"), float32)))
    filecheck(ptx(k), "CHECK: cvt.rz.f16.f32")


def test_integer_ops_follow_signedness() -> None:
    def body(k, x):  # type: ignore[no-untyped-def]
        u = k.cast(x, uint32)
        q = k.bin("floordiv", x, 7)
        r = k.bin("rem", x, 5)
        s = k.cast(k.bin("shr", u, 3), int32)
        h = k.cast(k.bin("umulhi", u, u), int32)
        m = k.bin("maximum", x, k.bin("minimum", q, r))
        return k.bin("add", k.bin("add", k.bin("xor", s, h), m), k.bin("shr", x, 1))

    k = build(unary_kernel("ints", body, int32, int32))
    filecheck(ptx(k), "CHECK: mul.hi")
    filecheck(llir(k), "CHECK: lshr\nCHECK: ashr")


def test_compare_select_fma() -> None:
    def body(k, x):  # type: ignore[no-untyped-def]
        f = k.op("fma", x, x, x)
        return k.op("select", k.cmp("ne", x, 0.0), f, k.op("neg", x))

    k = build(unary_kernel("cmpsel", body))
    filecheck(ptx(k), "CHECK: fma.rn.f32\nCHECK: setp.neu.f32")


# ---- grids, reductions, scans ------------------------------------------------------------------


def test_3d_grid() -> None:
    k = KernelBuilder("grid3d", [("y", i32p)])
    pid = k.bin("add", k.bin("add", k.program_id(0), k.program_id(1)), k.program_id(2))
    n = k.bin("mul", k.op("num_programs", axis=0), k.op("num_programs", axis=2))
    k.store(k["y"], k.bin("add", pid, n))
    compiled = build(k.module())
    filecheck(ptx(compiled), "CHECK: %ctaid.x\nCHECK: %ctaid.y\nCHECK: %ctaid.z\nCHECK: %nctaid.x\nCHECK: %nctaid.z")
    # A scalar store is made by one thread only.
    filecheck(llir(compiled), "CHECK: icmp eq i32")


def test_softmax_reduces_with_butterfly_shuffles() -> None:
    k = build(kernels.softmax())
    filecheck(
        ptx(k),
        """
        CHECK: max.f32
        CHECK: shfl.sync.bfly.b32
        CHECK-NOT: bar.sync
        CHECK: st.shared
        CHECK: bar.sync
        CHECK: ld.shared
        CHECK: ex2.approx.f32
        CHECK: shfl.sync.bfly.b32
        CHECK-NOT: bar.sync
        CHECK: st.shared
        CHECK: bar.sync
        CHECK: ld.shared
        CHECK: div.full.f32
        CHECK: st.global.v4.b32
        CHECK-COUNT-2: bar.sync
        """,
    )
    # Per reduction: 5 shuffles within a warp, then one partial a lane and 2 shuffles over 4 warps.
    assert ptx(k).count("shfl.sync.bfly.b32") == 2 * (5 + 2)
    assert k.metadata["shared"] == 32  # 4 warps' fp32 partials, one slot per reduction: no barrier between


def _reduce_2d(axis: int) -> Module:
    k = KernelBuilder(f"reduce2d_{axis}", [("x", f32p), ("y", f32p)])
    rows, cols = k.arange(0, 32), k.arange(0, 64)
    offs = k.bin("add", k.bin("mul", k.expand(rows, 1), 64), k.expand(cols, 0))
    s = k.reduce(k.load(k.ptrs(k["x"], offs)), axis, "add")
    out = rows if axis == 1 else cols
    k.store(k.ptrs(k["y"], out), s)
    return k.module(divisibility=[0, 1])


@pytest.mark.parametrize("axis", [0, 1])
def test_2d_reductions(axis: int) -> None:
    k = build(_reduce_2d(axis))
    assert "add.f32" in ptx(k)  # fp fusion on: no `.rn` (which would forbid ptxas contracting)


def test_scan_across_registers_lanes_and_warps() -> None:
    k = KernelBuilder("cumsum", [("x", f32p), ("y", f32p)])
    offs = k.arange(0, 1024)
    s = k.scan(k.load(k.ptrs(k["x"], offs)), 0, "add")
    k.store(k.ptrs(k["y"], offs), s)
    compiled = build(k.module(divisibility=[0, 1]))
    filecheck(ptx(compiled), "CHECK: shfl.sync.bfly.b32\nCHECK: bar.sync\nCHECK: st.shared\nCHECK: ld.shared")


def test_reverse_scan_of_ints() -> None:
    k = KernelBuilder("rcummax", [("x", i32p), ("y", i32p)])
    offs = k.arange(0, 256)
    s = k.scan(k.load(k.ptrs(k["x"], offs)), 0, "maximum", reverse=True)
    k.store(k.ptrs(k["y"], offs), s)
    build(k.module(divisibility=[0, 1]))


# ---- shapes ---------------------------------------------------------------------------------


def test_shape_ops_move_through_shared_memory() -> None:
    k = KernelBuilder("shapes", [("x", f32p), ("y", f32p)])
    offs = k.arange(0, 512)
    x = k.load(k.ptrs(k["x"], offs))
    t = k.op("trans", k.op("reshape", x, shape=[16, 32]), perm=[1, 0])
    flat = k.op("reshape", t, shape=[512])
    a, b = k.b.create("split", [k.op("reshape", flat, shape=[256, 2])]).results
    joined = k.op("reshape", k.op("cat", a, b), shape=[512])
    k.store(k.ptrs(k["y"], offs), joined)
    compiled = build(k.module(divisibility=[0, 1]))
    assert compiled.metadata["shared"] >= 512 * 4
    filecheck(ptx(compiled), "CHECK: bar.sync\nCHECK: st.shared\nCHECK: ld.shared")


def test_join() -> None:
    k = KernelBuilder("join_kernel", [("x", f32p), ("y", f32p)])
    offs = k.arange(0, 256)
    x = k.load(k.ptrs(k["x"], offs))
    j = k.op("reshape", k.op("join", x, k.op("neg", x)), shape=[512])
    k.store(k.ptrs(k["y"], k.arange(0, 512)), j)
    build(k.module())


# ---- control flow, dot, atomics, debugging --------------------------------------------------------


def test_loop_carried_tile_is_a_phi_per_register() -> None:
    k = build(kernels.loop_carry())
    filecheck(llir(k), "CHECK: phi float\nCHECK: phi float")
    filecheck(ptx(k), "CHECK: ld.global.v4.b32\nCHECK: bra")


def test_if_and_while() -> None:
    k = KernelBuilder("ctrl", [("x", f32p), ("n", int32)])
    offs = k.arange(0, 128)
    tile = k.load(k.ptrs(k["x"], offs))
    (res,) = k.if_(k.cmp("gt", k["n"], 0), lambda: [k.bin("mul", tile, 2.0)], lambda: [tile])
    before, after = Block([int32, res.type]), Block([int32, res.type])
    with k.b.at(before):
        k.void("condition", k.cmp("lt", before.args[0], k["n"]), *before.args)
    with k.b.at(after):
        k.void("yield", k.bin("add", after.args[0], 1), k.bin("add", after.args[1], 1.0))
    _, out = k.b.create("while", [k.const(0), res], {}, [before, after]).results
    k.store(k.ptrs(k["x"], offs), out)
    compiled = build(k.module())
    filecheck(llir(compiled), "CHECK: phi\nCHECK: br i1")


def test_matmul_k_loop_with_fma_dot() -> None:
    k = build(kernels.matmul())
    filecheck(
        ptx(k),
        "CHECK: ld.global.v4.b32\nCHECK: st.shared\nCHECK: bar.sync\nCHECK: ld.shared\nCHECK: fma.rn.f32\nCHECK: bra",
    )
    assert k.metadata["shared"] == 32 * 16 * 4


def test_dot_operands_move_through_shared_memory_as_128_bit_vectors() -> None:
    # fp32, 4 warps, 32x16 A and 16x32 B: A's rows (dot_op<0>, k in the low register bits) and B's
    # columns (dot_op<1>, n in register bits above k's) reach each thread as 16-byte vectors (4 of
    # A and 16 of B a thread at least), and the operands' blocked registers go in as 16-byte
    # vectors. The one scalar access left is the 1-D conversion of an index tile.
    k = build(kernels.matmul())
    accesses = Counter(re.findall(r"(?:ld|st)\.shared\S*", ptx(k)))
    assert accesses["ld.shared.v4.b32"] >= 4 + 16 and accesses["st.shared.v4.b32"] >= 2
    assert sum(n for name, n in accesses.items() if ".v4." not in name) <= 1, accesses


def test_fp16_dot_accumulates_in_fp32_on_tensor_cores() -> None:
    k = KernelBuilder("dot16", [("a", PointerType(float16)), ("c", f32p)])
    r16 = k.arange(0, 16)
    offs = k.bin("add", k.bin("mul", k.expand(r16, 1), 16), k.expand(r16, 0))
    a = k.load(k.ptrs(k["a"], offs))
    c = k.op("dot", a, a, k.full([16, 16], 0.0, float32))
    k.store(k.ptrs(k["c"], offs), c)
    compiled = build(k.module(divisibility=[0, 1]))
    filecheck(ptx(compiled), "CHECK: ldmatrix.sync.aligned.m8n8.x4.shared.b16\nCHECK: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    assert "fma.rn.f32" not in ptx(compiled)


def test_atomics_carry_their_semantics_and_scope() -> None:
    k = build(kernels.atomic_add())
    filecheck(ptx(k), "CHECK: atom.relaxed.gpu.global.add.f32\nCHECK: atom.acq_rel.gpu.global.add.u32")


def test_atomic_cas_and_used_results() -> None:
    k = KernelBuilder("cas", [("lock", i32p), ("out", i32p)])
    old = k.op("atomic_cas", k["lock"], k.const(0), k.const(1), sem="acquire", scope="cta")
    ptrs = k.ptrs(k["out"], k.arange(0, 64))
    got = k.op("atomic_rmw", ptrs, k.full([64], 1, int32), kind="max", sem="release", scope="sys")
    k.store(ptrs, k.bin("add", got, old))
    compiled = build(k.module())
    filecheck(
        ptx(compiled), "CHECK: atom.acquire.cta.global.cas.b32\nCHECK: bar.sync\nCHECK: atom.release.sys.global.max.s32"
    )


def test_device_print_and_assert() -> None:
    k = KernelBuilder("debug", [("x", f32p)])
    offs = k.arange(0, 128)
    x = k.load(k.ptrs(k["x"], offs))
    k.void("device_print", x, offs, prefix="x = ", hex=False)
    k.void("device_assert", k.cmp("ge", x, 0.0), msg="x must be non-negative")
    compiled = build(k.module())
    assert compiled.metadata["prints"] is True
    assert compiled.metadata["asserts"] == [{"message": "x must be non-negative", "file": "<unknown>", "line": 0,
                                             "shape": [128]}]
    filecheck(ptx(compiled), "CHECK: vprintf")


def test_device_print_in_hex_pads_the_bits_to_the_element_width() -> None:
    k = KernelBuilder("hex_print", [("x", i32p), ("h", PointerType(float16))])
    offs = k.arange(0, 128)
    k.void("device_print", k.load(k.ptrs(k["x"], offs)), prefix="x = ", hex=True)
    k.void("device_print", k.load(k.ptrs(k["h"], offs)), prefix="h = ", hex=True)
    text = llir(build(k.module()))
    assert "x = 0x%08llx" in text and "h = 0x%04llx" in text


def test_failed_device_assert_records_and_exits_without_trapping() -> None:
    k = KernelBuilder("asserts", [("x", f32p), ("y", f32p)])
    offs = k.arange(0, 256)
    x = k.load(k.ptrs(k["x"], offs))
    k.void("device_assert", k.cmp("ge", x, 0.0), msg="first")
    k.void("device_assert", k.cmp("le", x, 1.0), msg="second")
    k.store(k.ptrs(k["y"], offs), x)
    compiled = build(k.module())
    assert compiled.metadata["prints"] is False
    assert [a["message"] for a in compiled.metadata["asserts"]] == ["first", "second"]
    text = ptx(compiled)
    filecheck(text, """
        CHECK: .visible .global .align 4 .b8 __despina_assert[24];
        CHECK-COUNT-2: vote.sync.any.pred
        CHECK-COUNT-2: [__despina_assert], 0, 1;
        CHECK-COUNT-1: [__despina_assert+4], 0;
        CHECK-COUNT-1: [__despina_assert+4], 1;
        CHECK-COUNT-2: [__despina_assert+20]
        CHECK-COUNT-2: exit;
    """)
    assert "__assertfail" not in text and "trap" not in text and "vprintf" not in text
    filecheck(llir(compiled), """
        CHECK: @__despina_assert = addrspace(1) global [6 x i32] zeroinitializer, align 4
        CHECK: @llvm.nvvm.vote.any.sync(i32 -1
        CHECK: cmpxchg ptr addrspace(1) @__despina_assert, i32 0, i32 1 monotonic monotonic
        CHECK: call void @llvm.nvvm.exit()
        CHECK: unreachable
    """)


@despina.jit
def checked_kernel(x_ptr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    tl.device_assert(x >= 0, "x must be non-negative")
    assert tl.sum(x, 0) < 100, "sum too large"
    print("x", x)


@pytest.mark.parametrize("debug", [True, False])
def test_metadata_tables_of_prints_and_asserts(debug: bool) -> None:
    k = despina.compile(checked_kernel, "*i32", {"N": 64}, debug=debug)
    first = checked_kernel.fn.__code__.co_firstlineno
    assert k.metadata["prints"] is True
    assert k.metadata["asserts"] == ([
        {"message": "x must be non-negative", "file": __file__, "line": first + 3, "shape": [64]},
        {"message": "sum too large", "file": __file__, "line": first + 4, "shape": []},
    ] if debug else [])
    assert ("__despina_assert" in k.inspect_ptx()) is debug


def test_kernels_without_prints_or_asserts_say_so() -> None:
    compiled = build(unary_kernel("copy", lambda k, x: x))
    assert compiled.metadata["prints"] is False and compiled.metadata["asserts"] == []
    assert "__despina_assert" not in ptx(compiled)


def test_barrier_and_assume() -> None:
    k = KernelBuilder("sync", [("x", f32p), ("n", int32)])
    k.void("assume", k.cmp("gt", k["n"], 0))
    k.void("barrier")
    k.store(k["x"], k.cast(k["n"], float32))
    compiled = build(k.module())
    filecheck(ptx(compiled), "CHECK: bar.sync")


@despina.jit
def block_ptr_copy(x_ptr, y_ptr, M, N, stride_m, BM: tl.constexpr, BN: tl.constexpr):
    src = tl.make_block_ptr(x_ptr, (M, N), (stride_m, 1), (tl.program_id(0) * BM, 0), (BM, BN), (1, 0))
    dst = tl.make_block_ptr(y_ptr, (M, N), (stride_m, 1), (tl.program_id(0) * BM, 0), (BM, BN), (1, 0))
    tl.store(dst, tl.load(src, boundary_check=(0,), padding_option="zero"), boundary_check=(0,))


@despina.jit
def pointer_copy(x_ptr, y_ptr, M, N, stride_m, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)[:, None]
    offs = rows * stride_m + tl.arange(0, BN)[None, :]
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=rows < M, other=0.0), mask=rows < M)


def test_block_pointers_load_and_store_as_vectors_like_tiles_of_pointers() -> None:
    signature, meta = "*fp32:16,*fp32:16,i32,i32,i32:16", {"BM": 16, "BN": 64}
    counts = []
    for kernel in (block_ptr_copy, pointer_copy):
        text = despina.compile(kernel, signature, meta).inspect_ptx()
        counts.append((text.count("ld.global.v4.b32"), text.count("st.global.v4.b32"), text.count("ld.global.b32")))
    assert counts[0] == counts[1] == (2, 2, 0), counts
