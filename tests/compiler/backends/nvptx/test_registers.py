"""Register use of the wide-row benchmark kernels (benchmarks/kernels.py, Triton-style) and the
code features it rests on: 16384-column softmax and layer norm with 16 warps fit in 64 registers
(two 512-thread CTAs per SM), without spills, with 128-bit global accesses; the cross-warp step
of a reduction reads one partial a thread; register indices are a constant away from one base
(immediate address offsets); a mask is one predicate per run that axis analysis proves constant;
`.minnctapersm 2` when ptxas would otherwise leave one CTA per SM."""

from __future__ import annotations

import re

import benchmark_kernels
import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

import despina  # noqa: E402
from despina.compiler.backends.gpuir import Blocked, LinearLayout, assign_layouts  # noqa: E402
from despina.compiler.backends.nvptx import (  # noqa: E402
    NvptxKernel,
    compile_module,
    get_target,
    link_cubin,
    parse_info_log,
)
from despina.compiler.backends.nvptx.link import LinkError  # noqa: E402
from despina.compiler.backends.nvptx.lower import Lowering  # noqa: E402
from despina.compiler.backends.nvptx.occupancy import (  # noqa: E402
    ctas_by_registers,
    hinted_ctas,
    more_ctas,
    with_min_ctas,
)
from despina.compiler.ir.types import PointerType, float32, int32  # noqa: E402

from .. import kernels  # noqa: E402
from ..kernel_builder import KernelBuilder  # noqa: E402

SOFTMAX_SIG = "*fp32:16,*fp32:16,i32:16,i32:16,i32:16"
LAYER_NORM_SIG = "*fp16:16,*fp16:16,*fp16:16,*fp16:16,i32:16,i32:16,fp32"


KERNELS = benchmark_kernels.load()
softmax_kernel, layer_norm_kernel = KERNELS.softmax_kernel, KERNELS.layer_norm_kernel


def softmax(block: int, num_warps: int, target: str = "sm_90") -> NvptxKernel:
    return despina.compile(
        softmax_kernel, signature=SOFTMAX_SIG, constexprs={"BLOCK_SIZE": block}, num_warps=num_warps, target=target
    )


def layer_norm(block: int, num_warps: int, target: str = "sm_90") -> NvptxKernel:
    return despina.compile(
        layer_norm_kernel, signature=LAYER_NORM_SIG, constexprs={"BLOCK_SIZE": block}, num_warps=num_warps, target=target
    )


def ptx(k: NvptxKernel) -> str:
    return str(k.asm["ptx"])


def no_spills(k: NvptxKernel) -> bool:
    return (k.metadata["spill_stores"], k.metadata["spill_loads"], k.metadata["stack"]) == (0, 0, 0)


# ---- the 16384-column rows: two CTAs of 512 threads per SM -------------------------------------


def test_wide_softmax_fits_two_ctas_per_sm() -> None:
    k = softmax(16384, 16)
    assert k.metadata["registers"] <= 64 and no_spills(k)
    text = ptx(k)
    assert ".maxntid 512" in text
    # 8 loads and 8 stores of 128 bits a thread, nothing narrower.
    assert len(re.findall(r"ld\.global\.v4\.b32", text)) == 8 == len(re.findall(r"st\.global\.v4\.b32", text))
    assert not re.search(r"(ld|st)\.global(\.v2)?\.b(32|16)\b", text)
    # A single predicate per 128-bit access (mask constancy), and one base pointer: the other
    # seven accesses are a constant number of bytes away (immediate offsets in SASS).
    assert text.count("setp.lt.s32") == 8
    assert len(re.findall(r"add\.s64\s+%rd\d+, %rd\d+, \d+;", text)) >= 14
    # Each reduction: 5 in-warp shuffles, one shared-memory partial a thread, 4 shuffles over 16 warps.
    assert text.count("shfl.sync.bfly.b32") == 2 * (5 + 4)
    assert text.count("bar.sync") == 2
    assert len(re.findall(r"ld\.shared\.b32", text)) == 2 and "ld.shared.v" not in text
    assert "div.full.f32" in text and "div.rn" not in text  # `/` is Triton's: no slow-path call


