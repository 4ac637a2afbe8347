"""The GPU IR's text form: every layout prints and parses back to itself, every GPU IR of the examples
and the benchmark kernels prints, parses and prints again to the same text, and the parsed GPU IR
lowers to the same LLVM IR as the one the passes made (locations included). Malformed text is an
`IRParseError` that says where and what."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from despina.compiler.backends.gpuir.encoding_text import parse_encoding
from despina.compiler.backends.gpuir.encodings import Blocked, DotOperand, Slice
from despina.compiler.backends.gpuir.mma import Mma, MmaOperand
from despina.compiler.backends.gpuir.parser import parse_gpuir
from despina.compiler.backends.gpuir.passes import build_gpuir
from despina.compiler.backends.gpuir.pipeline import plan_pipelines
from despina.compiler.backends.gpuir.printer import print_gpuir
from despina.compiler.backends.gpuir.shared import SwizzledShared
from despina.compiler.backends.gpuir.verifier import GpuIRError, verify_gpuir
from despina.compiler.ir.parser import IRParseError
from despina.compiler.options import CompileOptions

from . import kernels

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ir"))

from mutations import MUTATIONS, mutate  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
MMA = Mma(2, (2, 4))
LAYOUTS = [
    Blocked((1, 8), (4, 8), (8, 1), (1, 0)),
    Slice(0, Blocked((1, 8), (4, 8), (8, 1), (1, 0))),
    DotOperand(1, Blocked((1, 1), (8, 4), (2, 2), (1, 0))),
    MMA,
    Mma(3, (4, 1), (16, 128)),
    MmaOperand(0, MMA, 2),
    Slice(1, MmaOperand(1, MMA, 4)),
    SwizzledShared(8, 1, 8, (1, 0)),
    SwizzledShared(8, 1, 8, (0, 1), 64),
]


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_every_layout_parses_back_to_itself(layout: Any) -> None:
    assert parse_encoding(str(layout)) == layout


@pytest.mark.parametrize(("text", "message"), [
    ("blocked<spt=[1], tpw=[32], wpc=[4]>", "blocked takes 0 positional parameters and order, spt, tpw, wpc"),
    ("blocked<spt=[1, 1], tpw=[32], wpc=[4], order=[0]>", "one entry per dimension"),
    ("blocked<spt=[1],tpw=[32],wpc=[4],order=[0]>", "is not written as the layout prints"),
    ("mma<2, warps=[2, 4], instr=[16, 8]>", "version is written v2 or v3"),
    ("dot_op<0, parent=blocked<spt=[1], tpw=[32], wpc=[4], order=[0]>, kWidth=2>", "parent must be an mma layout"),
    ("striped<vec=2>", "unknown layout 'striped'"),
    ("slice<dim=0, parent=swizzled_shared<vec=8, perPhase=1, maxPhase=8, order=[1, 0]>>", "register layout"),
    ("mma<v2, warps=[2, 4], instr=[16, 8]> tail", "after the layout"),
    ("blocked<spt=[1], tpw=[32], wpc=[4], order=[0]", "unexpected end"),
])
def test_malformed_layouts_are_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_encoding(text)


def _example_modules() -> list[tuple[str, Any, int]]:
    """(name, tile-IR module, num_warps) of the tutorial matmul and the attention example as launched."""
    sys.path.insert(0, str(ROOT / "examples"))
    import flash_attention
    import matmul

    import despina
    from despina.compiler.ir.parser import parse_module

    out = []
    sig = "*fp16:16,*fp16:16,*fp16:16,i32:16,i32:16,i32:16,i32:16,i32:1,i32:16,i32:1,i32:16,i32:1"
    k = despina.compile(matmul.matmul_kernel, sig, {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8},
                        num_warps=8, num_stages=3, target="sm_80")
    out.append(("matmul", parse_module(k.asm["ir"]), 8))
    sig = "*fp16:16,*fp16:16,*fp16:16,*fp16:16,fp32,i32:16,i32:16,i32:16"
    for causal in (False, True):
        k = despina.compile(flash_attention.attention_fwd, sig,
                            {"HEAD_DIM": 64, "BLOCK_M": 128, "BLOCK_N": 64, "CAUSAL": causal}, num_warps=4,
                            num_stages=3, target="sm_80")
        out.append((f"attention causal={causal}", parse_module(k.asm["ir"]), 4))
    return out


BUILT = [("vector_add", kernels.vector_add(), 4), ("softmax", kernels.softmax(), 4),
         ("layer_norm", kernels.layer_norm(), 8), ("matmul_fma", kernels.matmul(), 4),
         ("atomic_add", kernels.atomic_add(), 4), ("loop_carry", kernels.loop_carry(), 4)]


@pytest.fixture(scope="module")
def modules() -> list[tuple[str, Any, int]]:
    pytest.importorskip("llvmlite")
    return BUILT + _example_modules()


@pytest.mark.parametrize("wgmma", [False, True], ids=["sm_80", "sm_90a"])
def test_gpu_ir_prints_parses_and_prints_the_same(modules: list[tuple[str, Any, int]], wgmma: bool) -> None:
    for name, module, warps in modules:
        gpu = build_gpuir(module, CompileOptions(num_warps=warps, num_stages=3), wgmma)
        for locs in (False, True):
            text = print_gpuir(gpu, locs)
            parsed = parse_gpuir(text)
            verify_gpuir(parsed)
            assert print_gpuir(parsed, locs) == text, name


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_parsed_gpu_ir_lowers_to_the_same_llvm_ir(modules: list[tuple[str, Any, int]], target: str) -> None:
    from despina.compiler.backends.nvptx.lower import lower
    from despina.compiler.backends.nvptx.target import get_target

    tgt = get_target(target)
    for name, module, warps in modules:
        gpu = build_gpuir(module, CompileOptions(num_warps=warps, num_stages=3), tgt.has("wgmma"))
        parsed = parse_gpuir(print_gpuir(gpu, locs=True))
        plan_pipelines(parsed, 3)  # the plans are made from the text's IR, as the pass made them
        assert str(lower(parsed, tgt)[0]) == str(lower(gpu, tgt)[0]), name


def _text() -> str:
    return print_gpuir(build_gpuir(kernels.vector_add(), CompileOptions(num_warps=4)))


@pytest.mark.parametrize(("edit", "message"), [
    (lambda t: t.replace("#L0 = blocked", "#L0 = striped", 1), "1:7: bad layout for #L0: unknown layout 'striped'"),
    (lambda t: t.replace(" : tile<1024xint32> #L0", " : tile<1024xint32> #L7", 1), "layout alias #L7 is not defined"),
    (lambda t: t.replace("program_id() {axis = 0} : int32", "program_id() {axis = 0} : int32 #L0", 1),
     "4:40: only tiles and buffers take a layout, not int32"),
    (lambda t: t.replace("num_warps = 4}", "num_warps = 3}", 1), "num_warps must be 1, 2, 4, 8, 16 or 32, got 3"),
    (lambda t: t.replace("{axis = 0}", "{axis = 0, engine = \"mma\"}", 1), "unknown attribute 'engine'"),
    (lambda t: t.replace("#L0 = blocked", "#L0 = swizzled_shared<vec=8, perPhase=1, maxPhase=8, order=[1, 0]>\n#L9 = "
                         "blocked", 1), "#L0 is swizzled_shared<vec=8, perPhase=1, maxPhase=8, order=[1, 0]>; a tile "
                                        "takes a register layout"),
    (lambda t: t.replace(" : tile<1024xint32> #L0", " : tile<512xint32> #L0", 1), "by its type rule"),
])
def test_malformed_gpu_ir_text_says_where(edit: Any, message: str) -> None:
    with pytest.raises(IRParseError) as info:
        parse_gpuir(edit(_text()))
    assert message in str(info.value)


FUZZED = [print_gpuir(build_gpuir(module, CompileOptions(num_warps=warps)), locs) for _, module, warps in BUILT[:4]
          for locs in (False, True)]


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(FUZZED), st.lists(MUTATIONS, min_size=1, max_size=3))
def test_mutated_gpu_ir_text_fails_cleanly(text: str, mutations: list[tuple[str, int, str]]) -> None:
    """Damaged GPU IR is an IRParseError or parses; what parses verifies or is a GpuIRError, and prints
    back to text that parses to the same print."""
    try:
        gpu = parse_gpuir(mutate(text, mutations))
    except IRParseError:
        return
    try:
        verify_gpuir(gpu)
    except GpuIRError:
        return
    assert print_gpuir(parse_gpuir(print_gpuir(gpu, True)), True) == print_gpuir(gpu, True)
