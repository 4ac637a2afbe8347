"""Loops whose rows wrap or may start below 0, versioned for TMA (gpuir/wrap_versions.py), on a
compute-capability-9.0 device against torch: tutorial 03 as Triton ships it (grouped, `% M`) on shapes whose edge
programs wrap, which take the version too, their rows past M and N read as zeros (gpuir/masked_rows.py: only the
masked store reads them), on shapes where none does, and on fewer rows than a tile; its wraps stored under masks,
B row-major and K-major, and its rows' sums; tutorial 09's `tl.where`
through its hints; tutorial 09's persistent pointer kernel, versioned whole; rows that wrap before a nest to
flatten, which the store keeps (the last row of programs runs the nest as written); a
warp-specialized loop whose version alone has the producer, on a grid with rows of programs past the matrix; a
grouped ordering without wraps; rows shifted before the matrix, whose first program must take the loop as written;
each checked to have kept its version; and tutorial 03 and the persistent kernel through the daemon."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import benchmark_kernels
import numpy as np
import pytest
from pointer_tile_kernels import clamped, edge_reads, flat_wraps, grouped, shifted, ws_pointers

import despina
from despina.runtime import driver

from .hopper import normals, require_tma
from .test_execute import GrpcDaemon, gpu_daemon, on_daemon  # noqa: F401 (fixtures)
from .test_pointer_tiles import _compiled, _operand, hopper  # noqa: F401 (fixture)

# (M, N, K), (BM, BN, BK), warps, stages: every row stride a multiple of 16 elements, as TMA needs
GROUPED = [
    ((1000, 784, 576), (128, 128, 64), 8, 3),  # the last row and column of programs wrap
    ((56, 272, 192), (128, 128, 64), 8, 3),  # fewer rows than a tile: every program's rows end past M
    ((384, 512, 256), (128, 256, 64), 8, 3),  # none wraps
    ((520, 400, 208), (128, 128, 64), 8, 4),  # K ragged too
]


def _versioned(gpuir: str) -> bool:
    return gpuir.count("= if(") == 1 and "loads by TMA" in gpuir and "loads by cp.async" in gpuir


@pytest.mark.parametrize("case", GROUPED, ids=lambda c: f"{'x'.join(map(str, c[0]))}-b{'x'.join(map(str, c[1]))}-s{c[3]}")
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_tutorial_03_as_shipped_matches_torch(hopper: Any, tmp_path: Path, dtype: str,  # noqa: F811
                                              case: tuple[Any, ...]) -> None:
    torch = hopper
    (m, n, k), (bm, bn, bk), warps, stages = case
    kernel = benchmark_kernels.load(tmp_path).matmul_grouped_kernel
    a, b = _operand(torch, dtype, m, k, 1), _operand(torch, dtype, k, n, 2)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    args = (a, b, c, m, n, k, k, 1, n, 1, n, 1)
    consts = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}
    kernel[(despina.cdiv(m, bm) * despina.cdiv(n, bn),)](*args, **consts, num_warps=warps, num_stages=stages)
    tol = 1e-2 if dtype == "fp16" else 3e-2
    torch.testing.assert_close(c.double(), (a.double() @ b.double()).half().double(), rtol=tol, atol=tol * k**0.5)
    assert _versioned(_compiled(kernel, args, consts, warps, stages).asm["gpuir"])


@pytest.mark.parametrize("how", ["as written", "B K-major", "row sums"])
def test_edges_read_as_zeros_match_torch(hopper: Any, how: str) -> None:  # noqa: F811
    """Tutorial 03's wraps, stored under masks of M and N (gpuir/masked_rows.py): every program runs the version on
    TMA, the edge programs' rows and columns past M and N read as zeros; B [K, N], and B [N, K] through `.T`; and the
    sums of each row over the first 128 columns (one column of programs), stored masked by M into C's first column."""
    torch = hopper
    m, n, k = 1000, 784, 576
    a, b = _operand(torch, "fp16", m, k, 17), _operand(torch, "fp16", k, n, 18)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    args = (a, b.t().contiguous() if how == "B K-major" else b, c, m, n, k)
    consts = {"BM": 128, "BN": 128, "BK": 64, "HOW": how}
    columns = 1 if how == "row sums" else despina.cdiv(n, 128)
    edge_reads[(despina.cdiv(m, 128), columns)](*args, **consts, num_warps=8, num_stages=3)
    want = a.double() @ b.double()
    if how == "row sums":
        torch.testing.assert_close(c[:, 0].double(), want[:, :128].sum(1), rtol=1e-2, atol=1e-2 * (128 * k) ** 0.5)
    else:
        torch.testing.assert_close(c.double(), want, rtol=1e-2, atol=1e-2 * k**0.5)
    gpuir = _compiled(edge_reads, args, consts, 8, 3).asm["gpuir"]
    assert _versioned(gpuir) and gpuir.count('origin = "pointers"') == 2


