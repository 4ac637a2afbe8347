"""Warp specialization (`tl.range(..., warp_specialize=True)`, gpuir/specialize.py, lower/specialize.py) on
the CPU: where a loop gets a producer warp, the GPU IR says so and the block launches with one warp more; the
producer's loop waits on the empty barriers and issues TMA's copies, the consumers' loop waits on the full
ones with no CTA barrier, and the rest of the kernel's barriers are the consumers' named barrier. Where it
cannot, the loop's `warp_specialized` attribute says why and the kernel compiles as without."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import benchmark_kernels
import pytest
from pointer_tile_kernels import ws_pointers

import despina
import despina.language as tl

from .loops import loop_with

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

ROOT = Path(__file__).resolve().parents[4]
SIG = "*fp16:16,*fp16:16,*fp16:16,i32,i32,i32:16"


@despina.jit
def ws_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
              WS: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    off_m, off_n = tl.program_id(0) * BM, tl.program_id(1) * BN
    acc = tl.zeros((BM, BN), tl.float32)
    for k in tl.range(0, K, BK, warp_specialize=WS):
        acc = tl.dot(a_desc.load([off_m, k]), b_desc.load([off_n, k]).T, acc)
    rm, rn = off_m + tl.arange(0, BM), off_n + tl.arange(0, BN)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


@despina.jit
def ws_tiles(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """A tile loop around the K loop: the producer cannot take it."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    for tile in range(tl.program_id(0), 2):
        off_m, off_n = tile // tl.cdiv(N, BN) * BM, tile % tl.cdiv(N, BN) * BN
        acc = tl.zeros((BM, BN), tl.float32)
        for k in tl.range(0, K, BK, warp_specialize=True):
            acc = tl.dot(a_desc.load([off_m, k]), b_desc.load([off_n, k]).T, acc)
        rm, rn = off_m + tl.arange(0, BM), off_n + tl.arange(0, BN)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


