"""The NVPTX pipeline end to end on the CPU: every test kernel links to a cubin for sm_80 and
sm_90 with nvJitLink; metadata, targets and the failure paths."""

from __future__ import annotations

import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

from despina.compiler.backends.nvptx import (  # noqa: E402
    TARGETS,
    BackendError,
    LLVMError,
    compile_module,
    get_target,
    parse_info_log,
    unresolved_intrinsics,
)
from despina.compiler.backends.nvptx.isolate import emit_ptx_isolated  # noqa: E402

from .. import kernels  # noqa: E402


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", sorted(kernels.ALL))
def test_every_kernel_links_to_a_cubin(name: str, arch: str) -> None:
    k = compile_module(kernels.ALL[name](), target=arch)
    assert k.cubin[:4] == b"\x7fELF"
    assert set(k.asm) == {"ir", "gpuir", "llir", "ptx", "cubin", "lines"}
    assert f".target {arch}" in str(k.asm["ptx"])
    assert ".version 8.7" in str(k.asm["ptx"])
    assert k.metadata["registers"] > 0
    assert k.metadata["spill_stores"] == 0


def test_metadata() -> None:
    k = compile_module(kernels.softmax(), target="sm_90", num_warps=8, num_stages=2)
    md = k.metadata
    assert md["name"] == "softmax_kernel" == k.name
    assert md["num_warps"] == 8 and md["num_threads"] == 256 and md["num_stages"] == 2
    assert md["target"] == "sm_90"
    assert md["shared"] >= 8 * 4  # one partial per warp for the cross-warp reductions
    assert ".maxntid 256" in str(k.asm["ptx"])


@pytest.mark.parametrize("arch", sorted(TARGETS))
def test_all_targets_link(arch: str) -> None:
    k = compile_module(kernels.vector_add(), target=arch, isolate=False)
    assert k.cubin[:4] == b"\x7fELF"


def test_target_validation() -> None:
    assert get_target("90").arch == "sm_90" and get_target("SM_90A").arch_specific
    with pytest.raises(ValueError, match="unsupported target 'sm_75'"):
        compile_module(kernels.vector_add(), target="sm_75")
    with pytest.raises(ValueError, match="num_warps"):
        compile_module(kernels.vector_add(), num_warps=3)


def test_parse_info_log() -> None:
    log = (
        "ptxas info    : 0 bytes gmem\n"
        "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
        "ptxas info    : Function properties for k\n"
        "ptxas         .     8 bytes stack frame, 12 bytes spill stores, 16 bytes spill loads\n"
        "ptxas info    : Used 40 registers, used 1 barriers, 64 bytes smem\n"
    )
    res = parse_info_log(log, "k")
    assert (res.registers, res.stack, res.spill_stores, res.spill_loads, res.static_shared) == (40, 8, 12, 16, 64)


def test_unresolved_llvm_calls_are_found() -> None:
    ptx = ".extern .func (.param .b32 r) llvm.foo.bar\n(\n.param .b32 p\n)\n;\n call.uni (retval0), llvm.foo.bar, (param0);"
    assert unresolved_intrinsics(ptx) == ["llvm.foo.bar"]
    assert unresolved_intrinsics("ex2.approx.f32 %r1, %r2;") == []


def test_unresolved_llvm_call_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from despina.compiler.backends.nvptx.lower import RULES
    from despina.compiler.ir.types import PointerType, float32

    from ..kernel_builder import KernelBuilder

    def bogus(ctx, op, args):  # type: ignore[no-untyped-def]
        return [[ctx.call("llvm.despina.missing.f32", x.type, [x]) for x in args[0]]]

    monkeypatch.setitem(RULES.rules, "neg", bogus)
    k = KernelBuilder("neg_kernel", [("x", PointerType(float32))])
    k.store(k["x"], k.op("neg", k.load(k["x"])))
    with pytest.raises(BackendError, match=r"neg_kernel.*llvm\.despina\.missing\.f32"):
        compile_module(k.module(), isolate=False)


def test_llvm_crash_becomes_an_exception() -> None:
    llir = (
        "define ptx_kernel void @k() {\n  call void @llvm.nvvm.wgmma.fence.sync.aligned()\n  ret void\n}\n"
        "declare void @llvm.nvvm.wgmma.fence.sync.aligned()\n"
    )
    with pytest.raises(LLVMError, match="Cannot select"):
        emit_ptx_isolated(llir, "sm_80")
    _, ptx = emit_ptx_isolated(llir, "sm_90a")  # a fresh worker serves the next request
    assert "wgmma.fence.sync.aligned" in ptx


def test_invalid_llvm_ir_is_an_exception() -> None:
    with pytest.raises(LLVMError, match="invalid LLVM IR"):
        emit_ptx_isolated("define void @k() { ret i32 0 }", "sm_90")


def test_unknown_op_names_the_op() -> None:
    from despina.compiler.ir.core import Op

    module = kernels.vector_add()
    body = module.kernel.body
    body.ops.insert(0, Op("frobnicate", [], []))
    with pytest.raises(BackendError, match="kernel 'add_kernel': GPU IR after assign_layouts, op 'frobnicate': unknown op"):
        compile_module(module, isolate=False)
