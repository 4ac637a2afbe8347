"""One more resident CTA per SM when registers are what keep it out.

ptxas picks a kernel's register count on its own heuristics, and newer versions spend registers
freely: hoisting every load of a block to the top. Where registers are what limits the CTAs an SM
holds, the PTX is linked again with `.minnctapersm N` (CUDA's `__launch_bounds__` second argument:
ptxas then plans for 65536 / (N * threads) registers), N one more CTA than the registers allowed,
and that cubin is kept if ptxas did it without spilling; else the first stays. The hint is tried:
- from one CTA to two, for a budget of at least 64 registers a thread: for a 512-thread CTA, 65
  registers or more leave room for one CTA per SM, and every `bar.sync` of a reduction then idles
  the whole SM, with no second CTA to run meanwhile (a 16-warp layer norm ran at 0.7x the speed it
  has at 64 registers); below 64 (1024-thread CTAs) it would more likely cost spills or parallelism
  within a thread than gain anything;
- from N CTAs to N + 1 where one allocation step fewer (8 registers a thread) would fit them: the
  8-warp fp16 layer norm of 4096 columns took 48 registers (5 CTAs, 40 warps an SM) where Triton's
  takes 40 (6 CTAs), and ran 5% slower by ncu on an H100.
Threads and shared memory must allow the extra CTA. Where ptxas cannot fit an instruction in the
budget at all (a wgmma whose accumulator alone takes 128 registers: "C7602 Insufficient registers"),
the link fails and the first cubin stays.

A kernel whose pipelined loop leaves a product of A from registers in flight into the next iteration
(attention's P V, `gpuir.pipeline`) is hinted as it runs beside another CTA: with that product waited for
where it is issued (`sharing`). In flight, P and the accumulator hold registers while the next S is
computed, 128 a thread at d64 with 128x128 blocks on 8 warps, the whole budget of two such CTAs; ptxas fit
that kernel in 123 registers, serialized every wgmma on some runs (C7511: one wait after each) and ran it at
401-409 TFLOP/s on an H100, where waited for where issued it took 127, no finding, and ran 412-421 (causal:
335-336 either way). Beside another CTA, whose products fill the tensor cores meanwhile, the wait costs
nothing measurable. A kernel that keeps the SM to itself keeps the product in flight.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

from .link import LinkError, link_cubin, parse_info_log
from .target import Target

Link = Callable[[str, str, str], tuple[bytes, str]]

REGISTERS_PER_SM = 65536
MIN_HINTED_REGISTERS = 64
REGISTER_STEP = 8  # registers are allocated to a thread 8 at a time
_THREADS_PER_SM = {80: 2048, 86: 1536, 89: 1536, 90: 2048}
_SHARED_PER_SM = {80: 164 * 1024, 86: 100 * 1024, 89: 100 * 1024, 90: 228 * 1024}
_RESERVED_SHARED_PER_CTA = 1024  # the system's share of each CTA's shared memory (sm_80 on)
_MAXNTID = re.compile(r"^\.maxntid [^\n]*$", re.M)


def ctas_by_registers(registers: int, threads: int) -> int:
    """How many CTAs of `threads` fit in an SM's register file at `registers` a thread
    (allocated in units of 8 a thread)."""
    per_thread = -(-max(registers, 1) // REGISTER_STEP) * REGISTER_STEP
    return REGISTERS_PER_SM // (per_thread * threads)


def hinted_ctas(target: Target, registers: int, threads: int, shared: int) -> int | None:
    """The CTAs per SM to ask ptxas for (`.minnctapersm`), one more than `registers` a thread allow, or
    None where the hint is not worth trying (see the module docstring)."""
    now = ctas_by_registers(registers, threads)
    if registers <= 0 or now == 0:
        return None
    wanted = now + 1
    if wanted * threads > _THREADS_PER_SM.get(target.capability, 2048):
        return None
    if wanted * (shared + _RESERVED_SHARED_PER_CTA) > _SHARED_PER_SM.get(target.capability, 100 * 1024):
        return None
    if now == 1:
        return wanted if REGISTERS_PER_SM // (wanted * threads) >= MIN_HINTED_REGISTERS else None
    return wanted if ctas_by_registers(registers - REGISTER_STEP, threads) >= wanted else None


def with_min_ctas(ptx: str, ctas: int) -> str | None:
    """`ptx` with `.minnctapersm ctas` after its kernel's `.maxntid` (None without one)."""
    match = _MAXNTID.search(ptx)
    if match is None or ".minnctapersm" in ptx:
        return None
    return ptx[: match.end()] + f"\n.minnctapersm {ctas}" + ptx[match.end() :]


