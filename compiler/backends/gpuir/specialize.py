"""Warp specialization (`tl.range(..., warp_specialize=True)`, sm_90a): a producer warp issues a pipelined
loop's TMA copies while the kernel's own warps (the consumers) run its wgmma dots.

    entry:      thread 0 sets up a full and an empty mbarrier per ring slot; every thread meets at a CTA barrier
    producer:   one more warp; its first thread computes the loop's bounds and (for each iteration) the loads'
                coordinates, waits for the slot's empty barrier and copies the iteration's tiles into it
                (completing its full barrier); the others exit
    consumers:  the kernel's warps; the loop waits for a slot's full barrier, runs the body, and gives back
                the slot whose group wgmma retired; the rest of the kernel as written, with a named barrier
                among the consumers for the CTA's

The producer runs ahead by the ring alone: no CTA barrier in the loop, and no thread of the consumers
computes coordinates or issues copies. Measured on an H200 (tutorial 09's kernels, fp16, 4096 and 8192
cubed): the flattened persistent loop at 128x128x64 runs 1.20-1.26x faster specialized with 3 stages
(1.10-1.17x Triton's specialized loop), 1.04-1.09x with 4; the plain loop and 128x256x64 within 3%.

The consumers cooperate on every tile. Two warpgroups of 4 warps taking turns at a flattened nest's tiles
instead (CUTLASS's ping-pong: each holds a whole tile, with its own shared memory and named barrier, and one
epilogue runs while the other warpgroup's products do) were built and measured on an H200 (tutorial 09's
kernel, fp16, 128x128x64, specialized; one process per build, side by side): slower everywhere, the more so
the smaller K. 8192x8192xK with 3 stages: K 512 532.5 -> 499.4 TFLOP/s, 1024 579.3 -> 555.7, 2048 599.5 ->
585.6, 8192 619.1 -> 609.6; 4096^3 with 4 stages 620.1 -> 608.6. A warpgroup alone converts and stores a whole
tile, which at small K outlasts the other's products, and at large K the epilogue it hides is a few percent of
the time that one warpgroup's products alone did not win back: by ncu, at 8192^3 with 4 stages the tensor pipe
is busy 93% of the cooperating loop's cycles (the SM clock held at 1.44 GHz by power) and 87% of the turns'
(2.23 -> 2.38 M cycles); at K 512, 62% and 58%. A 64x256 tile a warpgroup (one m64n256 wgmma a K step of 16,
not two m64n128) ran 644.6 against the cooperating 620.6 at 8192^3 with 3 stages, 603.2 against 606.8 at
4096^3 and 552.0 against 570.3 at 8192x8192x1024, all below the cooperating 128x256 (684.2, 677.8, 605.9). (A
warpgroup that skips the other's tiles must start a tile only once the other has taken the last slot of the
tile before: a wait names a full barrier's phase by its parity, and a slot two phases on reads as done.)

The producer is one warp: a warpgroup would cost the block 96 threads and their registers (the plain
128x128x64 loop with 3 stages kept its two blocks an SM: 0.73x with 128). Where shared memory holds the SM
to one block anyway, the lowering makes it a warpgroup that gives its registers to the consumers
(`setmaxnreg`, `lower/specialize.rebalance`).

The loop's plan (`gpuir.pipeline`) says which ops compute the copies' coordinates (its ahead slice); the
producer computes them, and the ops outside the loop they read, itself. A loop is specialized when:
- its loads are all copied by TMA, its dots run on wgmma (sm_90a);
- no loop encloses it (the producer runs it once, from the kernel's entry), and only `if`s do, whose
  conditions the producer computes too (a loop the consumers skip, the producer skips);
- what the producer computes (the bounds, the conditions, the coordinates and what they read outside
  the loop) is scalar arithmetic: pure, no tiles; loops of it too (the loop over a persistent nest's tiles
  that decides which version of it runs, `wrap_versions.py`), with what they read.
Otherwise the loop keeps its pipeline, and its `warp_specialized` attribute says why (the GPU IR shows it).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...ir.core import Block, Op, Value
from ...ir.types import TileType
from ...passes.flatten import defined_in
from ...passes.rewrite import feeding
from .assign import GpuFunction
from .defer import TAIL
from .ops import gpu_opdef
from .pipeline import describe

ATTR = "warp_specialize"
RESULT = "warp_specialized"
PRODUCER_WARPS = 1


@dataclass(frozen=True)
class Producer:
    """A warp-specialized loop's producer: the ops outside the loop it computes again (program order), and
    the conditions under which the loop runs (each value and the branch taken)."""

    inputs: tuple[Op, ...]
    conditions: tuple[tuple[Value, bool], ...]
    warps: int = PRODUCER_WARPS
    # a deferred loop's last B after it: the `if` holding it, the descriptor load, and the ring load it repeats
    tail: tuple[Op, Op, int] | None = None


def _path(block: Block, loop: Op) -> list[tuple[Op, int]] | None:
    """The region ops enclosing `loop` from the function's body down (each with the index of the region
    holding the next), or None when `loop` is not in `block`."""
    for op in block.ops:
        if op is loop:
            return []
        for i, region in enumerate(op.regions):
            inner = _path(region, loop)
            if inner is not None:
                return [(op, i), *inner]
    return None


def _producer(gpu: GpuFunction, loop: Op) -> Producer | str:
    plan = gpu.pipelines.get(loop)
    if plan is None:
        return f"the loop is not pipelined ({loop.attrs.get('pipeline', 'none')})"
    if not plan.wgmma:
        return "its dots do not run on wgmma (sm_90a)"
    if plan.cp_async:
        return "a load of the loop is copied by cp.async, not TMA (the producer issues TMA's copies alone)"
    if gpu.num_warps % 4:
        return f"num_warps={gpu.num_warps} is not whole warpgroups (wgmma's)"
    path = _path(gpu.fn.body, loop)
    assert path is not None
    if any(op.name != "if" for op, _ in path):
        return "a loop encloses it: the producer runs the loop once, from the kernel's entry"
    inside = defined_in(loop) | set(loop.results)
    roots = [*loop.operands[:3], *(loop.operands[2 + j] for j in plan.carried)]
    roots += [op.operands[0] for op, _ in path]
    for op in plan.ahead:
        if any(isinstance(r.type, TileType) for r in op.results):
            return f"the copies' coordinates take a tile ('{op.name}'): the producer computes scalars alone"
        roots += [v for o in op.walk() for v in o.operands if v not in inside]
    roots += [v for a in plan.loads for v in a.load.operands if v not in inside]
    inputs = _inputs(gpu, roots)
    for op in inputs:
        for o in op.walk():
            if gpu_opdef(o.name).side_effects or o.name in ("load", "descriptor_load") or any(
                    isinstance(r.type, TileType) for r in o.results):
                return (f"the producer computes the loop's bounds and coordinates itself, and '{o.name}' outside "
                        "the loop is not scalar arithmetic")
    return Producer(tuple(inputs), tuple((op.operands[0], i == 0) for op, i in path), tail=_tail(gpu, loop, path))


def _inputs(gpu: GpuFunction, roots: list[Value]) -> list[Op]:
    """The ops of the kernel (program order) that compute `roots`, and what the regions of those with regions
    read from outside them (a loop over a persistent nest's tiles, `wrap_versions._version_nest`)."""
    ops = list(gpu.fn.walk())
    while True:
        inputs = feeding(ops, roots)
        free = [v for op in inputs if op.regions for v in _free(op) if v not in roots]
        if not free:
            return inputs
        roots = [*roots, *free]


def _free(op: Op) -> list[Value]:
    """The values the ops inside `op`'s regions read from outside `op`."""
    inside = defined_in(op)
    return [v for o in op.walk() if o is not op for v in o.operands if v not in inside]


def _tail(gpu: GpuFunction, loop: Op, path: list[tuple[Op, int]]) -> tuple[Op, Op, int] | None:
    """The descriptor load after a deferred `loop` of its second product's B for the last iteration (`defer.py`),
    the `if` holding it, and the index of the ring load it repeats (the same tensor map and block, not read
    transposed); or None."""
    plan = gpu.pipelines[loop]
    block = path[-1][0].regions[path[-1][1]] if path else gpu.fn.body
    for branch in (op for op in block.ops[block.ops.index(loop) + 1 :] if op.name == "if"):
        for op in branch.regions[0].ops:
            if op.name != "descriptor_load" or TAIL not in op.attrs:
                continue
            for i, a in enumerate(plan.loads):
                if a.tma is not None and a.trans is None and a.tma == op.attrs.get("tma") \
                        and a.load.attrs["shape"] == op.attrs["shape"]:
                    return branch, op, i
    return None


def specialize_warps(gpu: GpuFunction) -> None:
    """Give each pipelined loop that asks for it (`warp_specialize`) a producer warp, where it can have one
    (at most one loop a kernel); record the decision as the loop's `warp_specialized` attribute."""
    taken = False
    for loop in [op for op in gpu.fn.walk() if op.name == "for" and op.attrs.get(ATTR)]:
        found = "another loop of the kernel is warp-specialized" if taken else _producer(gpu, loop)
        if isinstance(found, str):
            loop.attrs[RESULT] = f"no: {found}"
            continue
        taken = True
        gpu.pipelines[loop] = replace(gpu.pipelines[loop], producer=found)
        loop.attrs["pipeline"] = describe(gpu.pipelines[loop])
        loop.attrs[RESULT] = f"yes: a producer warp issues the copies, the kernel's {gpu.num_warps} warps consume them"
        if found.tail is not None:
            found.tail[1].attrs["async_copy"] = "into the loop's ring by the producer, after its last iteration"
