"""`despina.compile`: a signature (tests/test_signature.py reads its entries) and constexprs by name,
the module built as the JIT builds it (host tensor descriptors too: the same IR, PTX and tensor maps),
every stage of the NVPTX backend kept, and `inspect_*`."""

from __future__ import annotations

import inspect
import json
import os
import re
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import benchmark_kernels
import numpy as np
import pytest

import despina
import despina.language as tl
from despina.compile_api import build_module, specialize
from despina.compiler.ir.printer import print_module
from despina.compiler.ir.types import PointerType, float32, int32
from despina.compiler.options import CompileOptions
from despina.runtime import kernels
from despina.signature import SignatureError
from despina.specialization import Specialization
from despina.tools.tensor_descriptor import TensorDescriptor


@despina.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@despina.jit
def scale_kernel(x_ptr, bias_ptr, n, scale, BLOCK: tl.constexpr = 128):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n) * scale
    if bias_ptr is not None:
        x += tl.load(bias_ptr + offs, mask=offs < n)
    tl.store(x_ptr + offs, x, mask=offs < n)


@despina.jit
def scaled_max_kernel(x_ptr, out_ptr, scale, N: tl.constexpr):
    tl.store(out_ptr, tl.max(tl.load(x_ptr + tl.arange(0, N)) * scale, 0))


SIG = "*fp32:16,*fp32:16,*fp32:16,i32:16+"  # n = 1024: a positive multiple of 16, as a launch specializes it
OPTIONS = CompileOptions()


# ---- the signature and the kernel --------------------------------------------------------------


