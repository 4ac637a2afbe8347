"""Resource usage read from the cubin's ELF (registers, stack, static shared memory), checked
against what ptxas says in nvJitLink's info log, and kernel metadata that does not depend on
the log's wording (nvJitLink 13.0 and 13.5 word it differently)."""

from __future__ import annotations

import struct

import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

from despina.compiler.backends.nvptx import compile_module, link_cubin, parse_info_log  # noqa: E402
from despina.compiler.backends.nvptx import compiler as compiler_module  # noqa: E402
from despina.compiler.backends.nvptx.cubin import (  # noqa: E402
    EIATTR_REGCOUNT,
    CubinError,
    cubin_resources,
    function_attributes,
    sections,
)
from despina.compiler.backends.nvptx.link import kernel_resources, ptxas_warnings  # noqa: E402

from .. import kernels  # noqa: E402

ARCHS = ["sm_80", "sm_86", "sm_90", "sm_90a"]

# A kernel with a 256-byte local array indexed at run time: a stack frame ptxas cannot remove.
STACK_PTX = """.version 8.7
.target {arch}
.address_size 64
.visible .entry with_stack(.param .u64 x, .param .u32 i)
{{
  .local .align 4 .b8 buf[256];
  .reg .b32 %r<4>; .reg .b64 %rd<7>;
  ld.param.u64 %rd1, [x]; ld.param.u32 %r1, [i];
  mov.u64 %rd2, buf; cvta.local.u64 %rd2, %rd2;
  mov.u32 %r2, %tid.x;
  mul.wide.u32 %rd3, %r2, 4; and.b64 %rd3, %rd3, 252; add.s64 %rd4, %rd2, %rd3;
  st.u32 [%rd4], %r2;
  mul.wide.u32 %rd5, %r1, 4; and.b64 %rd5, %rd5, 252; add.s64 %rd6, %rd2, %rd5;
  ld.u32 %r3, [%rd6];
  cvta.to.global.u64 %rd1, %rd1; st.global.u32 [%rd1], %r3;
  ret;
}}
"""


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", sorted(kernels.ALL))
def test_cubin_and_info_log_agree(name: str, arch: str) -> None:
    k = compile_module(kernels.ALL[name](), target=arch, isolate=False)
    from_log = parse_info_log(k.metadata["link_log"], k.name)
    from_elf = cubin_resources(k.cubin, k.name)
    assert from_log.registers > 0, k.metadata["link_log"]
    assert from_elf.registers == from_log.registers
    assert from_elf.stack == from_log.stack
    assert from_elf.static_shared == from_log.static_shared
    assert k.metadata["registers"] == from_log.registers


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_stack_frame_from_the_cubin(arch: str) -> None:
    cubin, log = link_cubin(STACK_PTX.format(arch=arch), arch)
    from_log = parse_info_log(log, "with_stack")
    assert from_log.stack == 256
    from_elf = cubin_resources(cubin, "with_stack")
    assert (from_elf.registers, from_elf.stack) == (from_log.registers, 256)
    assert kernel_resources(cubin, "", "with_stack").stack == 256


@pytest.mark.parametrize("log", [
    "",  # no verbose output at all
    "info    : Function properties for 'k':\ninfo    : used 7 registers, 0 stack, 0 bytes smem\n",  # another wording
])
def test_kernel_metadata_does_not_depend_on_the_info_log(monkeypatch: pytest.MonkeyPatch, log: str) -> None:
    expected = compile_module(kernels.softmax(), target="sm_90", isolate=False).metadata["registers"]
    real = compiler_module.link_cubin
    monkeypatch.setattr(compiler_module, "link_cubin", lambda ptx, arch, name: (real(ptx, arch, name)[0], log))
    k = compile_module(kernels.softmax(), target="sm_90", isolate=False)
    assert k.metadata["registers"] == expected > 0
    assert (k.metadata["spill_stores"], k.metadata["spill_loads"], k.metadata["stack"]) == (0, 0, 0)


def test_register_count_in_the_text_section_header_is_the_fallback() -> None:
    """sm_80 cubins also keep the count in `.text.<kernel>`'s sh_info; without EIATTR_REGCOUNT
    that is what is read (nvJitLink 13.5 leaves it 0 for sm_90, hence EIATTR_REGCOUNT first)."""
    k = compile_module(kernels.matmul(), target="sm_80", isolate=False)
    regs = function_attributes(k.cubin)[(k.name, EIATTR_REGCOUNT)]
    text = next(s for s in sections(k.cubin) if s.name == f".text.{k.name}")
    assert text.info >> 24 == regs > 0
    stripped = bytearray(k.cubin)
    info = next(s for s in sections(k.cubin) if s.name == ".nv.info")
    at = info.offset
    while at < info.offset + info.size:
        fmt, attr = stripped[at], stripped[at + 1]
        size = struct.unpack_from("<H", stripped, at + 2)[0] if fmt == 4 else 0
        if attr == EIATTR_REGCOUNT:
            stripped[at + 1] = 0x01  # EIATTR_PAD
        at += 4 + size
    assert (k.name, EIATTR_REGCOUNT) not in function_attributes(bytes(stripped))
    assert cubin_resources(bytes(stripped), k.name).registers == regs


def test_not_a_cubin() -> None:
    with pytest.raises(CubinError, match="not an ELF file"):
        cubin_resources(b"//\n.version 8.7\n" * 8, "k")
    with pytest.raises(CubinError, match="out of bounds"):
        sections(compile_module(kernels.vector_add(), isolate=False).cubin[:100])
    assert kernel_resources(b"", "ptxas info    : Used 9 registers\n", "k").registers == 9


def test_parse_info_log_in_the_linkers_wording() -> None:
    log = (
        "info    : 0 bytes gmem\n"
        "info    : Function properties for 'k':\n"
        "info    : used 32 registers, used 1 barriers, 16 stack, 1024 bytes smem, 556 bytes cmem[0], 0 bytes lmem\n"
    )
    res = parse_info_log(log, "k")
    assert (res.registers, res.stack, res.static_shared) == (32, 16, 1024)


def test_ptxas_warnings_are_the_numbered_lines() -> None:
    log = (  # nvJitLink 13.5's info log for the bf16 tutorial matmul before its epilogue rounded in pairs
        "ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
        "non wgmma instructions reading accumulator registers of  a wgmma between start and end of the pipeline "
        "stage in the function 'matmul_kernel' in line 0\n"
        "ptxas info    : 0 bytes gmem\n"
        "ptxas info    : Used 128 registers, used 1 barriers\n"
    )
    (warning,) = ptxas_warnings(log)
    assert warning.startswith("(C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized")
    assert ptxas_warnings("ptxas info    : Used 128 registers, used 1 barriers\n") == []
    assert compile_module(kernels.vector_add(), isolate=False).metadata["ptxas_warnings"] == []
