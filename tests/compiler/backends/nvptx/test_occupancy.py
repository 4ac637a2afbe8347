"""occupancy(): resident blocks and warps per SM as CUDA's occupancy calculator counts them."""

from __future__ import annotations

import pytest

from despina.compiler.backends.nvptx.occupancy import Occupancy, occupancy


def test_a_light_kernel_fills_the_sm() -> None:
    assert occupancy(90, 32, 128, 0) == Occupancy(16, 64, 64, "threads")
    assert occupancy(90, 16, 32, 0) == Occupancy(32, 32, 64, "blocks")  # one-warp blocks: 32 blocks at most
    assert occupancy(90, 32, 128, 0).fraction == 1.0


def test_registers_round_up_to_256_a_warp_per_sub_partition() -> None:
    # 64 registers: 2048 a warp, 8 warps a sub-partition, 32 warps: 4 blocks of 256 threads, half the SM.
    assert occupancy(80, 64, 256, 0) == Occupancy(4, 32, 64, "registers")
    # 65 registers round up to 72 a thread (2304 a warp): 7 warps a sub-partition, 28 warps, 3 blocks of 8.
    assert occupancy(90, 65, 256, 0) == Occupancy(3, 24, 64, "registers")
    # 200 registers: 6400 a warp, 2 warps a sub-partition (not 10 / 4 of the SM's 65536): one block of 8 warps.
    assert occupancy(90, 200, 256, 0) == Occupancy(1, 8, 64, "registers")


def test_a_block_over_the_register_file_does_not_launch() -> None:
    assert occupancy(90, 255, 1024, 0) == Occupancy(0, 0, 64, "registers")


def test_shared_memory_counts_the_reserved_kilobyte_and_128_byte_units() -> None:
    # sm_90: 228 KiB an SM; 100 KiB + 1 KiB a block: 2 blocks.
    assert occupancy(90, 32, 128, 100 * 1024) == Occupancy(2, 8, 64, "shared memory")
    # sm_80: 164 KiB; 81 KiB + 1 KiB -> 2 blocks, 82 KiB + 1 KiB -> 1.
    assert occupancy(80, 32, 128, 81 * 1024).blocks == 2
    assert occupancy(80, 32, 128, 82 * 1024).blocks == 1
    assert occupancy(80, 32, 128, 1).blocks == occupancy(80, 32, 128, 128).blocks


def test_each_architecture_has_its_own_limits() -> None:
    assert occupancy(86, 32, 128, 0) == Occupancy(12, 48, 48, "threads")  # 1536 threads an SM
    assert occupancy(89, 16, 32, 0) == Occupancy(24, 24, 48, "blocks")
    assert occupancy(86, 32, 128, 60 * 1024).blocks == 1  # 100 KiB an SM


def test_nonsense_is_refused() -> None:
    with pytest.raises(ValueError, match="threads must be positive"):
        occupancy(90, 32, 0, 0)