def test_signature_must_fit_the_kernel():
    with pytest.raises(SignatureError, match=r"4 run-time parameters \(x_ptr, y_ptr, out_ptr, n\) but the signature has 3"):
        specialize(add_kernel, "*fp32,*fp32,*fp32", {"BLOCK": 64})
    with pytest.raises(SignatureError, match="constexpr 'BLOCK' needs a value"):
        specialize(add_kernel, SIG, {})
    with pytest.raises(SignatureError, match="no parameter 'BLOK'"):
        specialize(add_kernel, SIG, {"BLOCK": 64, "BLOK": 64})
    with pytest.raises(SignatureError, match=r"missing \['n'\]"):
        specialize(add_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32"}, {"BLOCK": 64})


def test_specialize_gives_the_jit_its_params_and_hints():
    params, attrs, _, consts = specialize(add_kernel, "*fp32:16,*fp32,*fp32:16,i32:1", {"BLOCK": 64})
    assert [(n, p) for n, p in params[:4]] == [("x_ptr", PointerType(float32)), ("y_ptr", PointerType(float32)),
                                              ("out_ptr", PointerType(float32)), ("n", int32)]
    assert params[4][0] == "BLOCK" and params[4][1].value == 64
    assert attrs == {"divisibility": [0, 2], "equal_to_1": [3], "positive": []}
    assert consts == {"BLOCK": 64}


def test_a_positive_float_hint_specializes_as_a_launch_with_such_a_float_does():
    """`fp32:+` is what a launch with a float > 0 specializes: the same tile IR (the scale taken out of max)."""
    params, attrs, _, _ = specialize(scaled_max_kernel, "*fp32:16,*fp32:16,fp32:+", {"N": 64})
    assert attrs["positive"] == [2]
    x = np.zeros(64, np.float32)
    for scale, hint in ((0.5, "fp32:+"), (-0.5, "fp32")):
        spec = scaled_max_kernel.specialize(scaled_max_kernel.bind((x, x, scale), {"N": 64}), OPTIONS)
        params, attrs, _, _ = specialize(scaled_max_kernel, f"*fp32:16,*fp32:16,{hint}", {"N": 64})
        attrs.update(num_warps=OPTIONS.num_warps, num_stages=OPTIONS.num_stages)
        module = build_module(scaled_max_kernel, params, attrs, debug=False)[0]
        assert print_module(module) == print_module(scaled_max_kernel.ir(spec, OPTIONS))
        scaled_once = re.search(r"= mul\(%\d+, %2\) : fp32\n", print_module(module, locs=False))
        assert (scaled_once is not None) == (scale > 0)


def test_defaults_none_and_a_mapping_signature():
    params, attrs, entries, consts = specialize(
        scale_kernel, {"x_ptr": "*fp32:16", "n": "i32", "scale": "fp32"}, {"bias_ptr": None})
    assert consts == {"bias_ptr": None, "BLOCK": 128}
    assert list(entries) == ["x_ptr", "n", "scale"]
    assert attrs["divisibility"] == [0]


def test_module_is_the_one_the_jit_builds():
    """The tile IR of `compile` is the JIT's for a call with the same specialization."""
    x = np.zeros(2048, np.float32)
    assert x.ctypes.data % 16 == 0
    options = CompileOptions()
    spec = add_kernel.specialize(add_kernel.bind((x, x, x, 1024), {"BLOCK": 256}), options)
    jit_ir = print_module(add_kernel.ir(spec, options))
    params, attrs, _, _ = specialize(add_kernel, SIG, {"BLOCK": 256})
    attrs.update(num_warps=4, num_stages=3)
    assert print_module(build_module(add_kernel, params, attrs, debug=False)[0]) == jit_ir


def test_import_despina_does_not_import_llvmlite():
    code = "import sys, despina; despina.compile; assert 'llvmlite' not in sys.modules, 'llvmlite imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_compiling_loads_no_numpy(tmp_path):
    """NumPy loads on first use (host arrays, folding float arithmetic), not with `import despina` nor for
    a compile that needs none of it: it is about 0.1 s of a fresh process's cold compile."""
    pytest.importorskip("llvmlite")
    pytest.importorskip("cuda.bindings.nvjitlink")
    script = tmp_path / "kernel.py"
    script.write_text(
        "import sys\n"
        "import despina\n"
        "import despina.language as tl\n"
        "assert 'numpy' not in sys.modules, 'import despina loaded NumPy'\n"
        "@despina.jit\n"
        "def k(x_ptr, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.arange(0, BLOCK)\n"
        "    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)\n"
        "despina.compile(k, '*fp32:16,i32', {'BLOCK': 128}, target='sm_80')\n"
        "assert 'numpy' not in sys.modules, 'compiling loaded NumPy'\n")
    env = dict(os.environ, DESPINA_CACHE_DIR=str(tmp_path / "cache"))
    subprocess.run([sys.executable, str(script)], check=True, env=env)


def test_a_non_kernel_is_refused():
    with pytest.raises(TypeError, match="needs a @despina.jit kernel, got int"):
        despina.compile(3, "i32")


# ---- compiling (needs the compiler extra, no GPU) ----------------------------------------------


@pytest.fixture(scope="module")
def compiled() -> despina.CompiledKernel:
    pytest.importorskip("llvmlite")
    pytest.importorskip("cuda.bindings.nvjitlink")
    return despina.compile(add_kernel, signature=SIG, constexprs={"BLOCK": 1024}, num_warps=4, num_stages=3,
                           target="sm_90")


def test_compile_keeps_every_stage(compiled):
    assert {"ir", "gpuir", "llir", "ptx", "cubin", "lines"} <= set(compiled.asm) <= {"ir", "gpuir", "llir", "ptx", "cubin", "lines", "sass"}
    assert compiled.cubin[:4] == b"\x7fELF"
    md = compiled.metadata
    assert (md["name"], md["target"], md["num_warps"], md["num_stages"], md["num_threads"]) == (
        "add_kernel", "sm_90", 4, 3, 128)
    assert md["registers"] > 0
    assert compiled.signature == ("*fp32:16", "*fp32:16", "*fp32:16", "i32:16+")
    assert compiled.constexprs == {"BLOCK": 1024}
    assert "add_kernel" in repr(compiled)


def test_inspect_returns_each_stage(compiled):
    assert "func @add_kernel(%0: ptr<fp32>, %1: ptr<fp32>, %2: ptr<fp32>, %3: int32) kernel" in compiled.inspect_ir()
    assert "divisibility = [0, 1, 2, 3]" in compiled.inspect_ir()
    assert compiled.inspect_gpuir() == compiled.asm["gpuir"]
    assert "define ptx_kernel void @add_kernel" in compiled.inspect_llvm()
    ptx = compiled.inspect_ptx()
    assert ".target sm_90" in ptx and "ld.global.v4.b32" in ptx
    if "sass" in compiled.asm:
        assert "LDG.E.128" in compiled.inspect_sass()
    else:
        with pytest.raises(RuntimeError, match="pip install nvidia-cuda-nvdisasm"):
            compiled.inspect_sass()


def test_hints_decide_vector_width():
    """As in Triton: without `n:16` the mask may change inside any 4 elements, so no 128-bit access."""
    pytest.importorskip("llvmlite")
    k = despina.compile(add_kernel, "*fp32:16,*fp32:16,*fp32:16,i32", {"BLOCK": 1024}, target="sm_80")
    assert ".target sm_80" in k.inspect_ptx()
    assert "ld.global.v4" not in k.inspect_ptx() and "ld.global.b32" in k.inspect_ptx()


def test_constexpr_none_prunes_a_branch():
    pytest.importorskip("llvmlite")
    k = despina.compile(scale_kernel, "*fp32:16,i32,fp32", {"bias_ptr": None}, num_warps=1)
    assert k.metadata["num_threads"] == 32
    assert "func @scale_kernel(%0: ptr<fp32>, %1: int32, %2: fp32) kernel" in k.inspect_ir()
    assert k.inspect_ptx().count("ld.global") == 128 // 32  # x only: the bias branch is gone


def test_no_nvdisasm_is_a_clear_error(compiled, monkeypatch):
    from despina.compiler.backends.nvptx import sass

    monkeypatch.setattr(sass, "find_nvdisasm", lambda: None)
    again = despina.compile(add_kernel, signature=SIG, constexprs={"BLOCK": 1024}, target="sm_90")
    with pytest.raises(RuntimeError, match="kernel 'add_kernel': no SASS: nvdisasm was not found; .*pip install"):
        again.inspect_sass()
    assert again.inspect_ptx() == compiled.inspect_ptx()


# ---- host tensor descriptors: `tensordesc<...>` entries build what a launch with TensorDescriptors builds --


# benchmarks/kernels.py's matmul_tma_kernel: A [M, K], B [N, K] (K-major) and C through host TensorDescriptors.
desc_matmul_kernel = benchmark_kernels.load().matmul_tma_kernel


@despina.jit
def desc_nan_kernel(x_desc, out_ptr, n, BLOCK: tl.constexpr):
    rows = tl.arange(0, BLOCK)
    tile = x_desc.load([tl.program_id(0) * BLOCK, 0])
    tl.store(out_ptr + rows[:, None] * BLOCK + rows[None, :], tile, mask=rows[:, None] < n)


DESC_META = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}
DESC_BLOCKS = ([128, 64], [128, 64], [128, 128])
# A launch's (M, N, K), and the signature of what its specialization proves: sizes and strides that are multiples
# of 16 (TMA's case), or none of them (8 mod 16: rows still whole 16-byte units, as a TensorDescriptor requires).
DESC_CASES = {
    "multiples of 16": ((256, 256, 256), "tensordesc<fp16[128,64]>:16,tensordesc<fp16[128, 64]>:16,"
                                         "tensordesc<fp16[128,128]>:16,i32:16+,i32:16+,i32:16+"),
    "no hints": ((200, 136, 72), "tensordesc<fp16[128,64]>,tensordesc<fp16[128,64]>,tensordesc<fp16[128,128]>,i32,i32,i32"),
}
DESC_OPTIONS = CompileOptions(num_warps=8, num_stages=3)


