"""Every kernel through the daemon: the language suite, the examples and the benchmark kernels compile
through a real `despina serve` (NVPTX backend, Redis on), over gRPC and over HTTP, to the same cubin
bytes as in-process (tests/server/parity.py). The tests of tests/language and tests/frontend's
control-flow tests are collected again here; each still runs in the interpreter and checks its
results, and every module the JIT builds on the way is also checked."""

from __future__ import annotations

import runpy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import benchmark_kernels
import numpy as np
import pytest
from conftest import Interpreter
from examples.test_examples import EXAMPLES, NAMES
from frontend.test_control_flow import *  # noqa: F403
from language.test_arith import *  # noqa: F403
from language.test_arith_builtins import *  # noqa: F403
from language.test_block_ptr import *  # noqa: F403
from language.test_conversions import *  # noqa: F403
from language.test_core import *  # noqa: F403
from language.test_debug import *  # noqa: F403
from language.test_indexing import *  # noqa: F403
from language.test_inline_asm import *  # noqa: F403
from language.test_libdevice import *  # noqa: F403
from language.test_math import *  # noqa: F403
from language.test_memory import *  # noqa: F403
from language.test_program import *  # noqa: F403
from language.test_random import *  # noqa: F403
from language.test_reduction import *  # noqa: F403
from language.test_shape import *  # noqa: F403
from language.test_tensor_descriptor import *  # noqa: F403

import despina
import despina.language as tl
from despina.compiler.options import CompileOptions
from despina.runtime import kernels

from .conftest import Daemon, RedisProcess
from .parity import check, check_every_module

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

RECOLLECTS_DEVICE_TESTS = True
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def nvptx_daemon(tmp_path_factory: pytest.TempPathFactory, shared_redis: RedisProcess) -> Iterator[Daemon]:
    """`despina serve` with its real backend and two compile workers, on the shared Redis."""
    d = Daemon(tmp_path_factory.mktemp("parity"), shared_redis.url, workers=2, compiler=None)
    yield d
    d.stop()


@pytest.fixture(params=["interpreter+daemon"])
def device(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, nvptx_daemon: Daemon,
           tmp_path: Path) -> Interpreter:
    monkeypatch.setenv("DESPINA_INTERPRET", "1")
    monkeypatch.setenv("DESPINA_CACHE_DIR", str(tmp_path / "cache"))
    check_every_module(monkeypatch, nvptx_daemon)
    return Interpreter()


@pytest.mark.parametrize("name", NAMES)
def test_example(name: str, device: Interpreter, monkeypatch: pytest.MonkeyPatch,
                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name="__main__")
    assert "matches NumPy" in capsys.readouterr().out or name == "dropout"


def test_benchmark_kernels(device: Interpreter) -> None:
    """Every kernel and configuration that benchmarks/gpu.py times, traced (not run) with its arguments."""
    k: Any = benchmark_kernels.load()
    f32, f16, n = np.zeros(8, np.float32), np.zeros(8, np.float16), np.int32(4096)
    bf16 = despina.reinterpret(np.zeros(8, np.uint16), tl.bfloat16)
    cases: list[tuple[Any, tuple[Any, ...], dict[str, int], CompileOptions]] = [
        (k.add_kernel, (f32, f32, f32, n), {"BLOCK_SIZE": 1024}, CompileOptions(num_warps=4)),
        (k.tiny_kernel, (f32,), {}, CompileOptions(num_warps=1)),
        (k.softmax_kernel, (f32, f32, n, n, n), {"BLOCK_SIZE": 4096}, CompileOptions(num_warps=16)),
        (k.layer_norm_kernel, (f16, f16, f16, f16, n, n, 1e-5), {"BLOCK_SIZE": 4096}, CompileOptions(num_warps=8)),
    ]
    one = np.int32(1)
    tables = runpy.run_path(str(BENCHMARKS / "gpu.py"))
    i8, i32 = np.zeros(8, np.int8), np.zeros(8, np.int32)
    products = [(k.matmul_kernel, a, f16, config) for a in (f16, bf16) for config in tables["MATMUL_CONFIGS"]]
    products += [(k.matmul_kernel, f32, f16, config) for config in tables["TF32_CONFIGS"]]
    products += [(k.matmul_int8_kernel, i8, i32, config) for config in tables["INT8_CONFIGS"]]
    e4m3 = despina.reinterpret(np.zeros(8, np.uint8), tl.float8e4nv)
    for kernel, a, c, (bm, bn, bk, warps, stages) in products:
        cases.append((kernel, (a, a, c, n, n, n, n, one, n, one, n, one),
                      {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}, CompileOptions(num_warps=warps, num_stages=stages)))
    for bm, bn, bk, warps, stages in tables["FP8_CONFIGS"]:  # B K-major
        cases.append((k.matmul_kernel, (e4m3, e4m3, f16, n, n, n, n, one, one, n, n, one),
                      {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}, CompileOptions(num_warps=warps, num_stages=stages)))
    for kernel, args, meta, options in cases:
        kernel.ir(kernel.specialize(kernel.bind(args, meta), options), options)  # checked by `device`