def test_wide_layer_norm_fits_two_ctas_per_sm() -> None:
    k = layer_norm(16384, 16)
    assert k.metadata["registers"] <= 64 and no_spills(k)
    text = ptx(k)
    assert ".maxntid 512" in text
    # nvJitLink 13.5 left alone takes 79 registers (hoisting all 8 w/b loads over 32 live fp32
    # values); the occupancy hint brings it to 64.
    if ".minnctapersm 2" in text:
        _, log = link_cubin(text.replace("\n.minnctapersm 2", ""), "sm_90", "plain.ptx")
        assert parse_info_log(log, k.name).registers > 64
    loads = [m.start() for m in re.finditer(r"ld\.global\.v4\.b32", text)]
    assert len(loads) == 12 and len(re.findall(r"st\.global\.v4\.b32", text)) == 4
    # x first, then both reductions, then w and b: only x is live across the reductions.
    last_barrier = text.rindex("bar.sync")
    assert sum(at > last_barrier for at in loads) == 8
    # cols < N with N % 16 == 0: one comparison per 8 columns a thread, for the loads, the
    # `where` and the store alike (4, not 32, predicates live across the reductions).
    assert text.count("setp.lt.s32") == 4
    assert text.count("selp.f32") == 32


@pytest.mark.parametrize(("block", "num_warps", "limit"), [(1024, 4, 40), (4096, 8, 48)])
def test_narrower_rows_stay_small(block: int, num_warps: int, limit: int) -> None:
    for k in (softmax(block, num_warps), layer_norm(block, num_warps)):
        assert k.metadata["registers"] <= limit and no_spills(k)
        # Several CTAs per SM already; one more where 8 registers fewer fit it (`occupancy.hinted_ctas`).
        hint = re.search(r"^\.minnctapersm (\d+)$", ptx(k), re.M)
        assert hint is None or ctas_by_registers(k.metadata["registers"], 32 * num_warps) >= int(hint.group(1))
        assert not re.search(r"(ld|st)\.global\.b(32|16)\b", ptx(k))


def test_the_8_warp_layer_norm_takes_a_sixth_cta() -> None:
    """Left alone, ptxas gives it 48 registers: 5 CTAs of 256 threads an SM, where Triton's 40 fit 6
    (5% slower by ncu on an H100). `.minnctapersm 6` brings it to 40 without spilling."""
    k = layer_norm(4096, 8)
    assert re.search(r"^\.minnctapersm 6$", ptx(k), re.M)
    assert k.metadata["registers"] <= 40 and no_spills(k)


def test_vector_add_is_unchanged() -> None:
    k = compile_module(kernels.vector_add(), target="sm_90", isolate=False)
    assert k.metadata["registers"] <= 32 and no_spills(k)
    assert ".minnctapersm" not in ptx(k)
    assert len(re.findall(r"ld\.global\.v4\.b32", ptx(k))) == 4


# ---- the reduction across warps -----------------------------------------------------------------


def test_cross_warp_step_reads_one_partial_a_thread() -> None:
    k = compile_module(kernels.softmax(), target="sm_90", num_warps=8, isolate=False)
    text = ptx(k)
    assert len(re.findall(r"ld\.shared\.b32", text)) == 2 and "ld.shared.v" not in text
    assert text.count("shfl.sync.bfly.b32") == 2 * (5 + 3)
    assert k.metadata["shared"] == 2 * 8 * 4


def test_2d_reduction_whose_lanes_hold_distinct_rows_reads_every_warp() -> None:
    """Reducing axis 0 of a [64, 64] tile, every lane holds other columns: no lane bits are free
    for the shuffles, so each thread reads the partial of every warp as before."""
    k = KernelBuilder("colsum", [("x", PointerType(float32)), ("y", PointerType(float32))])
    rows, cols = k.arange(0, 64), k.arange(0, 64)
    offs = k.bin("add", k.bin("mul", k.expand(rows, 1), 64), k.expand(cols, 0))
    k.store(k.ptrs(k["y"], cols), k.reduce(k.load(k.ptrs(k["x"], offs)), 0, "add"))
    compiled = compile_module(k.module(divisibility=[0, 1]), target="sm_90", num_warps=4, isolate=False)
    assert compiled.metadata["spill_stores"] == 0
    assert "ld.shared" in ptx(compiled)


# ---- register indices -------------------------------------------------------------------------