def desc_launch(case: str) -> Specialization:
    """The specialization of a launch of desc_matmul_kernel with host TensorDescriptors of the case's sizes."""
    (m, n, k), _ = DESC_CASES[case]
    arrays = (np.zeros((m, k), np.float16), np.zeros((n, k), np.float16), np.zeros((m, n), np.float16))
    descs = [TensorDescriptor.from_tensor(t, block) for t, block in zip(arrays, DESC_BLOCKS)]
    return desc_matmul_kernel.specialize(desc_matmul_kernel.bind((*descs, m, n, k), DESC_META), DESC_OPTIONS)


def typed(params):
    return [(n, p.value if isinstance(p, tl.constexpr) else p) for n, p in params]


@pytest.mark.parametrize("case", DESC_CASES)
def test_a_descriptor_signature_specializes_as_a_launch_does(case):
    """A `tensordesc<...>` entry is the launch's DescriptorArg, then its base, sizes and strides with the hints
    its values give; the tile IR is the JIT's."""
    spec = desc_launch(case)
    params, attrs, entries, _ = specialize(desc_matmul_kernel, DESC_CASES[case][1], DESC_META)
    assert typed(params) == typed(spec.params)
    assert attrs == {k: v for k, v in spec.attrs.items() if k in ("divisibility", "equal_to_1", "positive")}
    assert [str(e) for e in entries.values()][1] == ("tensordesc<fp16[128,64]>:16" if case == "multiples of 16"
                                                     else "tensordesc<fp16[128,64]>")
    attrs.update(num_warps=8, num_stages=3)
    module = desc_matmul_kernel.ir(spec, DESC_OPTIONS)
    assert print_module(build_module(desc_matmul_kernel, params, attrs, debug=False)[0]) == print_module(module)


