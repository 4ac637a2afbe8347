"""Grouped GEMM (Triton's tutorial 08): one persistent launch multiplies a group of matrices of
different sizes. A fixed number of programs (one per SM on a GPU) walk the tiles of every product in
turn, so no launch is sized to one problem and small products do not leave the GPU idle.

Triton's tutorial passes tables of raw device pointers. Here each operand's matrices are packed into
one buffer and the table holds where each matrix starts (in elements): the kernel reads the same
kind of table, and the interpreter, which knows which argument every pointer points into, checks
every access.

    python examples/grouped_gemm.py
"""

from __future__ import annotations

import numpy as np

import despina
import despina.language as tl

try:
    from examples._device import to_device, to_host, use_interpreter
except ImportError:
    from _device import to_device, to_host, use_interpreter


@despina.jit
def grouped_matmul_kernel(a_ptr, b_ptr, c_ptr, group_mnk, group_offsets, group_size,
                          NUM_PROGRAMS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_K: tl.constexpr):
    # Row g of group_mnk is (M, N, K) of product g; row g of group_offsets is where its A, B and C start.
    tile_idx = tl.program_id(0)
    last_problem_end = 0
    for g in range(group_size):
        gm = tl.load(group_mnk + g * 3)
        gn = tl.load(group_mnk + g * 3 + 1)
        gk = tl.load(group_mnk + g * 3 + 2)
        num_n_tiles = tl.cdiv(gn, BLOCK_N)
        num_tiles = tl.cdiv(gm, BLOCK_M) * num_n_tiles
        # This program's tiles of product g: tile_idx, tile_idx + NUM_PROGRAMS, ...
        while tile_idx >= last_problem_end and tile_idx < last_problem_end + num_tiles:
            a = a_ptr + tl.load(group_offsets + g * 3)
            b = b_ptr + tl.load(group_offsets + g * 3 + 1)
            c = c_ptr + tl.load(group_offsets + g * 3 + 2)
            tile_in_gemm = tile_idx - last_problem_end
            offs_m = (tile_in_gemm // num_n_tiles) * BLOCK_M + tl.arange(0, BLOCK_M)
            offs_n = (tile_in_gemm % num_n_tiles) * BLOCK_N + tl.arange(0, BLOCK_N)
            offs_k = tl.arange(0, BLOCK_K)
            a_ptrs = a + offs_m[:, None] * gk + offs_k[None, :]
            b_ptrs = b + offs_k[:, None] * gn + offs_n[None, :]
            accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for k in range(0, tl.cdiv(gk, BLOCK_K)):
                k_left = gk - k * BLOCK_K
                a_tile = tl.load(a_ptrs, mask=(offs_m[:, None] < gm) & (offs_k[None, :] < k_left), other=0.0)
                b_tile = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < gn), other=0.0)
                accumulator = tl.dot(a_tile, b_tile, accumulator)
                a_ptrs += BLOCK_K
                b_ptrs += BLOCK_K * gn
            c_ptrs = c + offs_m[:, None] * gn + offs_n[None, :]
            tl.store(c_ptrs, accumulator.to(tl.float16), mask=(offs_m[:, None] < gm) & (offs_n[None, :] < gn))
            tile_idx += NUM_PROGRAMS
        last_problem_end = last_problem_end + num_tiles


def group_gemm(As: list[np.ndarray], Bs: list[np.ndarray], num_programs: int = 8) -> list[np.ndarray]:
    """A[i] @ B[i] for every i, fp16 in and out, in one launch of `num_programs` programs."""
    mnk = np.array([(a.shape[0], b.shape[1], a.shape[1]) for a, b in zip(As, Bs)], dtype=np.int32)
    sizes = np.stack([mnk[:, 0] * mnk[:, 2], mnk[:, 2] * mnk[:, 1], mnk[:, 0] * mnk[:, 1]], axis=1)
    offsets = np.zeros_like(sizes, dtype=np.int64)
    offsets[1:] = np.cumsum(sizes, axis=0)[:-1]
    a_all = np.concatenate([a.ravel() for a in As])
    b_all = np.concatenate([b.ravel() for b in Bs])
    c_all = to_device(np.zeros(int(sizes[:, 2].sum()), dtype=np.float16))
    grouped_matmul_kernel[(num_programs,)](to_device(a_all), to_device(b_all), c_all, to_device(mnk),
                                           to_device(offsets), len(As), NUM_PROGRAMS=num_programs,
                                           BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
    c_host = to_host(c_all)
    return [c_host[o:o + m * n].reshape(m, n) for o, (m, n, _) in zip(offsets[:, 2], mnk)]


def main() -> None:
    interpreted = use_interpreter()
    rng = np.random.default_rng(0)
    shapes = [(64, 64, 64), (100, 40, 70), (33, 90, 20), (128, 32, 96)]  # (M, N, K) of each product
    As = [rng.standard_normal((m, k)).astype(np.float16) for m, _, k in shapes]
    Bs = [rng.standard_normal((k, n)).astype(np.float16) for _, n, k in shapes]
    for a, b, c in zip(As, Bs, group_gemm(As, Bs)):
        expected = a.astype(np.float32) @ b.astype(np.float32)
        np.testing.assert_allclose(c.astype(np.float32), expected, rtol=1e-2, atol=1e-2)
    print(f"grouped_gemm: {len(shapes)} products of different shapes in one launch, "
          f"{'interpreted' if interpreted else 'on the GPU'}; result matches NumPy")


if __name__ == "__main__":
    main()