def _evaluate(value: object, tid: int) -> int:
    """The value of an i32 built from `tid.x` by the lowering's index helpers."""
    import llvmlite.ir as ir

    if isinstance(value, ir.Constant):
        return int(value.constant)
    assert isinstance(value, ir.Instruction)
    if isinstance(value, ir.CallInstr):
        assert "tid.x" in value.callee.name
        return tid
    a, b = (_evaluate(v, tid) for v in value.operands)
    ops = {"and": a & b, "or": a | b, "xor": a ^ b, "add": a + b, "mul": a * b, "shl": a << b, "lshr": a >> b}
    return ops[value.opname] & 0xFFFFFFFF


@pytest.mark.parametrize(
    "ll",
    [
        Blocked((4,), (32,), (16,), (0,)).linear((16384,)),
        Blocked((8,), (32,), (4,), (0,)).linear((512,)),  # lanes and warps replicate
        Blocked((1, 4), (8, 4), (4, 1), (1, 0)).linear((32, 16)),
        Blocked((2, 2), (4, 8), (2, 2), (0, 1)).linear((64, 64)),
        LinearLayout.distributed((16,), ((1,),), ((2,), (4,), (6,), (8,), (0,)), ((0,), (0,))),  # not powers of two
    ],
    ids=str,
)
def test_register_indices_match_the_layout(ll: LinearLayout) -> None:
    ctx = Lowering(assign_layouts(kernels.vector_add(), 4), get_target("sm_90"))
    warps = len(ll.warp)
    for r in range(ll.num_regs):
        index = ctx.index(ll, r)
        for tid in range(32 << warps):
            got = tuple(_evaluate(v, tid) for v in index)
            assert got == ll.index(r, tid & 31, tid >> 5), (r, tid)


def test_blocked_index_is_one_shift_of_tid() -> None:
    ctx = Lowering(assign_layouts(kernels.vector_add(), 16), get_target("sm_90"))
    (dyn,) = ctx.dyn_index(Blocked((4,), (32,), (16,), (0,)).linear((16384,)))
    assert dyn.opname == "shl" and dyn.operands[0].opname == "and"
    assert [o.constant for o in (dyn.operands[0].operands[1], dyn.operands[1])] == [511, 2]


# ---- masks: runs of equal truth values ----------------------------------------------------------


def _masked_copy(pred: str, swap: bool) -> str:
    k = KernelBuilder("masked_copy", [("x", PointerType(float32)), ("y", PointerType(float32)), ("n", int32)])
    offs = k.arange(0, 1024)
    mask = k.cmp(pred, k["n"], offs) if swap else k.cmp(pred, offs, k["n"])
    k.store(k.ptrs(k["y"], offs), k.load(k.ptrs(k["x"], offs), mask), mask)
    return ptx(compile_module(k.module(divisibility=[0, 1, 2]), target="sm_90", isolate=False))


@pytest.mark.parametrize(("pred", "swap"), [("lt", False), ("ge", False), ("gt", True), ("le", True)])
def test_masks_constant_over_runs_keep_128_bit_accesses(pred: str, swap: bool) -> None:
    text = _masked_copy(pred, swap)
    assert len(re.findall(r"ld\.global\.v4\.b32", text)) == 2
    assert len(re.findall(r"setp\.\w+\.s32", text)) == 2


@pytest.mark.parametrize(("pred", "swap"), [("le", False), ("gt", False), ("lt", True), ("ge", True)])
def test_masks_that_can_change_inside_a_run_stay_scalar(pred: str, swap: bool) -> None:
    """offs <= n is true at offs == n and false at n + 1, n % 16 == 0 notwithstanding."""
    text = _masked_copy(pred, swap)
    assert "ld.global.v" not in text and len(re.findall(r"ld\.global\.b32", text)) == 8


# ---- occupancy ------------------------------------------------------------------------------------


def test_ctas_by_registers() -> None:
    assert ctas_by_registers(64, 512) == 2 and ctas_by_registers(65, 512) == 1
    assert ctas_by_registers(80, 512) == 1 and ctas_by_registers(128, 256) == 2
    assert ctas_by_registers(129, 256) == 1 and ctas_by_registers(32, 128) == 16