@despina.jit
def ws_loaded_tile(a_ptr, b_ptr, c_ptr, M, N, K, tiles_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """The tile's coordinates from a load: the producer cannot compute them."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    tile = tl.load(tiles_ptr + tl.program_id(0))
    off_m, off_n = tile // tl.cdiv(N, BN) * BM, tile % tl.cdiv(N, BN) * BN
    acc = tl.zeros((BM, BN), tl.float32)
    for k in tl.range(0, K, BK, warp_specialize=True):
        acc = tl.dot(a_desc.load([off_m, k]), b_desc.load([off_n, k]).T, acc)
    rm, rn = off_m + tl.arange(0, BM), off_n + tl.arange(0, BN)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


def _specialized(gpuir: str) -> list[str]:
    return re.findall(r'warp_specialized = "([^"]*)"', gpuir)


def _compile(fn: Any, sig: str, consts: dict[str, Any], target: str = "sm_90a", warps: int = 8) -> Any:
    return despina.compile(fn, sig, consts, num_warps=warps, num_stages=3, target=target)


def test_a_specialized_loop_has_a_producer_warp_and_no_cta_barrier() -> None:
    """128x128 tiles in 3 slots leave shared memory for two blocks an SM: the producer is one warp, and no warpgroup
    gives registers away (a producer warpgroup would take the second block's)."""
    k = _compile(ws_matmul, SIG, {"BM": 128, "BN": 128, "BK": 64, "WS": True})
    gpuir = k.asm["gpuir"]
    assert _specialized(gpuir) == ["yes: a producer warp issues the copies, the kernel's 8 warps consume them"]
    assert "slots handed over by mbarriers to and from the producer" in gpuir
    assert k.metadata["num_threads"] == 288 and k.metadata["num_warps"] == 8
    assert k.metadata["setmaxnreg"] == (f"no: shared memory ({k.metadata['shared']} bytes) leaves room for 2 blocks "
                                        "an SM, which a producer warpgroup's registers would cost")
    ptx = k.asm["ptx"]
    assert ".maxntid 288" in ptx and "setmaxnreg" not in ptx and ".maxnreg" not in ptx
    assert k.metadata["assembler"] == "nvJitLink"
    # The consumers' loop waits for full barriers and runs the dots, with no CTA barrier and no copy; the
    # producer's waits for empty barriers, expects the slot's bytes on its full barrier and copies both tiles.
    consumer, producer = loop_with(ptx, "wgmma.mma_async"), loop_with(ptx, "cp.async.bulk.tensor")
    assert "mbarrier.try_wait" in consumer and "mbarrier.arrive.shared" in consumer
    assert "bar.sync" not in consumer and "cp.async.bulk.tensor" not in consumer
    assert "mbarrier.try_wait" in producer and "mbarrier.arrive.expect_tx" in producer and "wgmma" not in producer
    assert producer.count("cp.async.bulk.tensor") == 2
    assert re.findall(r"bar\.sync\s+(\d+)", ptx).count("0") == 1  # every thread, once: the barriers' set-up
    assert "bar.sync \t1, 256;" in ptx  # the consumers' own
    assert k.metadata["spill_stores"] == 0 and k.metadata["ptxas_warnings"] == []
    plain = _compile(ws_matmul, SIG, {"BM": 128, "BN": 128, "BK": 64, "WS": False})
    assert not _specialized(plain.asm["gpuir"]) and plain.metadata["num_threads"] == 256
    assert "setmaxnreg" not in plain.metadata


def _between(ptx: str, start: str, end: str) -> str:
    at = ptx.index(start)
    return ptx[at : ptx.index(end, at)]


def test_where_shared_memory_holds_one_block_a_producer_warpgroup_gives_its_registers_to_the_consumers() -> None:
    """128x256 tiles in 3 slots hold the SM to one block. The producer is then a warpgroup: it keeps 40 registers
    a thread (`setmaxnreg.dec`) and the consumers take 232 (`setmaxnreg.inc`), from the 168 each thread of 12 warps
    starts with (`.maxnreg`). ptxas assembles the kernel as a whole program (nvJitLink would ignore setmaxnreg)."""
    k = _compile(ws_matmul, SIG, {"BM": 128, "BN": 256, "BK": 64, "WS": True})
    assert k.metadata["setmaxnreg"] == "yes: a producer warpgroup at 40 registers a thread, the consumers at 232"
    assert k.metadata["num_threads"] == 384 and k.metadata["num_warps"] == 8
    assert k.metadata["assembler"] == "ptxas" and k.metadata["assembler_version"].startswith("1")
    ptx = k.asm["ptx"]
    assert ".maxntid 384" in ptx and ".maxnreg 168" in ptx
    assert ptx.count("setmaxnreg.dec.sync.aligned.u32 40;") == 1 and ptx.count("setmaxnreg.inc.sync.aligned.u32 232;") == 1
    # each warpgroup sets its registers first thing on its side of the split, the producer before its thread's copies
    assert "cp.async.bulk.tensor" in _between(ptx, "setmaxnreg.dec", "ret;")
    assert "wgmma.mma_async" in _between(ptx, "setmaxnreg.inc", "ret;")
    assert "bar.sync \t1, 256;" in ptx  # the consumers' named barrier counts them alone, as before
    assert not re.search(r"C75(04|08)", k.metadata["link_log"])  # setmaxnreg honoured
    assert k.metadata["spill_stores"] == 0 and k.metadata["ptxas_warnings"] == []


@pytest.fixture
def no_ptxas(monkeypatch: pytest.MonkeyPatch) -> Any:
    """No ptxas to be found (`DESPINA_PTXAS` empty), and the cache key computed again: it names the ptxas."""
    from despina.compiler.backends.nvptx import toolkit
    from despina.runtime import cache

    monkeypatch.setenv("DESPINA_PTXAS", "")
    toolkit.find_ptxas.cache_clear()
    cache.toolchain.cache_clear()
    yield
    monkeypatch.undo()
    toolkit.find_ptxas.cache_clear()
    cache.toolchain.cache_clear()


def test_without_a_ptxas_the_producer_stays_one_warp_and_the_metadata_says_why(no_ptxas: None) -> None:
    from despina.runtime import cache

    assert cache.toolchain()["ptxas"] == "none"
    k = _compile(ws_matmul, SIG, {"BM": 128, "BN": 256, "BK": 64, "WS": True})
    assert k.metadata["setmaxnreg"] == ("no: no ptxas to assemble the kernel as a whole program (nvJitLink ignores "
                                        "setmaxnreg): install the nvidia-cuda-nvcc wheel (`pip install "
                                        "nvidia-cuda-nvcc`) or set DESPINA_PTXAS")
    assert k.metadata["num_threads"] == 288 and "setmaxnreg" not in k.asm["ptx"]
    assert k.metadata["assembler"] == "nvJitLink" and k.metadata["spill_stores"] == 0


@pytest.mark.parametrize(("warps", "options", "why"), [
    (4, {}, "no: the consumers' 4 warps have 240 registers a thread without it"),
    (8, {"maxnreg": 168}, "no: maxnreg=168 sets the registers of every thread"),
])
def test_where_setmaxnreg_would_not_pay_or_the_caller_set_the_registers_the_metadata_says_so(
        warps: int, options: dict[str, Any], why: str) -> None:
    k = despina.compile(ws_matmul, SIG, {"BM": 128, "BN": 256, "BK": 64, "WS": True}, num_warps=warps,
                        num_stages=3, target="sm_90a", **options)
    assert k.metadata["setmaxnreg"] == why
    assert k.metadata["num_threads"] == 32 * warps + 32 and "setmaxnreg" not in k.asm["ptx"]


@pytest.mark.parametrize("block_n", [128, 256])
def test_the_flattened_persistent_loop_is_specialized_its_guard_computed_by_the_producer(tmp_path: Any,
                                                                                       block_n: int) -> None:
    """Tutorial 09's kernel, warp-specialized, keeps its group in flight and does not spill. Its ring and epilogue
    buffer hold the SM to one block, so its producer is a warpgroup that gives its registers to the consumers
    (232 a thread). With one producer warp, a block of 9 warps got at most 168 registers a thread, and at 128 x 256
    the kernel spilled 100 bytes while each tile's accumulator stayed live through its epilogue into the next
    tile's first product (passes/flatten.py)."""
    import numpy as np

    from despina.runtime import kernels

    module = benchmark_kernels.load(tmp_path)
    fn, desc = module.matmul_tma_persistent_kernel, module.TensorDescriptor
    a = np.zeros((1024, 1024), np.float16)
    options = fn.options({"num_warps": 8, "num_stages": 3}, interpret=False)
    args = (desc.from_tensor(a, [128, 64]), desc.from_tensor(a, [block_n, 64]), desc.from_tensor(a, [128, block_n]),
            1024, 1024, 1024)
    spec = fn.specialize(fn.bind(args, {"BLOCK_M": 128, "BLOCK_N": block_n, "BLOCK_K": 64, "GROUP_SIZE_M": 8,
                                        "NUM_SMS": 132, "WARP_SPECIALIZE": True}), options)
    k, _ = kernels.local(fn.ir(spec, options), options, "sm_90a")
    said = _specialized(k.asm["gpuir"])
    assert said[0].startswith("yes") and k.metadata["num_threads"] == 384
    assert k.metadata["setmaxnreg"].startswith("yes")
    assert said[1] == "no: another loop of the kernel is warp-specialized"  # the nest's copy, for K = 0
    fused = next(line for line in k.asm["gpuir"].splitlines() if 'flattened = "yes' in line)
    assert "wgmma waits with 1 group in flight" in fused
    assert k.metadata["spill_stores"] == 0 and k.metadata["ptxas_warnings"] == []


@pytest.mark.parametrize(("fn", "sig", "consts", "target", "why"), [
    (ws_matmul, SIG, {"BM": 128, "BN": 128, "BK": 64, "WS": True}, "sm_90",
     "its dots do not run on wgmma (sm_90a)"),
    (ws_pointers, "*fp16:16,*fp16:16,*fp16:16,i32:16,i32:16,i32:16", {"BM": 128, "BN": 128, "BK": 64, "WRAP": True},
     "sm_90a",
     "a load of the loop is copied by cp.async, not TMA (the producer issues TMA's copies alone)"),
    (ws_tiles, SIG, {"BM": 128, "BN": 128, "BK": 64}, "sm_90a",
     "a loop encloses it: the producer runs the loop once, from the kernel's entry"),
    (ws_loaded_tile, SIG + ",*i32:16", {"BM": 128, "BN": 128, "BK": 64}, "sm_90a",
     "the producer computes the loop's bounds and coordinates itself, and 'load' outside the loop is not scalar "
     "arithmetic"),
])
def test_a_loop_that_cannot_be_specialized_says_why_and_compiles_as_without(fn: Any, sig: str, consts: dict[str, Any],
                                                                           target: str, why: str) -> None:
    k = _compile(fn, sig, consts, target)
    assert _specialized(k.asm["gpuir"]) == [f"no: {why}"]
    assert k.metadata["num_threads"] == 256 and "bar.sync \t1," not in k.asm["ptx"]