def test_a_descriptors_padding_is_part_of_its_entry():
    x = np.zeros((64, 16), np.float32)
    options = CompileOptions()
    bound = desc_nan_kernel.bind((TensorDescriptor.from_tensor(x, [16, 16], padding="nan"), x, 64), {"BLOCK": 16})
    module = desc_nan_kernel.ir(desc_nan_kernel.specialize(bound, options), options)
    params, attrs, _, _ = specialize(desc_nan_kernel, "tensordesc<fp32[16,16],padding=nan>:16,*fp32:16,i32:16+",
                                     {"BLOCK": 16})
    attrs.update(num_warps=4, num_stages=3)
    assert print_module(build_module(desc_nan_kernel, params, attrs, debug=False)[0]) == print_module(module)
    assert 'padding = "nan"' in print_module(module)


@pytest.mark.parametrize("case", DESC_CASES)
@pytest.mark.parametrize("target", ["sm_90a", "sm_90"])
def test_a_descriptor_matmul_compiles_to_the_jits_ptx(case, target, fresh_cache):
    """On sm_90a TMA copies the tiles of a launch whose sizes and strides are multiples of 16 (three tensor maps
    in the metadata), not those of the other; sm_90 has no TMA. Either way the AOT kernel is the JIT's, compiled
    apart (no cache between them)."""
    spec = desc_launch(case)
    module = desc_matmul_kernel.ir(spec, DESC_OPTIONS)
    jit = kernels._backend(module, DESC_OPTIONS, target)
    k = despina.compile(desc_matmul_kernel, DESC_CASES[case][1], DESC_META, num_warps=8, num_stages=3, target=target)
    assert k.tier == "compiled"
    assert k.inspect_ir() == print_module(module)
    assert k.inspect_ptx() == jit.asm["ptx"] and f".target {target}" in k.inspect_ptx()
    timed = ("link_log",)  # ptxas's own compile time
    assert {n: v for n, v in k.metadata.items() if n not in timed} == {
        "name": jit.name, **{n: v for n, v in jit.metadata.items() if n not in timed}}
    assert k.cubin == jit.cubin
    maps = k.metadata.get("tensor_maps") or []
    assert len(maps) == (3 if (target, case) == ("sm_90a", "multiples of 16") else 0)
    if maps:
        assert "cp.async.bulk.tensor" in k.inspect_ptx()
        assert maps[0] == {"dtype": "fp16", "base": {"arg": 0}, "shape": [{"arg": 1}, {"arg": 2}], "strides": [{"arg": 3}],
                           "box": [128, 64], "swizzle": 128, "fill": "zero"}


# ---- the caches: despina.compile keeps what it compiles, as kernel[grid] does ------------------


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch) -> Path:
    """An empty disk cache and an empty memory cache."""
    pytest.importorskip("llvmlite")
    pytest.importorskip("cuda.bindings.nvjitlink")
    monkeypatch.setenv("DESPINA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(kernels, "_MEMORY", {})
    return tmp_path


def test_a_second_compile_reads_the_caches(fresh_cache):
    first = despina.compile(add_kernel, SIG, {"BLOCK": 512})
    again = despina.compile(add_kernel, SIG, {"BLOCK": 512})
    assert (first.tier, again.tier) == ("compiled", "memory") and again.cubin == first.cubin
    assert len(list(fresh_cache.glob("??/*.cubin"))) == 1
    kernels._MEMORY.clear()
    from_disk = despina.compile(add_kernel, SIG, {"BLOCK": 512})
    assert from_disk.tier == "disk" and from_disk.metadata == first.metadata
    assert {s: from_disk.asm[s] for s in ("ir", "gpuir", "llir", "ptx", "cubin", "lines")} == dict(first.asm)


def test_a_fresh_process_reads_the_disk_cache_without_llvm(fresh_cache):
    first = despina.compile(add_kernel, SIG, {"BLOCK": 512})
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import despina; from test_compile_api import add_kernel, SIG\n"
            "k = despina.compile(add_kernel, SIG, {'BLOCK': 512})\n"
            "print(json.dumps({'tier': k.tier, 'llvm': 'llvmlite' in sys.modules, 'ptx': k.inspect_ptx()}))\n")
    done = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent)], capture_output=True, text=True,
                          check=True)
    got = json.loads(done.stdout.splitlines()[-1])
    assert got == {"tier": "disk", "llvm": False, "ptx": first.inspect_ptx()}


def test_launches_find_what_compile_kept(fresh_cache):
    """kernel[grid]'s compile path (kernels.binary) and despina.compile share one cache."""
    k = despina.compile(add_kernel, SIG, {"BLOCK": 256})
    x = np.zeros(2048, np.float32)
    options = CompileOptions()
    module = add_kernel.ir(add_kernel.specialize(add_kernel.bind((x, x, x, 1024), {"BLOCK": 256}), options), options)
    compiles = kernels.STATS["compile"]
    assert kernels.binary(module, CompileOptions(), "sm_90").cubin == k.cubin
    assert kernels.STATS["compile"] == compiles