def test_when_the_hint_is_tried() -> None:
    sm90, sm86 = get_target("sm_90"), get_target("sm_86")
    assert hinted_ctas(sm90, 80, 512, 128) == 2
    assert hinted_ctas(sm90, 64, 512, 128) is None  # two CTAs already; 56 registers would not fit a third
    assert hinted_ctas(sm90, 40, 1024, 0) is None  # 32 registers would be the budget
    assert hinted_ctas(sm90, 0, 512, 0) is None  # the log did not say
    assert hinted_ctas(sm86, 100, 1024, 0) is None  # 1536 threads an SM
    assert hinted_ctas(sm90, 80, 512, 150 * 1024) is None  # shared memory for one CTA only
    assert hinted_ctas(sm90, 168, 256, 0) == 2
    # One allocation step down (8 registers) fits one more CTA: 48 -> 40 registers, 5 -> 6 CTAs of 256 threads.
    assert hinted_ctas(sm90, 48, 256, 0) == 6
    assert hinted_ctas(sm90, 44, 256, 0) == 6  # allocated as 48
    assert hinted_ctas(sm90, 56, 256, 0) == 5
    assert hinted_ctas(sm90, 64, 256, 0) is None  # 56 registers fit 4 CTAs, as 64 do: no gain in one step
    assert hinted_ctas(sm90, 128, 256, 96 * 1024) is None  # shared memory for two CTAs only
    assert hinted_ctas(sm90, 24, 128, 0) is None  # 16 CTAs of 128 threads: the SM's threads are full


def test_min_ctas_directive_follows_maxntid() -> None:
    text = ".visible .entry k(\n)\n.maxntid 512\n{\n}\n"
    assert with_min_ctas(text, 2) == ".visible .entry k(\n)\n.maxntid 512\n.minnctapersm 2\n{\n}\n"
    assert with_min_ctas(".visible .entry k()\n{\n}\n", 2) is None
    assert with_min_ctas(with_min_ctas(text, 2) or "", 2) is None


def test_hinted_link_that_spills_is_not_kept() -> None:
    calls: list[str] = []

    def link(text: str, arch: str, name: str) -> tuple[bytes, str]:
        calls.append(text)
        return b"hinted", "Function properties for k\n0 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\nUsed 64 registers"

    first_log = "Function properties for k\n0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\nUsed 80 registers"
    text = ".visible .entry k()\n.maxntid 512\n{\n}\n"
    assert more_ctas(text, b"first", first_log, get_target("sm_90"), "k", 512, 0, link) == (text, b"first", first_log)
    assert len(calls) == 1 and ".minnctapersm 2" in calls[0]


def test_hinted_link_that_fails_is_not_kept() -> None:
    def link(text: str, arch: str, name: str) -> tuple[bytes, str]:
        raise LinkError("ptxas fatal   : (C7602) Insufficient registers (128) to compile instruction")

    first_log = "Function properties for k\n0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\nUsed 168 registers"
    text = ".visible .entry k()\n.maxntid 256\n{\n}\n"
    assert more_ctas(text, b"first", first_log, get_target("sm_90a"), "k", 256, 0, link) == (text, b"first", first_log)


def test_the_hint_is_tried_on_the_kernel_as_it_runs_beside_another_cta() -> None:
    """Given `sharing` (a kernel whose register-A product would stay in flight), the PTX linked with the hint is
    what `sharing` makes, made only when a hint is tried; kept as any hinted link is, else the first stays."""
    made: list[str] = []
    linked: list[str] = []
    text = ".visible .entry k()\n.maxntid 256\n{\n}\n"
    beside = ".visible .entry k()\n.maxntid 256\n{\n// waited where issued\n}\n"

    def sharing() -> str:
        made.append(beside)
        return beside

    def link(ptx: str, arch: str, name: str) -> tuple[bytes, str]:
        linked.append(ptx)
        return b"hinted", "Function properties for k\n0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\nUsed 127 registers"

    first_log = "Function properties for k\n0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\nUsed 158 registers"
    sm90a = get_target("sm_90a")
    ptx, cubin, _ = more_ctas(text, b"first", first_log, sm90a, "k", 256, 0, link, sharing)
    assert (ptx, cubin) == (beside.replace(".maxntid 256\n", ".maxntid 256\n.minnctapersm 2\n"), b"hinted")
    assert linked == [ptx] and made == [beside]
    two_ctas = "Function properties for k\n0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\nUsed 107 registers"
    assert more_ctas(text, b"first", two_ctas, sm90a, "k", 256, 0, link, sharing) == (text, b"first", two_ctas)
    assert made == [beside]  # no hint tried: nothing made
