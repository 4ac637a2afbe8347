"""wgmma's plan on CPU: the instruction's N and warps per tile (Triton's rules), the shared-memory
descriptor's bits against hand-computed values, and the swizzle atoms it reads: each atom is the
hardware's swizzle of its own address (byte bits [4:6] ^= [7:9] for 128 bytes)."""

from __future__ import annotations

import pytest

from despina.compiler.backends.gpuir.shared import SwizzledShared, operand_swizzle
from despina.compiler.backends.gpuir.wgmma import descriptor, fit, instr_n, operand_strides, warps_per_tile_v3


@pytest.mark.parametrize(
    ("m", "n", "warps", "want"),
    [(128, 256, 8, (256, (8, 1))), (128, 128, 8, (128, (8, 1))), (64, 256, 8, (128, (4, 2))),
     (128, 128, 4, (128, (4, 1))), (256, 128, 8, (128, (8, 1))), (64, 64, 4, (64, (4, 1)))],
)
def test_instruction_n_and_warps(m: int, n: int, warps: int, want: tuple[int, tuple[int, int]]) -> None:
    assert (instr_n(m, n, warps), warps_per_tile_v3(m, warps)) == want
    assert fit(m, n, 64, warps) == want


@pytest.mark.parametrize(
    ("m", "n", "k", "warps", "why"),
    [(32, 64, 64, 4, "BLOCK_M=32 is not a multiple of 64"), (128, 128, 64, 2, "num_warps=2 is not whole warpgroups"),
     (64, 64, 64, 8, "leave each warpgroup fewer than 64x64"), (64, 32, 64, 4, "fewer than 64x64"),
     (64, 64, 8, 4, "BLOCK_K=8 is not a multiple of 16")],
)
def test_what_wgmma_does_not_take(m: int, n: int, k: int, warps: int, why: str) -> None:
    found = fit(m, n, k, warps)
    assert isinstance(found, str) and why in found


def test_descriptor_bits_against_hand_computed_values() -> None:
    # A, K-major, 128-byte swizzle, at byte 8192: start 8192>>4 = 0x200, leading 16>>4 = 1 (unused),
    # stride 1024>>4 = 0x40 (8 rows of 128 bytes), swizzle mode 1 in bits 62-63.
    assert descriptor(8192, 16, 1024, 128) == 0x4000_0040_0001_0200
    # B, N-major 64x256 tile: atoms of 64 columns are 64 rows x 128 bytes apart (leading 8192>>4 = 0x200).
    assert descriptor(0x1_0800, 8192, 1024, 128) == 0x4000_0040_0200_1080
    assert descriptor(0, 16, 512, 64) == (2 << 62) | (32 << 32) | (1 << 16)
    assert descriptor(0, 16, 256, 32) >> 62 == 3
    with pytest.raises(ValueError, match="multiple of 16"):
        descriptor(8, 16, 1024, 128)
    with pytest.raises(ValueError, match="below 256 KiB"):
        descriptor(1 << 18, 16, 1024, 128)


def test_operand_strides_by_major() -> None:
    a = operand_swizzle((128, 64), (1, 0), 2).atoms()  # A, K contiguous
    assert operand_strides(a, (128, 64), 0, 2) == (16, 1024, False)
    b = operand_swizzle((64, 256), (1, 0), 2).atoms()  # B, N contiguous: transposed
    assert operand_strides(b, (64, 256), 1, 2) == (64 * 128, 1024, True)
    bk = operand_swizzle((32, 128), (0, 1), 2).atoms()  # B, K contiguous with 64-byte rows
    assert operand_strides(bk, (32, 128), 1, 2) == (16, 512, False)


@pytest.mark.parametrize(("shape", "order"), [((64, 256), (1, 0)), ((128, 64), (1, 0)), ((128, 64), (0, 1)), ((32, 128), (0, 1))])
def test_atoms_are_the_hardware_swizzle_of_their_address(shape: tuple[int, int], order: tuple[int, int]) -> None:
    enc = operand_swizzle(shape, order, 2).atoms()
    width = enc.vec * enc.max_phase  # elements of a row in one atom
    contig, rows = order
    inv = enc.linear(shape).invert()
    seen = set()
    for i in range(shape[0]):
        for j in range(shape[1]):
            idx = (i, j)
            r, c = idx[rows], idx[contig]
            off = inv.apply(dim0=i, dim1=j)[0]
            plain = 2 * ((c // width) * shape[rows] * width + r * width + c % width)
            row_bytes = 2 * width
            mask = row_bytes // 16 - 1  # the 16-byte chunks of one row that the swizzle permutes
            assert 2 * off == plain ^ ((((plain // row_bytes) // enc.per_phase) % enc.max_phase & mask) << 4)
            seen.add(off)
    assert len(seen) == shape[0] * shape[1]


def test_atoms_print_their_width() -> None:
    enc = SwizzledShared(8, 1, 8, (1, 0)).atoms()
    assert enc.block == 64 and str(enc).endswith("order=[1, 0], block=64>")