def more_ctas(
    ptx: str, cubin: bytes, log: str, target: Target, name: str, threads: int, shared: int, link: Link = link_cubin,
    sharing: Callable[[], str] | None = None,
) -> tuple[str, bytes, str]:
    """(PTX, cubin, info log) of kernel `name`, given `ptx` linked as it is (`cubin`, `log`):
    those, or the kernel with `.minnctapersm` linked by `link` when that gives one more CTA per SM
    without spills (see the module docstring). The hinted kernel is `ptx`, or what `sharing` makes: the
    kernel as it runs beside another CTA, in no more shared memory than `shared`."""
    first = parse_info_log(log, name)
    wanted = hinted_ctas(target, first.registers, threads, shared)
    hinted = None if wanted is None else with_min_ctas(ptx if sharing is None else sharing(), wanted)
    if wanted is None or hinted is None:
        return ptx, cubin, log
    try:
        cubin2, log2 = link(hinted, target.arch, f"{name}.ptx")
    except LinkError:
        return ptx, cubin, log
    second = parse_info_log(log2, name)
    fits = 0 < second.registers and ctas_by_registers(second.registers, threads) >= wanted
    if fits and second.spill_stores == 0 and second.spill_loads == 0 and second.stack <= first.stack:
        return hinted, cubin2, log2
    return ptx, cubin, log


_BLOCKS_PER_SM = {80: 32, 86: 16, 89: 24, 90: 32}
_SUBPARTITIONS = 4  # an SM's register file is split between its four schedulers
_REGISTER_UNIT = 256  # registers are allocated to a warp in units of 256
_SHARED_UNIT = 128  # and shared memory to a block in units of 128 bytes


class Occupancy(NamedTuple):
    """Blocks of one kernel resident on an SM at once, what limits them, and the warps that makes."""

    blocks: int
    warps: int
    max_warps: int
    limit: str  # registers, shared memory, threads or blocks: the resource that allows the fewest

    @property
    def fraction(self) -> float:
        return self.warps / self.max_warps


def occupancy(capability: int, registers: int, threads: int, shared: int) -> Occupancy:
    """The occupancy of a kernel using `registers` a thread and `shared` bytes of shared memory in
    blocks of `threads`, on an SM of compute capability `capability` (80 for sm_80), as CUDA's
    occupancy calculator counts it: registers per warp rounded up to 256 and shared to 128 bytes
    (plus the system's 1 KiB a block), warps spread over the four sub-partitions' register files.

        >>> occupancy(90, 32, 128, 0)
        Occupancy(blocks=16, warps=64, max_warps=64, limit='threads')
    """
    if threads <= 0 or registers < 0 or shared < 0:
        raise ValueError(f"threads must be positive and registers and shared memory non-negative, got {threads} "
                         f"threads, {registers} registers, {shared} bytes")
    threads_per_sm = _THREADS_PER_SM.get(capability, 2048)
    warps_per_block = -(-threads // 32)
    per_warp = -(-max(registers, 1) * 32 // _REGISTER_UNIT) * _REGISTER_UNIT
    per_block = -(-(shared + _RESERVED_SHARED_PER_CTA) // _SHARED_UNIT) * _SHARED_UNIT
    warps_by_registers = (REGISTERS_PER_SM // _SUBPARTITIONS // per_warp) * _SUBPARTITIONS
    limits = {  # on a tie the first is named: a kernel held back only by the SM's own caps is at full occupancy
        "threads": threads_per_sm // (warps_per_block * 32),
        "blocks": _BLOCKS_PER_SM.get(capability, 16),
        "registers": warps_by_registers // warps_per_block if per_warp * warps_per_block <= REGISTERS_PER_SM else 0,
        "shared memory": _SHARED_PER_SM.get(capability, 100 * 1024) // per_block,
    }
    limit = min(limits, key=lambda k: limits[k])
    blocks = limits[limit]
    return Occupancy(blocks, blocks * warps_per_block, threads_per_sm // 32, limit)
