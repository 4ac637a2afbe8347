"""The SASS stage: nvdisasm found in the wheel (or the toolkit), run on first access to
`asm["sass"]`, and absent without nvdisasm."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

from despina.compiler.backends.nvptx import compile_module, sass, toolkit  # noqa: E402
from despina.compiler.backends.nvptx.lines import sass_lines  # noqa: E402
from despina.compiler.backends.nvptx.sass import SassError, Stages, disassemble, disassemble_lines  # noqa: E402

from .. import kernels  # noqa: E402

needs_nvdisasm = pytest.mark.skipif(toolkit.find_nvdisasm() is None, reason="nvdisasm is not installed")


@needs_nvdisasm
def test_sass_is_disassembled_on_first_access() -> None:
    k = compile_module(kernels.vector_add(), target="sm_90")
    assert set(k.asm) == {"ir", "gpuir", "llir", "ptx", "cubin", "lines"}  # nothing paid for yet
    assert "sass" in k.asm
    text = k.asm["sass"]
    assert isinstance(text, str) and "add_kernel" in text
    assert text.count("LDG.E.128") == 4 and text.count("STG.E.128") == 2  # 2 x 128-bit per operand per thread
    assert k.asm["sass"] is text and "sass" in set(k.asm)


@needs_nvdisasm
def test_sass_of_a_reduction_shows_the_shuffles() -> None:
    text = compile_module(kernels.softmax(), target="sm_80").asm.get("sass")
    assert isinstance(text, str) and "SHFL.BFLY" in text and "BAR.SYNC" in text


def test_no_nvdisasm_no_sass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sass, "find_nvdisasm", lambda: None)
    asm = Stages(ptx="...", cubin=b"\x7fELF")
    assert "sass" not in asm and asm.get("sass") is None
    with pytest.raises(KeyError):
        asm["sass"]
    with pytest.raises(SassError, match="pip install nvidia-cuda-nvdisasm"):
        disassemble(b"\x7fELF")


def test_no_cubin_no_sass() -> None:
    asm = Stages(ptx="...")
    assert "sass" not in asm and asm.get("ptx") == "..." and asm.get("cubin", b"") == b""


@needs_nvdisasm
def test_nvdisasm_failure_is_a_clear_error() -> None:
    with pytest.raises(SassError, match="nvdisasm .* failed with status"):
        disassemble(b"not a cubin")


@needs_nvdisasm
def test_the_sass_lines_carry_the_source_lines_of_the_line_table(tmp_path: Path) -> None:
    from frontend.scale_kernel import LOAD_LINE, STORE_LINE, load_kernel, traced

    k = compile_module(traced(load_kernel(tmp_path)), target="sm_90")
    text, annotated = disassemble_lines(k.cubin)
    assert text == k.asm["sass"] and "//##" not in text  # the SASS text is as before: no annotations
    sass = text.splitlines()
    found = sass_lines(annotated, str(tmp_path / "scale.py"))
    ldg = {i for i, line in enumerate(sass, 1) if "LDG.E" in line}
    stg = {i for i, line in enumerate(sass, 1) if "STG.E" in line}
    assert ldg and stg and {found.get(i) for i in ldg} == {LOAD_LINE} and {found.get(i) for i in stg} == {STORE_LINE}
    assert all(sass[i - 1].lstrip().startswith("/*") for i in found)  # instructions only
    assert sass_lines(annotated, str(tmp_path / "other.py")) == {}