def test_descriptor_kernels_on_sm_90a(device: Interpreter, nvptx_daemon: Daemon) -> None:
    """benchmarks/gpu.py's descriptor kernels for sm_90a as well, where TMA copies their tiles and stores their
    results (tensor maps in the metadata) and the persistent kernel's loop nest is flattened, and warp-specialized
    (its block a warpgroup more: the producer's, which gives its registers to the consumers, setmaxnreg, for its
    ring holds the SM to one block), and the attention at 128x128 blocks linked for two blocks an SM with its P V
    waited for where issued (nvptx/occupancy.py): the daemon's cubin, tensor maps and threads are the in-process
    ones."""
    k: Any = benchmark_kernels.load()
    h = np.zeros((256, 256), np.float16)
    qkv = np.zeros((512, 64), np.float16)
    cases = [
        (k.matmul_tma_kernel, [[128, 64], [256, 64], [128, 256]], (h, h, h), (256, 256, 256),
         {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64}, 3),
        (k.matmul_tma_persistent_kernel, [[128, 64], [128, 64], [128, 128]], (h, h, h), (256, 256, 256),
         {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8, "NUM_SMS": 132}, 2),
        (k.matmul_tma_persistent_kernel, [[128, 64], [128, 64], [128, 128]], (h, h, h), (256, 256, 256),
         {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8, "NUM_SMS": 132, "WARP_SPECIALIZE": True}, 2),
        (k.attention_tma_kernel, [[128, 64], [64, 64], [64, 64], [128, 64]], (qkv,) * 4, (0.125, 256),
         {"HEAD_DIM": 64, "BLOCK_M": 128, "BLOCK_N": 64, "CAUSAL": True}, 2),
        (k.attention_tma_kernel, [[128, 64], [128, 64], [128, 64], [128, 64]], (qkv,) * 4, (0.125, 256),
         {"HEAD_DIM": 64, "BLOCK_M": 128, "BLOCK_N": 128, "CAUSAL": False}, 2),
    ]
    options = CompileOptions(num_warps=8, num_stages=3)
    for kernel, blocks, bases, scalars, meta, maps in cases:
        descs = [k.TensorDescriptor.from_tensor(t, b) for t, b in zip(bases, blocks)]
        module = kernel.ir(kernel.specialize(kernel.bind((*descs, *scalars), meta), options), options)
        check(module, options, nvptx_daemon, "sm_90a")
        # A, B and C (the plain matmul's epilogue a TMA store), or A and B, or K and V: the persistent kernel's and
        # the attention's stores are masked, their offsets not provably non-negative (gpuir.tma._store_fit)
        metadata = kernels._backend(module, options, "sm_90a").metadata
        assert len(metadata["tensor_maps"]) == maps
        assert metadata["num_threads"] == (384 if meta.get("WARP_SPECIALIZE") else 256)


@despina.jit
def _axpy(x_ptr, y_ptr, out_ptr, a, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, a * tl.load(x_ptr + offs) + tl.load(y_ptr + offs))


@pytest.mark.parametrize("options", [CompileOptions(maxnreg=32), CompileOptions(enable_fp_fusion=False),
                                     CompileOptions(num_warps=2, num_stages=2, debug=True)], ids=repr)
def test_compile_options_reach_the_daemon(device: Interpreter, options: CompileOptions) -> None:
    """Each option that changes the binary crosses both transports: the daemon's cubin is the in-process one."""
    x = np.zeros(128, np.float32)
    _axpy.ir(_axpy.specialize(_axpy.bind((x, x, x, 2.0), {"BLOCK": 128}), options), options)  # checked by `device`
