"""Kernels with tensor-descriptor loads, for the descriptor tests (defined in a file: the frontend reads
kernels' source)."""

from __future__ import annotations

import despina
import despina.language as tl


@despina.jit
def load_2d(x_ptr, out_ptr, R, C, S, OFF_R, OFF_C, BR: tl.constexpr, BC: tl.constexpr, PAD: tl.constexpr):
    desc = tl.make_tensor_descriptor(x_ptr, [R, C], [S, 1], [BR, BC], padding_option=PAD)
    tile = desc.load([OFF_R + tl.program_id(0) * BR, OFF_C])
    rows, cols = tl.arange(0, BR), tl.arange(0, BC)
    tl.store(out_ptr + tl.program_id(0) * BR * BC + rows[:, None] * BC + cols[None, :], tile)


@despina.jit
def load_3d(x_ptr, out_ptr, D0, D1, D2, O0, O1, O2, B0: tl.constexpr, B1: tl.constexpr, B2: tl.constexpr):
    desc = tl.make_tensor_descriptor(x_ptr, [D0, D1, D2], [D1 * D2, D2, 1], [B0, B1, B2])
    tile = desc.load([O0, O1, O2])
    i = tl.arange(0, B0)[:, None, None] * (B1 * B2) + tl.arange(0, B1)[None, :, None] * B2 + tl.arange(0, B2)[None, None, :]
    tl.store(out_ptr + i, tile)


@despina.jit
def persistent_rowsum(x_ptr, out_ptr, count_ptr, R, C, BR: tl.constexpr, BC: tl.constexpr, PROGRAMS: tl.constexpr,
                      STAGES: tl.constexpr = None, UNROLL: tl.constexpr = None):
    """Each program sums rows of x, BR rows a tile, over tiles pid, pid + PROGRAMS, ...; the inner loop walks
    the columns; a counter carried by the tile loop counts the tiles each program did."""
    tiles = tl.cdiv(R, BR)
    done = 0
    for tile in tl.range(tl.program_id(0), tiles, PROGRAMS, flatten=True):
        rows = tile * BR + tl.arange(0, BR)
        acc = tl.zeros((BR,), tl.float32)
        for c in tl.range(0, C, BC, num_stages=STAGES, loop_unroll_factor=UNROLL):
            cols = c + tl.arange(0, BC)
            acc += tl.sum(tl.load(x_ptr + rows[:, None] * C + cols[None, :],
                                  mask=(rows[:, None] < R) & (cols[None, :] < C), other=0.0), axis=1)
        tl.store(out_ptr + rows, acc + done, mask=rows < R)
        done += 1
    tl.store(count_ptr + tl.program_id(0), done)


@despina.jit
def persistent_scaled(x_ptr, scale_ptr, out_ptr, R, C, BR: tl.constexpr, BC: tl.constexpr, PROGRAMS: tl.constexpr):
    """As persistent_rowsum, with a load before the inner loop (a tile's scale)."""
    for tile in tl.range(tl.program_id(0), tl.cdiv(R, BR), PROGRAMS, flatten=True):
        rows = tile * BR + tl.arange(0, BR)
        scale = tl.load(scale_ptr + rows, mask=rows < R, other=0.0)
        acc = tl.zeros((BR,), tl.float32)
        for c in range(0, C, BC):
            cols = c + tl.arange(0, BC)
            acc += tl.sum(tl.load(x_ptr + rows[:, None] * C + cols[None, :],
                                  mask=(rows[:, None] < R) & (cols[None, :] < C), other=0.0), axis=1)
        tl.store(out_ptr + rows, acc * scale, mask=rows < R)


@despina.jit
def store_2d(x_ptr, R, C, S, OFF_R, OFF_C, BR: tl.constexpr, BC: tl.constexpr):
    """Each program writes its block's row-major indices (1, 2, ...) at (OFF_R + pid * BR, OFF_C)."""
    desc = tl.make_tensor_descriptor(x_ptr, [R, C], [S, 1], [BR, BC])
    tile = 1 + tl.program_id(0) * BR * BC + tl.arange(0, BR)[:, None] * BC + tl.arange(0, BC)[None, :]
    desc.store([OFF_R + tl.program_id(0) * BR, OFF_C], tile)


@despina.jit
def store_3d(x_ptr, D0, D1, D2, O0, O1, O2, B0: tl.constexpr, B1: tl.constexpr, B2: tl.constexpr):
    desc = tl.make_tensor_descriptor(x_ptr, [D0, D1, D2], [D1 * D2, D2, 1], [B0, B1, B2])
    i = tl.arange(0, B0)[:, None, None] * (B1 * B2) + tl.arange(0, B1)[None, :, None] * B2 + tl.arange(0, B2)[None, None, :]
    desc.store([O0, O1, O2], i + 1)
