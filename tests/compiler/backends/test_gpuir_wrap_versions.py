"""Loops whose rows wrap (`% M`, `tl.where(rm < M, rm, 0)`) versioned for the programs whose rows do not
(gpuir/wrap_versions.py), or, where only masked stores read rows past M (gpuir/masked_rows.py), for every program
whose rows start in [0, M), those rows masked: tutorial 03 as Triton ships it gets a TMA loop beside its loop as
written, sharing its shared memory, its maps bounded by M and N; the versioned kernel computes what the kernel as
written does, in the interpreter, on ragged shapes whose last programs wrap and a grid with programs wholly past
the matrix; every tile of tutorial 09's persistent kernel takes the version, and a persistent loop storing
through its wrapped rows is versioned per program; tutorial 09's `tl.where` through its hints; a warp-specialized
loop, whose
version alone gets the producer; and the versions dropped where TMA would take nothing more (strides not
specialized positive, stages too small, sm_90)."""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np
import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

import benchmark_kernels  # noqa: E402
from pointer_tile_kernels import clamped, edge_reads, flat_wraps, grouped, k_loop, tile_ir, ws_pointers  # noqa: E402

import despina  # noqa: E402
import despina.language as tl  # noqa: E402
from despina.compiler.backends.gpuir.wrap_versions import version_wraps  # noqa: E402
from despina.compiler.interpreter import run_kernel  # noqa: E402
from despina.compiler.ir.core import Op  # noqa: E402
from despina.compiler.ir.verifier import verify  # noqa: E402

KERNELS = benchmark_kernels.load()
GROUPED = KERNELS.matmul_grouped_kernel
STRIDES = "i32:16+,i32:16+,i32:16+,i32:16+,i32:1,i32:16+,i32:1,i32:16+,i32:1"  # a launch at 4096^3 specializes so
TUTORIAL = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}


def _grouped(dtype: str = "fp16", strides: str = STRIDES, target: str = "sm_90a", bk: int = 64) -> Any:
    return despina.compile(GROUPED, f"*{dtype}:16,*{dtype}:16,*fp16:16,{strides}", {**TUTORIAL, "BLOCK_K": bk},
                           num_warps=8, num_stages=3, target=target)


def _pipelines(k: Any) -> list[str]:
    return re.findall(r'pipeline = "([^"]*)"', k.asm["gpuir"])


def test_tutorial_03_as_shipped_gets_a_tma_loop_for_the_programs_whose_rows_do_not_wrap() -> None:
    k = _grouped()
    gpuir, ptx = k.asm["gpuir"], k.asm["ptx"]
    assert len(re.findall(r"= if\(", gpuir)) == 1
    tma, written = _pipelines(k)
    assert tma.startswith("3 stages, 2 loads by TMA") and written.startswith("3 stages, 2 loads by cp.async")
    assert gpuir.count('origin = "pointers"') == 2 and len(k.metadata["tensor_maps"]) == 2
    # Only masked stores read rows and columns past M and N: the version's maps end there (TMA fills zeros).
    a, b = k.metadata["tensor_maps"]
    assert a["shape"] == [{"arg": 3}, {"arg": 5}] and b["shape"] == [{"arg": 5}, {"arg": 4}]
    # The version's starts: `maximum(c, 0)`, what proves them non-negative, of the rows the guard checked.
    assert len(re.findall(r"= maximum\(%\d+, %\d+\) : int32", gpuir)) == 2
    assert "cp.async.bulk.tensor.2d" in ptx and "cp.async.cg" in ptx
    # Both loops' rings lie over the same bytes: the TMA ring (3 slots of 32 KiB and its barriers) alone.
    assert 3 * 32768 <= k.metadata["shared"] < 3 * 32768 + 1024
    assert k.metadata["spill_stores"] == 0 and k.metadata["ptxas_warnings"] == []


def test_tutorial_09_s_where_is_versioned_through_its_hints() -> None:
    k = despina.compile(clamped, "*fp16:16,*fp16:16,*fp32:16,i32:16,i32:16,i32:16,i32:16+,i32:16+",
                        {"BM": 128, "BN": 128, "BK": 64}, num_warps=8, num_stages=3, target="sm_90a")
    tma, written = _pipelines(k)
    assert tma.startswith("3 stages, 2 loads by TMA") and written.startswith("3 stages, 2 loads by cp.async")


