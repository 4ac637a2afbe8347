"""`despina compile FILE.py:KERNEL ...`: each stage to stdout or a file, cubin never to a terminal,
and a clear message (and exit status) for every mistake on the command line."""

from __future__ import annotations

import io
import json
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import despina.language as tl
from despina.cli import main
from despina.cli_compile import UsageError, parse_constexpr

KERNELS = textwrap.dedent(
    """
    import despina
    import despina.language as tl


    @despina.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


    @despina.jit
    def broken_kernel(x_ptr):
        tl.store(x_ptr, undefined_name)


    not_a_kernel = 3
    """
)
SIG = "*fp32:16,*fp32:16,*fp32:16,i32:16"


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "kernels_for_cli.py"
    path.write_text(KERNELS)
    return path


@pytest.fixture
def backend() -> None:
    pytest.importorskip("llvmlite")
    pytest.importorskip("cuda.bindings.nvjitlink")


def compile_cli(source: Path, *extra: str) -> int:
    return main(["compile", f"{source}:add_kernel", "--signature", SIG, "--constexpr", "BLOCK=1024", *extra])


# ---- stages ------------------------------------------------------------------------------------


@pytest.mark.usefixtures("backend")
def test_emit_ptx_to_stdout(source, capsys):
    assert compile_cli(source, "--target", "sm_80", "--num-warps", "8") == 0
    out = capsys.readouterr().out
    assert ".target sm_80" in out and ".maxntid 256" in out and "ld.global.v4.b32" in out


@pytest.mark.usefixtures("backend")
def test_the_options_that_change_the_code(source, capsys):
    assert compile_cli(source, "--target", "sm_80", "--maxnreg", "32", "--no-fp-fusion") == 0
    out = capsys.readouterr().out
    assert ".maxnreg 32" in out and "add.rn.f32" in out
    code, err = run_error(["compile", f"{source}:add_kernel", "-s", SIG, "-c", "BLOCK=64", "--maxnreg", "8"], capsys)
    assert code == 2 and "kernel 'add_kernel': maxnreg=8 is out of range" in err


@pytest.mark.usefixtures("backend")
@pytest.mark.parametrize(("stage", "text"), [("ir", "func @add_kernel"), ("gpuir", "blocked<spt=[4], tpw=[32], wpc=[4], order=[0]>"),
                                             ("llir", "define ptx_kernel void @add_kernel")])
def test_emit_text_stages_to_a_file(source, tmp_path, stage, text):
    out = tmp_path / f"add.{stage}"
    assert compile_cli(source, "--emit", stage, "-o", str(out)) == 0
    assert text in out.read_text()


@pytest.mark.usefixtures("backend")
def test_emit_cubin_and_metadata(source, tmp_path, capsys):
    out = tmp_path / "add.cubin"
    assert compile_cli(source, "--emit", "cubin", "-o", str(out)) == 0
    assert out.read_bytes()[:4] == b"\x7fELF"
    assert compile_cli(source, "--emit", "metadata") == 0
    md = json.loads(capsys.readouterr().out)
    assert md["name"] == "add_kernel" and md["num_warps"] == 4 and md["target"] == "sm_90"


@pytest.mark.usefixtures("backend")
def test_cubin_goes_to_a_pipe(source, capsysbinary):
    assert compile_cli(source, "--emit", "cubin") == 0
    assert capsysbinary.readouterr().out[:4] == b"\x7fELF"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.usefixtures("backend")
def test_cubin_is_never_written_to_a_terminal(source, monkeypatch, capsys):
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    assert compile_cli(source, "--emit", "cubin") == 2
    assert terminal.getvalue() == ""
    assert "refusing to write a binary cubin to a terminal: pass -o FILE" in capsys.readouterr().err


@pytest.mark.usefixtures("backend")
def test_emit_sass(source, capsys):
    from despina.compiler.backends.nvptx.toolkit import find_nvdisasm

    code = compile_cli(source, "--emit", "sass")
    captured = capsys.readouterr()
    if find_nvdisasm() is None:
        assert code == 1 and "pip install nvidia-cuda-nvdisasm" in captured.err
    else:
        assert code == 0 and "LDG.E.128" in captured.out


