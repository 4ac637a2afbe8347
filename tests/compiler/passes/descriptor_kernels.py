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