def test_a_warp_specialized_loop_s_version_alone_gets_the_producer() -> None:
    k = despina.compile(ws_pointers, "*fp16:16,*fp16:16,*fp16:16,i32:16+,i32:16+,i32:16+",
                        {"BM": 128, "BN": 128, "BK": 64, "WRAP": True}, num_warps=8, num_stages=3, target="sm_90a")
    specialized = re.findall(r'warp_specialized = "([^"]*)"', k.asm["gpuir"])
    assert len(specialized) == 2 and specialized[0].startswith("yes")
    assert specialized[1] == "no: another loop of the kernel is warp-specialized"


@despina.jit
def two_wraps(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """Rows that wrap for the loads, columns that wrap for the store alone; the K loop in a loop over two batches
    (of K, accumulated)."""
    rm = (tl.program_id(0) * BM + tl.arange(0, BM)) % M
    cn = (tl.program_id(1) * BN + tl.arange(0, BN)) % N
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for _ in range(2):
        for k in range(0, K, BK):
            a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(k + rk)[None, :] < K, other=0.0)
            b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=(k + rk)[:, None] < K, other=0.0)
            acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + cn[None, :], acc)


def test_the_guard_checks_the_wraps_the_loop_reads_and_the_outer_loop_is_versioned_whole() -> None:
    """The columns' wrap, which only the store reads, is no condition of the version; the outer loop is the one
    versioned, once, its copy's inner loop on TMA."""
    k = despina.compile(two_wraps, "*fp16:16,*fp16:16,*fp32:16,i32,i32:16+,i32:16+", {"BM": 128, "BN": 256, "BK": 64},
                        num_warps=8, num_stages=3, target="sm_90a")
    gpuir = k.asm["gpuir"]
    assert gpuir.count("= if(") == 1 and gpuir.count("= maximum(") == 1
    assert gpuir.count('{pred = "ge"}') == 2  # 0 <= c and M - c >= BM, for the rows alone
    assert gpuir.count('pipeline = "none: no load feeds a tensor-core dot"') == 2  # the outer loop, in each branch
    tma, written = [p for p in _pipelines(k) if "stages" in p]
    assert tma.startswith("3 stages, 2 loads by TMA") and written.startswith("3 stages, 1 loads by cp.async and 1")


def test_rows_that_may_start_below_0_are_versioned_on_their_start_alone() -> None:
    """A grouped ordering without `% M`: rows and columns from quotients by runtime values. The guard is
    `0 <= start` for each (no bound: the masks bound them), and the version's loads are tiles."""
    k = despina.compile(grouped, "*fp16:16,*fp16:16,*fp32:16,i32:16,i32:16,i32:16,i32:16+,i32:16+",
                        {"BM": 128, "BN": 128, "BK": 64, "GROUP_M": 8}, num_warps=8, num_stages=3, target="sm_90a")
    gpuir = k.asm["gpuir"]
    guard = gpuir[: gpuir.index("= if(")]
    assert guard.count('{pred = "ge"}') == 2 and '{pred = "lt"}' not in guard[guard.index("= floordiv("):]
    tma, written = _pipelines(k)
    assert tma.startswith("3 stages, 2 loads by TMA") and written.startswith("3 stages, 2 loads by cp.async")


PERSISTENT = KERNELS.matmul_persistent_kernel


@pytest.mark.parametrize("ws", [False, True], ids=["as-written", "warp-specialized"])
def test_a_persistent_nest_is_versioned_whole_by_a_loop_over_its_tiles(ws: bool) -> None:
    """Tutorial 09's persistent pointer kernel: its rows wrap (`tl.where`) per tile, inside the nest. One loop of
    scalar arithmetic before the nest checks every tile of the program; both versions are flattened, the one whose
    tiles do not wrap on TMA, the tile's start carried as a scalar. Warp-specialized, that version's producer
    runs the loop over the tiles again for the `if`'s condition (specialize.py: scalar arithmetic)."""
    k = despina.compile(PERSISTENT, f"*fp16:16,*fp16:16,*fp16:16,{STRIDES}",
                        {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8, "NUM_SMS": 132,
                         "WARP_SPECIALIZE": ws}, num_warps=8, num_stages=3, target="sm_90a")
    gpuir = k.asm["gpuir"]
    assert len(re.findall(r"\^\(%\d+: int32, %\d+: int1\):", gpuir)) == 1  # the loop over the program's tiles
    tma, written = _pipelines(k)
    assert tma.startswith("3 stages, 2 loads by TMA") and written.startswith("3 stages, 2 loads by cp.async")
    assert ("handed over by mbarriers to and from the producer" in tma) == ws
    assert gpuir.count('flattened = "yes') == 2 and len(k.metadata["tensor_maps"]) == 2
    assert k.metadata["spill_stores"] == 0 and k.metadata["ptxas_warnings"] == []
    if ws:
        assert re.findall(r'warp_specialized = "([^"]*)"', gpuir)[0].startswith("yes: a producer warp")