DESCRIPTOR_KERNEL = textwrap.dedent(
    """
    import despina
    import despina.language as tl


    @despina.jit
    def copy_rows(x_desc, y_desc, BLOCK: tl.constexpr):
        off = tl.program_id(0) * BLOCK
        y_desc.store([off, 0], x_desc.load([off, 0]))
    """
)


def test_a_descriptor_signature(tmp_path, capsys):
    """`tensordesc<...>` entries (commas inside them) name host TensorDescriptor parameters, as with despina.compile."""
    path = tmp_path / "descriptor_kernel.py"
    path.write_text(DESCRIPTOR_KERNEL)
    argv = ["compile", f"{path}:copy_rows", "-c", "BLOCK=64", "--emit", "ir"]
    code, err = run_error([*argv, "-s", "tensordesc<fp16[64,32]>:16,tensordesc<fp16[64,24]>"], capsys)
    assert code == 2 and "signature entry 'tensordesc<fp16[64,24]>': block_shape [64, 24] must hold powers of two" in err
    pytest.importorskip("llvmlite")
    assert main([*argv, "-s", "tensordesc<fp16[64, 32]>:16,tensordesc<fp16[64,32]>"]) == 0
    ir = capsys.readouterr().out
    assert "func @copy_rows(%0: ptr<fp16>, %1: int32, %2: int32, %3: int32, %4: ptr<fp16>, %5: int32, %6: int32, " \
           "%7: int32) kernel" in ir
    assert '"x_desc.base", "x_desc.shape0", "x_desc.shape1", "x_desc.stride0", "y_desc.base"' in ir
    assert "divisibility = [0, 1, 2, 3, 4]" in ir


# ---- through a daemon (DESPINA_SERVER): the same bytes for every stage ------------------------------


@pytest.fixture(scope="module")
def daemons(tmp_path_factory) -> Iterator[dict[str, Any]]:
    """`despina serve` with the NVPTX backend, and one (fake backend) without nvdisasm, as tests/server
    start them."""
    pytest.importorskip("llvmlite")
    pytest.importorskip("cuda.bindings.nvjitlink")
    from server.conftest import Daemon

    nvptx = Daemon(tmp_path_factory.mktemp("nvptx"), compiler=None)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DESPINA_NVDISASM", "")
        try:
            blind = Daemon(tmp_path_factory.mktemp("blind"))
        except BaseException:
            nvptx.stop()
            raise
    yield {"nvptx": nvptx, "blind": blind}
    nvptx.stop()
    blind.stop()


@pytest.fixture
def server(monkeypatch) -> Callable[[str | None], None]:
    """`server(url)`: the next `despina compile` compiles on the daemon at `url` (None: in-process)."""
    monkeypatch.setenv("DESPINA_SERVER_REQUIRED", "1")

    def use(url: str | None) -> None:
        if url is None:
            monkeypatch.delenv("DESPINA_SERVER", raising=False)
        else:
            monkeypatch.setenv("DESPINA_SERVER", url)

    return use


@pytest.fixture(scope="module")
def one_source(tmp_path_factory) -> Path:
    """One file for the tests that compare stages: a cached kernel's stages name the file it was first
    compiled from (the cache key leaves locations out)."""
    path = tmp_path_factory.mktemp("source") / "kernels_for_cli.py"
    path.write_text(KERNELS)
    return path


@pytest.mark.parametrize("scheme", ["grpc", "http"])
@pytest.mark.parametrize("stage", ["ir", "gpuir", "llir", "ptx", "cubin", "sass"])
def test_every_stage_with_and_without_a_daemon(one_source, tmp_path, daemons, server, scheme, stage):
    from despina.compiler.backends.nvptx.toolkit import find_nvdisasm

    if stage == "sass" and find_nvdisasm() is None:
        pytest.skip("nvdisasm is not installed (pip install nvidia-cuda-nvdisasm)")
    here, there = tmp_path / f"here.{stage}", tmp_path / f"there.{stage}"
    server(None)
    assert compile_cli(one_source, "--emit", stage, "-o", str(here)) == 0
    server(daemons["nvptx"].grpc if scheme == "grpc" else daemons["nvptx"].http)
    assert compile_cli(one_source, "--emit", stage, "-o", str(there)) == 0
    assert there.read_bytes() == here.read_bytes() and here.stat().st_size > 0