@pytest.mark.parametrize("ws", [False, True], ids=["as-written", "ws"])
@pytest.mark.parametrize("tiles", [(128, 128, 64, 3), (128, 256, 64, 3)], ids=lambda t: "x".join(map(str, t[:3])) + f"-s{t[3]}")
@pytest.mark.parametrize("mnk", [(1000, 784, 576), (1024, 768, 512)], ids=["edges-wrap", "none-wraps"])
def test_tutorial_09_s_persistent_pointer_kernel_matches_torch(hopper: Any, tmp_path: Path, mnk: tuple[int, int, int],  # noqa: F811
                                                               tiles: tuple[int, int, int, int], ws: bool) -> None:
    """The nest versioned whole: every program runs the version on TMA, on the ragged shape its edge tiles' rows
    and columns past M and N read as zeros (the store drops them); warp-specialized, that version with a producer
    warp."""
    torch = hopper
    (m, n, k), (bm, bn, bk, stages) = mnk, tiles
    kernel = benchmark_kernels.load(tmp_path).matmul_persistent_kernel
    a, b = _operand(torch, "fp16", m, k, 11), _operand(torch, "fp16", k, n, 12)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    args = (a, b, c, m, n, k, k, 1, n, 1, n, 1)
    consts = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_SIZE_M": 8, "NUM_SMS": sms, "WARP_SPECIALIZE": ws}
    kernel[(min(sms, despina.cdiv(m, bm) * despina.cdiv(n, bn)),)](*args, **consts, num_warps=8, num_stages=stages)
    torch.testing.assert_close(c.double(), (a.double() @ b.double()).half().double(), rtol=1e-2, atol=1e-2 * k**0.5)
    gpuir = _compiled(kernel, args, consts, 8, stages).asm["gpuir"]
    assert ": int1):" in gpuir and f"{stages} stages, 2 loads by TMA" in gpuir and "2 loads by cp.async" in gpuir
    assert ('warp_specialized = "yes' in gpuir) == ws


def test_a_nest_to_flatten_whose_rows_wrap_before_it_matches_torch(hopper: Any) -> None:  # noqa: F811
    """Rows that wrap, computed before a nest marked to be flattened, and the K loop's column offsets made in the
    nest (the same for every pass, not carried): the last row of programs runs the nest as written, the others
    its version on TMA."""
    torch = hopper
    m, n, k = 1000, 768, 576
    a, b = _operand(torch, "fp16", m, k, 13), _operand(torch, "fp16", k, n, 14)
    c = torch.full((2, m, n), float("nan"), device="cuda", dtype=torch.float32)
    args = (a, b, c, m, n, k)
    consts = {"BM": 128, "BN": 128, "BK": 64}
    flat_wraps[(despina.cdiv(m, 128), despina.cdiv(n, 128))](*args, **consts, num_warps=8, num_stages=3)
    want = a.double() @ b.double()
    for half in c:
        torch.testing.assert_close(half.double(), want, rtol=1e-2, atol=1e-2 * k**0.5)
    gpuir = _compiled(flat_wraps, args, consts, 8, 3).asm["gpuir"]
    assert "3 stages, 2 loads by TMA" in gpuir and "3 stages, 2 loads by cp.async" in gpuir
    assert gpuir.count('flattened = "yes') == 2


# kernel (of a, b, c, M, N, K, stride_am, stride_bk; C fp32), (M, N, K), constexprs, the grid of M and N, seed
MASKED = [
    (clamped, (300, 272, 400), {"BM": 128, "BN": 128, "BK": 64},
     lambda m, n: (despina.cdiv(m, 128), despina.cdiv(n, 128)), 3),
    (grouped, (1000, 784, 320), {"BM": 128, "BN": 128, "BK": 64, "GROUP_M": 8},
     lambda m, n: (despina.cdiv(m, 128) * despina.cdiv(n, 128),), 7),
]


