"""Swizzled shared layouts: bijections, the hardware's swizzle formula, and no bank conflicts
for an ldmatrix phase or a 16-byte store (a bank model: 32 banks of 4 bytes; a request of 8
lanes x 16 bytes is conflict-free when it touches 8 distinct 16-byte bank groups)."""

from __future__ import annotations

import pytest

from despina.compiler.backends.gpuir.shared import SwizzledShared, operand_swizzle

CASES = [((64, 64), 2, 128), ((128, 32), 2, 64), ((64, 16), 2, 32), ((32, 128), 2, 128), ((64, 64), 1, 64), ((32, 32), 4, 128)]


def _offsets(enc: SwizzledShared, shape: tuple[int, int]) -> dict[tuple[int, ...], int]:
    inv = enc.linear(shape).invert()
    return {(r, c): inv.apply(dim0=r, dim1=c)[0] for r in range(shape[0]) for c in range(shape[1])}


@pytest.mark.parametrize("shape,elem_bytes,mode", CASES)
def test_swizzle_mode_and_formula(shape: tuple[int, int], elem_bytes: int, mode: int) -> None:
    enc = operand_swizzle(shape, (1, 0), elem_bytes)
    assert enc.swizzle_bytes_per_row * elem_bytes == mode
    offsets = _offsets(enc, shape)
    cols = shape[1]
    for (r, c), off in offsets.items():
        phase = (r // enc.per_phase) % enc.max_phase
        assert off == r * cols + ((c // enc.vec) ^ phase) * enc.vec + c % enc.vec
    assert sorted(offsets.values()) == list(range(shape[0] * shape[1]))  # a bijection


def test_128_byte_swizzle_is_the_hardware_xor() -> None:
    enc = operand_swizzle((64, 64), (1, 0), 2)
    for (r, c), off in _offsets(enc, (64, 64)).items():
        plain = 2 * (r * 64 + c)
        assert 2 * off == plain ^ (((plain >> 7) & 7) << 4)


def _groups(byte_addresses: list[int]) -> set[int]:
    return {(a // 16) % 8 for a in byte_addresses}


@pytest.mark.parametrize("shape,elem_bytes,mode", CASES)
def test_ldmatrix_phases_are_conflict_free(shape: tuple[int, int], elem_bytes: int, mode: int) -> None:
    enc = operand_swizzle(shape, (1, 0), elem_bytes)
    offsets = _offsets(enc, shape)
    for r0 in range(0, shape[0], 8):
        for c0 in range(0, shape[1], enc.vec):
            rows = [offsets[(r0 + i, c0)] * elem_bytes for i in range(8)]
            assert len(_groups(rows)) == 8, (r0, c0)


@pytest.mark.parametrize("shape,elem_bytes,mode", CASES)
def test_vector_stores_of_a_coalesced_tile_are_conflict_free(shape: tuple[int, int], elem_bytes: int, mode: int) -> None:
    """8 consecutive threads store 16 bytes each, row-major over the tile (cp.async or st.shared
    of a coalesced blocked layout): one wavefront each."""
    enc = operand_swizzle(shape, (1, 0), elem_bytes)
    offsets = _offsets(enc, shape)
    vec = enc.vec
    starts = [(r, c) for r in range(shape[0]) for c in range(0, shape[1], vec)]
    for i in range(0, len(starts), 8):
        assert len(_groups([offsets[s] * elem_bytes for s in starts[i : i + 8]])) == 8
    for (r, c) in starts:  # a vector stays contiguous after the swizzle
        assert [offsets[(r, c + j)] for j in range(vec)] == list(range(offsets[(r, c)], offsets[(r, c)] + vec))


def test_column_major_tile_swizzles_its_contiguous_dimension() -> None:
    enc = operand_swizzle((64, 64), (0, 1), 2)
    offsets = _offsets(enc, (64, 64))
    assert offsets[(1, 0)] == 1 and offsets[(0, 1)] == 64 + 8
