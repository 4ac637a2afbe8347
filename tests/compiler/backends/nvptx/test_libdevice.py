"""libdevice: `pow`, fp32 `erf` and fp64 math call `__nv_*` functions, which the LLVM stage links
from libdevice.10.bc (the nvidia-nvvm wheel), inlines and strips: no call is left in the PTX."""

from __future__ import annotations

import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

from despina.compiler.backends.nvptx import BackendError, compile_module, toolkit, unresolved_intrinsics  # noqa: E402
from despina.compiler.backends.nvptx.llvm import emit_ptx  # noqa: E402
from despina.compiler.backends.nvptx.lower import math as lower_math  # noqa: E402
from despina.compiler.ir.core import Module  # noqa: E402
from despina.compiler.ir.types import PointerType, ScalarType, bfloat16, float16, float32, float64  # noqa: E402

from .. import kernels  # noqa: E402
from ..filecheck import filecheck  # noqa: E402
from ..kernel_builder import KernelBuilder  # noqa: E402

pytestmark = pytest.mark.skipif(toolkit.find_libdevice() is None, reason="libdevice (nvidia-nvvm) is not installed")


def math_kernel(name: str, elem: ScalarType, ops: list[str], block: int = 256) -> Module:
    """y = sum of op(x) over `ops` (`pow` takes x, x)."""
    k = KernelBuilder(name, [("x", PointerType(elem)), ("y", PointerType(elem))])
    offs = k.bin("add", k.bin("mul", k.program_id(0), block), k.arange(0, block))
    x = k.load(k.ptrs(k["x"], offs))
    total = None
    for op in ops:
        v = k.op(op, x, x) if op == "pow" else k.op(op, x)
        total = v if total is None else k.bin("add", total, v)
    k.store(k.ptrs(k["y"], offs), total)
    return k.module(divisibility=[0, 1])


def check_linked(module: Module, arch: str = "sm_90") -> tuple[str, str]:
    k = compile_module(module, target=arch, isolate=False)
    ptx, llir = str(k.asm["ptx"]), str(k.asm["llir"])
    assert unresolved_intrinsics(ptx) == []
    assert "__nv_" not in ptx and "__nvvm_reflect" not in ptx and ".extern" not in ptx
    assert "declare double @__nv_" not in llir and "declare float @__nv_" not in llir
    assert k.metadata["libdevice"] == toolkit.find_libdevice()
    assert k.cubin[:4] == b"\x7fELF"
    return ptx, llir


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_fp64_math_links_libdevice(arch: str) -> None:
    ops = ["exp", "exp2", "log", "log2", "sin", "cos", "erf", "rsqrt", "sqrt", "pow"]
    ptx, _ = check_linked(math_kernel("fp64_math", float64, ops), arch)
    filecheck(ptx, "CHECK: ld.global.v4.b32\nCHECK: fma.rn.f64\nCHECK: sqrt.rn.f64\nCHECK: st.global.v4.b32")


@pytest.mark.parametrize("op", ["exp", "log", "sin", "cos", "erf", "pow"])
def test_each_fp64_function_alone(op: str) -> None:
    ptx, _ = check_linked(math_kernel(f"fp64_{op}", float64, [op]))
    assert "fma.rn.f64" in ptx or "mul.f64" in ptx


def test_fp32_erf_is_libdevice_erff() -> None:
    ptx, llir = check_linked(math_kernel("erf32", float32, ["erf"]))
    filecheck(ptx, "CHECK: abs.f32\nCHECK: fma.rn.f32\nCHECK: ex2.approx.ftz.f32\nCHECK-NOT: call")
    assert "define ptx_kernel void @erf32" in llir and llir.count("define ") == 1  # all inlined


def test_fp32_pow_is_libdevice_powf() -> None:
    ptx, _ = check_linked(math_kernel("pow32", float32, ["pow"]))
    assert "fma.rn.f32" in ptx and "call" not in ptx


@pytest.mark.parametrize("elem", [float16, bfloat16])
def test_16_bit_pow_and_erf_compute_in_fp32(elem: ScalarType) -> None:
    ptx, _ = check_linked(math_kernel(f"pow_{elem}", elem, ["pow", "erf"]))
    ty = {"fp16": "f16", "bf16": "bf16"}[elem.name]
    filecheck(ptx, f"CHECK: cvt.f32.{ty}\nCHECK: ex2.approx.ftz.f32\nCHECK: cvt.rn.{ty}.f32")


def test_kernels_without_libdevice_calls_do_not_link_it() -> None:
    k = compile_module(kernels.softmax(), isolate=False)
    assert "libdevice" not in k.metadata
    assert str(k.asm["llir"]).count("define ") == 1


def test_missing_libdevice_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lower_math, "find_libdevice", lambda: None)
    with pytest.raises(BackendError, match=r"kernel 'pow64'.*'pow' on fp64 needs libdevice.*pip install nvidia-nvvm"):
        compile_module(math_kernel("pow64", float64, ["pow"]), isolate=False)


def test_unlinked_libdevice_calls_are_found_in_the_ptx() -> None:
    llir = (
        "declare double @__nv_sin(double)\n"
        "define ptx_kernel void @k(ptr addrspace(1) %p) {\n"
        "  %x = load double, ptr addrspace(1) %p\n  %y = call double @__nv_sin(double %x)\n"
        "  store double %y, ptr addrspace(1) %p\n  ret void\n}\n"
    )
    _, ptx = emit_ptx(llir, "sm_90")
    assert unresolved_intrinsics(ptx) == ["__nv_sin"]
    _, linked = emit_ptx(llir, "sm_90", libdevice=toolkit.find_libdevice())
    assert unresolved_intrinsics(linked) == [] and "__internal_trig_reduction_slowpathd" in linked


def test_calls_to_functions_defined_in_the_ptx_are_resolved() -> None:
    ptx = (
        ".func (.param .b64 func_retval0) __nv_pow(\n.param .b64 a\n)\n;\n"
        "call.uni (retval0), __nv_pow, (param0, param1);\ncall.uni (retval0), vprintf, (param0);\n"
    )
    assert unresolved_intrinsics(ptx) == []


def test_unreadable_libdevice_is_an_llvm_error(tmp_path) -> None:
    from despina.compiler.backends.nvptx import LLVMError

    bad = tmp_path / "libdevice.10.bc"
    bad.write_bytes(b"not bitcode")
    llir = "define ptx_kernel void @k() {\n  ret void\n}\n"
    with pytest.raises(LLVMError, match="cannot read libdevice"):
        emit_ptx(llir, "sm_90", libdevice=str(bad))