@pytest.mark.parametrize(("kernel", "mnk", "consts", "grid", "seed"), MASKED,
                         ids=["tutorial-09-where", "grouped-without-wraps"])
def test_a_masked_kernel_matches_torch(hopper: Any, kernel: Any, mnk: tuple[int, int, int],  # noqa: F811
                                       consts: dict[str, Any], grid: Any, seed: int) -> None:
    """Tutorial 09's `tl.where` through its hints, and a grouped ordering without wraps."""
    torch = hopper
    m, n, k = mnk
    a, b = _operand(torch, "fp16", m, k, seed), _operand(torch, "fp16", k, n, seed + 1)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    args = (a, b, c, m, n, k, k, n)
    kernel[grid(m, n)](*args, **consts, num_warps=8, num_stages=3)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-2, atol=1e-2 * k**0.5)
    assert _versioned(_compiled(kernel, args, consts, 8, 3).asm["gpuir"])


def test_a_specialized_wrapped_loop_matches_torch_with_programs_past_the_matrix(hopper: Any) -> None:  # noqa: F811
    """Two more rows of programs than the matrix has: their rows wrap whole and store what rows 0-255 hold."""
    torch = hopper
    m, n, k = 336, 400, 320
    a, b = _operand(torch, "fp16", m, k, 5), _operand(torch, "fp16", n, k, 6)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    args = (a, b, c, m, n, k)
    consts = {"BM": 128, "BN": 128, "BK": 64, "WRAP": True}
    ws_pointers[(despina.cdiv(m, 128) + 2, despina.cdiv(n, 128))](*args, **consts, num_warps=8, num_stages=3)
    torch.testing.assert_close(c.double(), (a.double() @ b.double().T).half().double(), rtol=1e-2,
                               atol=1e-2 * k**0.5)
    gpuir = _compiled(ws_pointers, args, consts, 8, 3).asm["gpuir"]
    assert _versioned(gpuir) and 'warp_specialized = "yes' in gpuir


def test_rows_before_the_matrix_run_the_loop_as_written(hopper: Any) -> None:  # noqa: F811
    """Program 0's rows start 8 rows before A's view (rows of its buffer): the guard sends it to the loop as written;
    the version would read from row 0 (`maximum(c, 0)`)."""
    torch = hopper
    m, n, k, shift = 384, 256, 192, 8
    whole, b = _operand(torch, "fp16", m + shift, k, 9), _operand(torch, "fp16", k, n, 10)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    args = (whole[shift:], b, c, m, n, k, shift)
    consts = {"BM": 128, "BN": 128, "BK": 64}
    shifted[(despina.cdiv(m, 128), despina.cdiv(n, 128))](*args, **consts, num_warps=8, num_stages=3)
    torch.testing.assert_close(c.double(), whole[:m].double() @ b.double(), rtol=1e-2, atol=1e-2 * k**0.5)
    assert _versioned(_compiled(shifted, args, consts, 8, 3).asm["gpuir"])


@pytest.mark.parametrize("name", ["matmul_grouped_kernel", "matmul_persistent_kernel"])
def test_the_daemon_runs_the_versioned_kernels(gpu_device: driver.Device, on_daemon: GrpcDaemon,  # noqa: F811
                                               tmp_path: Path, name: str) -> None:
    """Tutorial 03 as shipped, and tutorial 09's persistent pointer kernel, through `run_remote`."""
    require_tma(gpu_device)
    m, n, k = 200, 272, 192
    a, b = normals(8, (m, k), (k, n))
    c = np.full((m, n), np.nan, np.float16)
    kernel = getattr(benchmark_kernels.load(tmp_path), name)
    tiles = despina.cdiv(m, 128) * despina.cdiv(n, 128)
    consts = {"GROUP_M": 8} if name == "matmul_grouped_kernel" else {"GROUP_SIZE_M": 8, "NUM_SMS": 4}
    kernel.run_remote[(min(tiles, consts.get("NUM_SMS", tiles)),)](
        a, b, c, m, n, k, k, 1, n, 1, n, 1, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, **consts, num_warps=8, num_stages=3)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), want, rtol=1e-2, atol=1e-1)