def test_a_persistent_nest_tma_takes_nothing_of_is_put_back_without_its_loop_over_the_tiles() -> None:
    """Strides not specialized positive: no tile for TMA in the version, which is dropped with the loop that
    checked the tiles for it."""
    strides = "i32:16,i32:16,i32:16,i32:16,i32:1,i32:16,i32:1,i32:16,i32:1"
    k = despina.compile(PERSISTENT, f"*fp16:16,*fp16:16,*fp16:16,{strides}",
                        {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8, "NUM_SMS": 132},
                        num_warps=8, num_stages=3, target="sm_90a")
    gpuir = k.asm["gpuir"]
    assert ": int1):" not in gpuir and "descriptor_load" not in gpuir and gpuir.count('flattened = "yes') == 1
    (pipeline,) = _pipelines(k)
    assert pipeline.startswith("3 stages, 2 loads by cp.async")


def test_a_nest_whose_rows_wrap_before_it_is_versioned_and_both_versions_flattened() -> None:
    """Versioning runs before flattening: a nest marked to be flattened whose wraps are computed before it is
    versioned as a loop is (the guard once, no loop over the tiles), and each version is one loop."""
    k = despina.compile(flat_wraps, "*fp16:16,*fp16:16,*fp32:16,i32:16+,i32:16+,i32:16+", {"BM": 128, "BN": 128, "BK": 64},
                        num_warps=8, num_stages=3, target="sm_90a")
    gpuir = k.asm["gpuir"]
    assert ": int1):" not in gpuir and gpuir.count('flattened = "yes') == 2
    tma, written = _pipelines(k)
    assert tma.startswith("3 stages, 2 loads by TMA") and written.startswith("3 stages, 2 loads by cp.async")