@pytest.mark.parametrize("scheme", ["grpc", "http"])
def test_no_sass_from_a_daemon_without_nvdisasm(source, daemons, server, capsys, scheme):
    blind = daemons["blind"]
    server(blind.grpc if scheme == "grpc" else blind.http)
    assert compile_cli(source, "--emit", "sass") == 1
    err = capsys.readouterr().err
    assert f"kernel 'add_kernel': no 'sass' stage from the daemon at {blind.grpc if scheme == 'grpc' else blind.http}" in err
    assert "FAILED_PRECONDITION" in err and "no nvdisasm" in err and "pip install nvidia-cuda-nvdisasm" in err
    assert compile_cli(source, "--emit", "llir") == 0  # the other stages are there


def test_help_lists_compile(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "compile" in capsys.readouterr().out


# ---- mistakes ----------------------------------------------------------------------------------


def run_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


def test_missing_file(tmp_path, capsys):
    code, err = run_error(["compile", f"{tmp_path}/nope.py:k", "-s", "i32"], capsys)
    assert code == 2 and f"no such file: {tmp_path}/nope.py" in err


def test_missing_colon(source, capsys):
    code, err = run_error(["compile", str(source), "-s", "i32"], capsys)
    assert code == 2 and "expected FILE.py:KERNEL" in err


def test_missing_kernel_lists_the_kernels(source, capsys):
    code, err = run_error(["compile", f"{source}:add", "-s", SIG], capsys)
    assert code == 2 and "has no kernel 'add'; its kernels: add_kernel, broken_kernel" in err


def test_not_a_kernel(source, capsys):
    code, err = run_error(["compile", f"{source}:not_a_kernel", "-s", "i32"], capsys)
    assert code == 2 and "needs a @despina.jit kernel, got int" in err


def test_bad_signature(source, capsys):
    code, err = run_error(["compile", f"{source}:add_kernel", "-s", "*fp32,*fp32,i32", "-c", "BLOCK=64"], capsys)
    assert code == 2 and "4 run-time parameters (x_ptr, y_ptr, out_ptr, n) but the signature has 3" in err
    code, err = run_error(["compile", f"{source}:add_kernel", "-s", "*fp32,*fp32,*fp32,q32", "-c", "BLOCK=64"], capsys)
    assert code == 2 and "unknown type 'q32'" in err


def test_missing_constexpr_and_bad_target(source, capsys):
    code, err = run_error(["compile", f"{source}:add_kernel", "-s", SIG], capsys)
    assert code == 2 and "constexpr 'BLOCK' needs a value" in err
    pytest.importorskip("llvmlite")
    code, err = run_error(["compile", f"{source}:add_kernel", "-s", SIG, "-c", "BLOCK=64", "--target", "sm_75"], capsys)
    assert code == 2 and "unsupported target 'sm_75'" in err


def test_kernel_error_names_the_line(source, capsys):
    code, err = run_error(["compile", f"{source}:broken_kernel", "-s", "*fp32"], capsys)
    assert code == 1 and "broken_kernel" in err and f"{source}:15" in err and "undefined_name" in err


def test_a_file_that_fails_to_import(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text("raise RuntimeError('boom')\n")
    code, err = run_error(["compile", f"{bad}:k", "-s", "i32"], capsys)
    assert code == 2 and "importing" in err and "RuntimeError: boom" in err


@pytest.mark.parametrize(
    ("item", "value"),
    [("BLOCK=1024", 1024), ("EVEN=True", True), ("X=None", None), ("A='relu'", "relu"), ("A=relu", "relu"),
     ("D=tl.float16", tl.float16), ("F=0.5", 0.5)],
)
def test_constexpr_values(item, value):
    assert parse_constexpr(item) == (item.split("=")[0], value)


def test_bad_constexpr():
    with pytest.raises(UsageError, match="NAME=VALUE"):
        parse_constexpr("1024")
    with pytest.raises(UsageError, match="has no 'float17'"):
        parse_constexpr("D=tl.float17")
