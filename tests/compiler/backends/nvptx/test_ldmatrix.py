"""The rows each lane gives `ldmatrix` (lower/ldmatrix.py `lane_rows`), checked against the
instruction's semantics on the CPU: lane `8i + j` gives row `j` of matrix `i`; without `.trans`
thread `t` receives b16 pair `t % 4` of row `t / 4`, with `.trans` element `t / 4` of rows
`2 (t % 4)` and `2 (t % 4) + 1`. Every register of the operand must come from the buffer offset of
its element. The lane part is taken once at entry and a group's constant offset XORed or added to
it, so the PTX of a pipelined loop reads the ring at a few bases plus immediates."""

from __future__ import annotations

import re

import pytest

from despina.compiler.backends.gpuir.mma import Mma, MmaOperand
from despina.compiler.backends.gpuir.shared import operand_swizzle
from despina.compiler.backends.nvptx.lower.ldmatrix import lane_rows, split_addresses

# (operand, warps, shape, contiguous dim): the tutorial matmul's A and B (128x128x64 and
# 128x256x64 on 8 warps), attention's Q (hoisted), K (K contiguous) and V (.trans) at d64 and d128.
CASES = [
    (0, (4, 2), (128, 64), 1),
    (1, (4, 2), (64, 128), 1),
    (1, (2, 4), (64, 256), 1),
    (0, (8, 1), (128, 128), 1),
    (1, (8, 1), (128, 64), 0),
    (1, (8, 1), (64, 128), 1),
    (1, (8, 1), (64, 64), 1),
    (0, (8, 1), (128, 64), 0),
]


@pytest.mark.parametrize(("op_idx", "warps", "shape", "contig"), CASES)
def test_each_lane_reads_its_elements(op_idx: int, warps: tuple[int, int], shape: tuple[int, int], contig: int) -> None:
    dst = MmaOperand(op_idx, Mma(2, warps), 2).linear(shape)
    shared = operand_swizzle(shape, (contig, 1 - contig), 2)
    inv = shared.linear(shape).invert()
    rows = lane_rows(dst, shared, 1)
    trans = contig != (1 if op_idx == 0 else 0)
    assert len(dst.reg) >= 3
    for g in range(0, dst.num_regs, 8):
        for w in range(1 << len(dst.warp)):
            for t in range(32):
                for i in range(4):
                    for e in range(2):
                        want = inv.apply(dim0=dst.index(g | i << 1 | e, t, w)[0], dim1=dst.index(g | i << 1 | e, t, w)[1])[0]
                        if trans:
                            got = rows.index(g, 8 * i + 2 * (t % 4) + e, w)[0] + t // 4
                        else:
                            got = rows.index(g, 8 * i + t // 4, w)[0] + 2 * (t % 4) + e
                        assert got == want, (g, w, t, i, e)


def test_the_matmul_loop_reads_the_ring_at_few_bases() -> None:
    pytest.importorskip("llvmlite")
    pytest.importorskip("cuda.bindings.nvjitlink")
    from .test_software_pipeline import _loop, _matmul

    body = _loop(_matmul(target="sm_90").asm["ptx"])
    reads = re.findall(r"ldmatrix\.sync\.aligned\.m8n8\.x4(?:\.trans)?\.shared\.b16 \{[^}]*\}, \[(%r\d+)(\+\d+)?\]", body)
    assert len(reads) == 24
    # A: a base a K step of 16 (the swizzle's bits), its 4 M tiles of 16 rows by immediates; B: its
    # K steps of 32 and N tiles of 16 at 2 bases (8 bases in all before: an N tile's chunk bit was not split off).
    assert len({base for base, _ in reads}) == 6
    assert sum(1 for _, imm in reads if imm) == 20


def test_split_addresses_only_where_registers_allow() -> None:
    """The tutorial matmul at 128x128 on 8 warps and attention's chained dots (64 accumulator registers
    a thread or fewer) take split addresses; 128x256 (128 registers) does not: there the extra live lane
    bases cost more than the adds they save (measured on an H100 and an H200)."""
    assert split_addresses(Mma(2, (2, 4)).linear((128, 128)))
    assert not split_addresses(Mma(2, (2, 4)).linear((128, 256)))
    assert split_addresses(Mma(2, (8, 1)).linear((128, 64)))
    assert split_addresses(Mma(2, (8, 1)).linear((128, 128)))


def test_the_wide_matmul_keeps_row_and_column_addresses() -> None:
    pytest.importorskip("llvmlite")
    pytest.importorskip("cuda.bindings.nvjitlink")
    from .test_software_pipeline import _loop, _matmul

    k = _matmul(bn=256, target="sm_90")
    reads = re.findall(r"ldmatrix\.sync\.aligned\.m8n8\.x4(?:\.trans)?\.shared\.b16 \{[^}]*\}, \[(%r\d+)(\+\d+)?\]", _loop(k.asm["ptx"]))
    assert len(reads) == 32 and len({base for base, _ in reads}) == 12  # split addresses would need 6
    # 252 before each loop's carried pointers had private address copies (coalesce.py), 253 since: the loop
    # has 7 fewer 64-bit pointer adds; split addresses took 255 and spilled. The mbarrier handoff takes 255
    # without a spill (its two waits split the loop into blocks): 1.00-1.02x -> 1.05-1.06x Triton on an H100.
    assert k.metadata["registers"] <= 255 and k.metadata["spill_stores"] == 0 and ".local" not in k.asm["ptx"]
