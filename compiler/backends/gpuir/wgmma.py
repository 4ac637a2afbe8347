"""wgmma, Hopper's warpgroup MMA (`wgmma.mma_async.sync.aligned.m64nNk16`, sm_90a): which dots it
takes, its N and warps per tile, and the shared-memory matrix descriptors its operands are read by.

One instruction multiplies a 64x16 slice of A by a 16xN slice of B into a 64xN accumulator held by
one warpgroup (4 consecutive warps; warp `w % 4` holds rows 16(w%4) .. +15, each lane its mma.sync C
fragment for every 8 columns): the accumulator layout `Mma(version=3, warps, (16, N))`. Warpgroups
tile the result along M first (Triton's warpsPerTileV3: start at 4x1 warps, double M while the tile
has more rows than 16 per warp along M, else N).

Both operands are read from shared memory through 64-bit descriptors (`descriptor`): bits 0-13 the
start address >> 4, 16-29 the leading byte offset >> 4, 32-45 the stride byte offset >> 4, 62-63 the
swizzle (1: 128 bytes, 2: 64, 3: 32). A buffer is a `SwizzledShared` cut into atoms (8 rows of the
swizzle's width, `SwizzledShared.atoms`), either K-major (K contiguous: the stride offset steps 8
rows, the leading one is unused) or M/N-major (M or N contiguous, the `tnsp` flag of the instruction:
the leading offset steps from atom to atom along M or N, the stride offset 8 rows of K).
"""

from __future__ import annotations

from .shared import SwizzledShared

INSTR_M, INSTR_K = 64, 16  # per warpgroup, for 16-bit operands
MIN_N = 64  # narrower instructions would start inside a swizzle atom of an N-major B
SHARED_BYTES = 232448  # the most shared memory a block of sm_90 may have: a ring must fit in it
SM_SHARED_BYTES = 233472  # an sm_90 SM's shared memory, shared by its blocks
RESERVED_BYTES = 1024  # the system's part of each block's
_SWIZZLE_MODE = {128: 1, 64: 2, 32: 3}


def instr_n(m: int, n: int, num_warps: int) -> int:
    """The instruction's N for an m x n accumulator (Triton's mmaVersionToInstrShape, powers of two):
    the widest up to 256 that divides n and leaves every warp along N a tile."""
    n_warps = max(num_warps // max(m // 16, 1), 1)
    most = min(256, max(n // n_warps, 8))
    return 1 << (most.bit_length() - 1)


def warps_per_tile_v3(m: int, num_warps: int) -> tuple[int, int]:
    """Warps along M and N (Triton's warpsPerTileV3): 4 x 1, then M doubled while the tile has more
    than 16 rows per warp along M, else N."""
    wm, wn = 4, 1
    while wm * wn < num_warps:
        if m > 16 * wm:
            wm *= 2
        else:
            wn *= 2
    return wm, wn


def instr_k(elem_bytes: int) -> int:
    """K of one instruction: 32 bytes of each row of A (16 for 16-bit types, 32 for fp8)."""
    return 32 // elem_bytes


def fit(m: int, n: int, k: int, num_warps: int, k_step: int = INSTR_K) -> tuple[int, tuple[int, int]] | str:
    """The instruction's N and the warps per tile for an m x n x k dot whose instruction takes `k_step`
    of K, or why wgmma does not take it."""
    if num_warps % 4:
        return f"num_warps={num_warps} is not whole warpgroups of 4"
    if m % INSTR_M:
        return f"BLOCK_M={m} is not a multiple of {INSTR_M} (one warpgroup's rows)"
    if k % k_step:
        return f"BLOCK_K={k} is not a multiple of {k_step}"
    width = instr_n(m, n, num_warps)
    wm, wn = warps_per_tile_v3(m, num_warps)
    if 16 * wm > m or width * wn > n or width < MIN_N:
        return f"{num_warps} warps over {m}x{n} leave each warpgroup fewer than {INSTR_M}x{MIN_N} results"
    return width, (wm, wn)


def descriptor(start: int, leading: int, stride: int, swizzle_bytes: int) -> int:
    """The 64-bit shared-memory matrix descriptor (byte addresses and offsets, multiples of 16)."""
    for name, value in (("start", start), ("leading", leading), ("stride", stride)):
        if value % 16 or not 0 <= value >> 4 < 1 << 14:
            raise ValueError(f"descriptor {name} offset {value} is not a multiple of 16 below 256 KiB")
    return (start >> 4) | (leading >> 4) << 16 | (stride >> 4) << 32 | _SWIZZLE_MODE[swizzle_bytes] << 62


def operand_strides(shared: SwizzledShared, shape: tuple[int, int], op_idx: int, elem_bytes: int) -> tuple[int, int, bool]:
    """(leading byte offset, stride byte offset, transposed) of an operand tile (0 = A, 1 = B) laid out
    as `shared` (with atoms): transposed when M or N, not K, is contiguous."""
    width = shared.vec * shared.max_phase * elem_bytes
    if width not in _SWIZZLE_MODE or shared.block not in (0, shared.vec * shared.max_phase):
        raise ValueError(f"wgmma reads 32-, 64- or 128-byte swizzle atoms, not {shared}")
    kdim = 1 if op_idx == 0 else 0
    atom_rows = 8 * width  # 8 rows of the swizzle's width
    if shared.order[0] == kdim:
        return 16, atom_rows, False
    return shape[kdim] * width, atom_rows, True


def swizzle_bytes(shared: SwizzledShared, elem_bytes: int) -> int:
    return shared.vec * shared.max_phase * elem_bytes