# ---- with a daemon: the same stages --------------------------------------------------------------


@pytest.fixture(scope="module")
def nvptx_daemon(tmp_path_factory):
    """`despina serve` with the NVPTX backend, as tests/server start it."""
    pytest.importorskip("llvmlite")
    pytest.importorskip("cuda.bindings.nvjitlink")
    from server.conftest import Daemon

    d = Daemon(tmp_path_factory.mktemp("daemon"), compiler=None)
    yield d
    d.stop()


INSPECT = {"ir": "inspect_ir", "gpuir": "inspect_gpuir", "llir": "inspect_llvm", "ptx": "inspect_ptx",
           "sass": "inspect_sass"}


@pytest.mark.parametrize("scheme", ["grpc", "http"])
@pytest.mark.parametrize("stage", ["ir", "gpuir", "llir", "ptx", "cubin", "sass"])
def test_every_stage_with_and_without_a_daemon(compiled, nvptx_daemon, scheme, stage, monkeypatch):
    from despina.compiler.backends.nvptx.toolkit import find_nvdisasm

    if stage == "sass" and find_nvdisasm() is None:
        pytest.skip("nvdisasm is not installed (pip install nvidia-cuda-nvdisasm)")
    monkeypatch.setenv("DESPINA_SERVER_REQUIRED", "1")
    despina.set_server(nvptx_daemon.grpc if scheme == "grpc" else nvptx_daemon.http)
    try:
        k = despina.compile(add_kernel, signature=SIG, constexprs={"BLOCK": 1024}, num_warps=4, num_stages=3,
                            target="sm_90")
    finally:
        despina.set_server(None)
    assert k.tier == "daemon" and k.metadata["service"]["tier"] in ("compiled", "memory")
    assert k.stage(stage) == compiled.stage(stage)
    if stage in INSPECT:
        assert getattr(k, INSPECT[stage])() == getattr(compiled, INSPECT[stage])()


@pytest.fixture(scope="module")
def desc_compiled() -> despina.CompiledKernel:
    return despina.compile(desc_matmul_kernel, DESC_CASES["multiples of 16"][1], DESC_META, num_warps=8, num_stages=3,
                           target="sm_90a")


@pytest.mark.parametrize("scheme", ["grpc", "http"])
def test_a_descriptor_signature_compiles_on_a_daemon(desc_compiled, nvptx_daemon, scheme, monkeypatch):
    """The daemon takes the module of a `tensordesc` signature as it takes the JIT's: the same PTX, cubin and
    tensor maps as in-process."""
    monkeypatch.setenv("DESPINA_SERVER_REQUIRED", "1")
    despina.set_server(nvptx_daemon.grpc if scheme == "grpc" else nvptx_daemon.http)
    try:
        k = despina.compile(desc_matmul_kernel, DESC_CASES["multiples of 16"][1], DESC_META, num_warps=8, num_stages=3,
                            target="sm_90a")
    finally:
        despina.set_server(None)
    assert k.tier == "daemon" and k.signature == desc_compiled.signature
    assert (k.cubin, k.inspect_ptx()) == (desc_compiled.cubin, desc_compiled.inspect_ptx())
    assert len(k.metadata["tensor_maps"]) == 3
    for key in ("tensor_maps", "num_threads", "shared"):
        assert k.metadata[key] == desc_compiled.metadata[key]


def test_the_fallback_warning_points_at_the_users_line(compiled, monkeypatch):
    """An unreachable DESPINA_SERVER (not required): one warning, at the line that called despina.compile,
    not inside despina."""
    from despina import remote

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.delenv("DESPINA_SERVER_REQUIRED", raising=False)
    monkeypatch.setattr(remote, "_warned", set())
    despina.set_server(f"grpc://127.0.0.1:{port}")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            line = inspect.currentframe().f_lineno + 1
            k = despina.compile(add_kernel, signature=SIG, constexprs={"BLOCK": 1024}, target="sm_90")
    finally:
        despina.set_server(None)
    assert k.cubin == compiled.cubin
    fallbacks = [w for w in caught if "compiling in-process" in str(w.message)]
    assert len(fallbacks) == 1, [str(w.message) for w in caught]
    assert (fallbacks[0].category, fallbacks[0].filename, fallbacks[0].lineno) == (RuntimeWarning, __file__, line)