@despina.jit
def carried_tiles(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                  NUM_SMS: tl.constexpr):
    """A persistent loop whose tile's rows come from a count the loop carries, not from its induction variable."""
    num_n = tl.cdiv(N, BN)
    tile = tl.program_id(0) - NUM_SMS
    for _ in tl.range(tl.program_id(0), tl.cdiv(M, BM) * num_n, NUM_SMS, flatten=True):
        tile += NUM_SMS
        rm = ((tile // num_n) * BM + tl.arange(0, BM)) % M
        rn = (tile % num_n) * BN + tl.arange(0, BN)
        acc = k_loop(a_ptr, b_ptr, rm, rn, N, K, BM, BN, BK)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=rn[None, :] < N)


def test_a_nest_whose_rows_read_what_it_carries_is_not_versioned() -> None:
    """No loop before the nest can compute a carried count's tiles: the nest stays as written, flattened."""
    k = despina.compile(carried_tiles, "*fp16:16,*fp16:16,*fp32:16,i32:16+,i32:16+,i32:16+",
                        {"BM": 128, "BN": 128, "BK": 64, "NUM_SMS": 132}, num_warps=8, num_stages=3, target="sm_90a")
    gpuir = k.asm["gpuir"]
    assert ": int1):" not in gpuir and "descriptor_load" not in gpuir
    assert gpuir.count('flattened = "yes') == 1


@pytest.mark.parametrize(("why", "strides", "dtype", "target", "bk"), [
    ("strides that may be 0", "i32:16,i32:16,i32:16,i32:16,i32:1,i32:16,i32:1,i32:16,i32:1", "fp16", "sm_90a", 64),
    ("16 KiB an iteration (MIN_STAGE_BYTES)", STRIDES, "fp8e4nv", "sm_90a", 64),
    ("no TMA on sm_90", STRIDES, "fp16", "sm_90", 64),
])
def test_no_version_is_kept_where_tma_takes_nothing_more(why: str, strides: str, dtype: str, target: str,
                                                         bk: int) -> None:
    gpuir = _grouped(dtype, strides, target, bk).asm["gpuir"]
    assert "= if(" not in gpuir and "maximum(" not in gpuir and "descriptor_load" not in gpuir, why
    assert len(_pipelines(_grouped(dtype, strides, target, bk))) == 1


def _grouped_case(m: int, n: int, k: int) -> tuple[Any, tuple[Any, ...], dict[str, Any], tuple[int, int, int], Any]:
    """Tutorial 03 as shipped at 64x64x32 (which wgmma takes with 4 warps) on ragged shapes: the last rows and
    columns of programs wrap."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((m, k)).astype(np.float16), rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    grid = (-(-m // 64) * -(-n // 64), 1, 1)
    return GROUPED, (a, b, c, m, n, k, k, 1, n, 1, n, 1), {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 2}, \
        grid, a.astype(np.float32) @ b.astype(np.float32)


def _past_case(m: int, n: int, k: int) -> tuple[Any, tuple[Any, ...], dict[str, Any], tuple[int, int, int], Any]:
    """`ws_pointers` with WRAP on a grid of two more rows of programs than the matrix has: their rows, wholly past
    M, wrap whole (and store what the programs they fold onto store)."""
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((m, k)).astype(np.float16), rng.standard_normal((n, k)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    return ws_pointers, (a, b, c, m, n, k), {"BM": 64, "BN": 64, "BK": 32, "WRAP": True}, \
        (-(-m // 64) + 2, -(-n // 64), 1), a.astype(np.float32) @ b.astype(np.float32).T


def _unwrapped_case(m: int, n: int, k: int) -> tuple[Any, tuple[Any, ...], dict[str, Any], tuple[int, int, int], Any]:
    """`grouped` (no wraps, masks) with 64x64x32 tiles on ragged shapes."""
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((m, k)).astype(np.float16), rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float32)
    grid = (-(-m // 64) * -(-n // 64), 1, 1)
    return grouped, (a, b, c, m, n, k, k, n), {"BM": 64, "BN": 64, "BK": 32, "GROUP_M": 2}, grid, \
        a.astype(np.float32) @ b.astype(np.float32)


def _flat_case(m: int, n: int, k: int) -> tuple[Any, tuple[Any, ...], dict[str, Any], tuple[int, int, int], Any]:
    """`flat_wraps` at 64x64x32 with M ragged: the last row of programs wraps (its columns, unmasked in B, whole)."""
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((m, k)).astype(np.float16), rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((2, m, n), np.nan, np.float32)
    want = a.astype(np.float32) @ b.astype(np.float32)
    return flat_wraps, (a, b, c, m, n, k), {"BM": 64, "BN": 64, "BK": 32}, (-(-m // 64), -(-n // 64), 1), \
        np.stack([want, want])


def _edge_case(m: int, n: int, k: int, how: str = "as written") -> tuple[Any, tuple[Any, ...], dict[str, Any],
                                                                         tuple[int, int, int], Any]:
    """`edge_reads` at 64x64x32 on ragged shapes: the last programs' rows and columns past M and N read zeros
    (masked), which only the masked store's dropped rows and columns hold. Its sums (over the tile's rows, or each
    row's over the tile's columns into C's first column) are not the product: no product to check them against."""
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((m, k)).astype(np.float16), rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float32)
    operand = np.ascontiguousarray(b.T) if how == "B K-major" else b
    want = None if "sum" in how else a.astype(np.float32) @ b.astype(np.float32)
    return edge_reads, (a, operand, c, m, n, k), {"BM": 64, "BN": 64, "BK": 32, "HOW": how}, \
        (-(-m // 64), -(-n // 64), 1), want


def _persistent_case(m: int, n: int, k: int) -> tuple[Any, tuple[Any, ...], dict[str, Any], tuple[int, int, int], Any]:
    """Tutorial 09's persistent pointer kernel at 64x64x32 on 3 programs: its store drops the rows and columns
    past M and N, so every program's tiles take the version, those at the edge masked."""
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((m, k)).astype(np.float16), rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    consts = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_SIZE_M": 2, "NUM_SMS": 3}
    return PERSISTENT, (a, b, c, m, n, k, k, 1, n, 1, n, 1), consts, (3, 1, 1), a.astype(np.float32) @ b.astype(
        np.float32)


@despina.jit
def stores_wrapped(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                   NUM_SMS: tl.constexpr):
    """A persistent loop storing through the rows its loads read, wrapped (`tl.where(rm < M, rm, 0)`): rows past M
    store row 0's product again, so they must read row 0, and a program with a tile at the edge runs the nest as
    written (N a multiple of BN: B's columns are not masked)."""
    num_n = tl.cdiv(N, BN)
    for tile in tl.range(tl.program_id(0), tl.cdiv(M, BM) * num_n, NUM_SMS, flatten=True):
        rm = (tile // num_n) * BM + tl.arange(0, BM)
        rm = tl.where(rm < M, rm, 0)
        rn = (tile % num_n) * BN + tl.arange(0, BN)
        acc = k_loop(a_ptr, b_ptr, rm, rn, N, K, BM, BN, BK)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=rn[None, :] < N)


def _wrapped_store_case(m: int, n: int, k: int) -> tuple[Any, tuple[Any, ...], dict[str, Any], tuple[int, int, int],
                                                        Any]:
    """`stores_wrapped` at 64x64x32 on 3 programs."""
    rng = np.random.default_rng(10)
    a, b = rng.standard_normal((m, k)).astype(np.float16), rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float32)
    consts = {"BM": 64, "BN": 64, "BK": 32, "NUM_SMS": 3}
    return stores_wrapped, (a, b, c, m, n, k), consts, (3, 1, 1), a.astype(np.float32) @ b.astype(np.float32)


@pytest.mark.parametrize(("case", "m", "n", "k"), [(_grouped_case, 200, 144, 96), (_past_case, 128, 96, 64),
                                                   (_unwrapped_case, 200, 144, 96), (_persistent_case, 200, 144, 96),
                                                   (_persistent_case, 192, 128, 96), (_flat_case, 200, 128, 96),
                                                   (_edge_case, 200, 144, 96),
                                                   (functools.partial(_edge_case, how="B K-major"), 200, 144, 96),
                                                   (functools.partial(_edge_case, how="summed over rows"), 200, 144, 96),
                                                   (functools.partial(_edge_case, how="row sums"), 200, 144, 96),
                                                   (_wrapped_store_case, 200, 128, 96)],
                         ids=["ragged", "programs-past-the-matrix", "unwrapped", "persistent-ragged", "persistent",
                              "nest-to-flatten", "masked-edges", "masked-edges-b-k-major", "masked-columns-summed-rows",
                              "masked-rows-row-sums", "persistent-storing-wrapped-rows"])
def test_the_versioned_kernel_computes_what_the_kernel_as_written_does(case: Any, m: int, n: int, k: int) -> None:
    """In the interpreter: every element of C as the kernel as written computes it, versioned and not."""
    results = []
    for versioned in (False, True):
        kernel, args, consts, grid, want = case(m, n, k)
        module = tile_ir(kernel, args, consts)
        if versioned:
            assert len(version_wraps(module.kernel, module.attrs, 4)) == 1
            verify(module)
        run_kernel(module, grid=grid, args=list(args))
        results.append(args[2])
    if want is not None:
        np.testing.assert_allclose(results[1].astype(np.float32), want, rtol=1e-2, atol=5e-2)
    assert not np.isnan(results[1]).all()
    np.testing.assert_array_equal(results[0], results[1])


def _run_the_version_alone(case: Any, mnk: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """C and the product from `case`'s kernel in the interpreter, versioned, the nest as written emptied (its branch
    then stores nothing)."""
    kernel, args, consts, grid, want = case(*mnk)
    module = tile_ir(kernel, args, consts)
    ((_, version),) = version_wraps(module.kernel, module.attrs, 4)
    written = version.regions[1].ops[0]
    version.regions[1].ops = [Op("yield", list(written.operands[3:]), [], {}, (), written.loc)]
    verify(module)
    run_kernel(module, grid=grid, args=list(args))
    return args[2].astype(np.float32), want


@pytest.mark.parametrize("mnk", [(192, 128, 96), (200, 128, 96), (192, 144, 64)], ids=["whole", "ragged-m", "ragged-n"])
def test_every_program_of_tutorial_09_s_persistent_kernel_takes_the_version(mnk: tuple[int, int, int]) -> None:
    """Its store drops the rows and columns past M and N: with the nest as written emptied, C holds the product on
    every tile, those at the edge included."""
    got, want = _run_the_version_alone(_persistent_case, mnk)
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("mnk", [(192, 128, 96), (200, 128, 96)], ids=["whole", "ragged-m"])
def test_the_programs_whose_tiles_do_not_wrap_take_the_version(mnk: tuple[int, int, int]) -> None:
    """`stores_wrapped`: with the nest as written emptied, C holds the product on exactly the tiles of the programs
    none of whose tiles has rows past M (all of a whole shape), and NaN elsewhere."""
    got, want = _run_the_version_alone(_wrapped_store_case, mnk)
    tiles_m, tiles_n = -(-mnk[0] // 64), mnk[1] // 64
    ran = np.zeros(got.shape, bool)
    for program in range(3):
        mine = [divmod(tile, tiles_n) for tile in range(program, tiles_m * tiles_n, 3)]
        if all((pid_m + 1) * 64 <= mnk[0] for pid_m, _ in mine):
            for pid_m, pid_n in mine:
                ran[pid_m * 64 : (pid_m + 1) * 64, pid_n * 64 : (pid_n + 1) * 64] = True
    assert ran.any() and (ran.all() if mnk[0] % 64 == 0 else not ran.all())
    np.testing.assert_allclose(got[ran], want[ran], rtol=1e-2, atol=5e-2)
    assert np.isnan(got[~ran]).all()
