"""`tl.program_id` and `tl.num_programs` over 1-, 2- and 3-D grids."""

from __future__ import annotations

import numpy as np
import pytest

import despina
import despina.language as tl


@despina.jit
def grid_kernel(out_ptr):
    x, y, z = tl.program_id(0), tl.program_id(1), tl.program_id(axis=2)
    nx, ny, nz = tl.num_programs(0), tl.num_programs(1), tl.num_programs(axis=2)
    tl.static_assert(x.dtype == tl.int32 and nx.dtype == tl.int32)
    linear = (z * ny + y) * nx + x
    tl.store(out_ptr + linear * 6, x)
    tl.store(out_ptr + linear * 6 + 1, y)
    tl.store(out_ptr + linear * 6 + 2, z)
    tl.store(out_ptr + linear * 6 + 3, nx)
    tl.store(out_ptr + linear * 6 + 4, ny)
    tl.store(out_ptr + linear * 6 + 5, nz)


@pytest.mark.parametrize("grid", [(5,), (3, 4), (2, 3, 4), (1, 1, 3), (4, 1, 2)])
def test_program_ids_cover_the_grid(device, grid):
    full = tuple(grid) + (1,) * (3 - len(grid))
    count = int(np.prod(full))
    out = device.put(np.full(count * 6, -1, np.int32))
    grid_kernel[grid](out)
    got = device.get(out).reshape(full[2], full[1], full[0], 6)
    z, y, x = np.meshgrid(np.arange(full[2]), np.arange(full[1]), np.arange(full[0]), indexing="ij")
    np.testing.assert_array_equal(got[..., 0], x)
    np.testing.assert_array_equal(got[..., 1], y)
    np.testing.assert_array_equal(got[..., 2], z)
    np.testing.assert_array_equal(got[..., 3:], np.broadcast_to(full, got[..., 3:].shape))


@despina.jit
def tiled_kernel(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    offs = rows[:, None] * N + cols[None, :]
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)


def test_2d_grid_over_a_matrix(device):
    x = np.arange(13 * 21, dtype=np.float32).reshape(13, 21)
    out = device.zeros((13, 21), "fp32")
    tiled_kernel[(despina.cdiv(13, 8), despina.cdiv(21, 16))](device.put(x), out, 13, 21, BM=8, BN=16)
    np.testing.assert_array_equal(device.get(out), x + 1)
