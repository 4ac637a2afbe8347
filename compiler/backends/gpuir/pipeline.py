"""Software pipelining of loops that load tensor-core operands (Triton's pipeliner, for cp.async).

A `for` loop whose body loads a tile that only feeds a tensor-core dot (through the conversion to
its operand layout) is run in `num_stages` stages: the loads of iteration `i + num_stages - 1` are
issued as asynchronous copies (`cp.async`, zero-filling masked elements) into a ring of
`num_stages` shared-memory buffers while iteration `i` multiplies what has already arrived, read
with `ldmatrix` straight from its ring slot.

On sm_90a a descriptor load that `tma.py` keeps (its `tma` attribute a tensor map's index) is copied by
TMA instead: one thread copies the whole block into the slot, in the swizzle atoms wgmma reads, through
`tl.trans` when the dot reads it transposed.

This pass decides which loops and loads are pipelined and records the decision on the GPU IR: the
loop's `pipeline` attribute and each load's `async_copy` attribute say what the lowering will emit
(`print_gpuir` shows them), and `GpuFunction.pipelines` holds the plan the lowering follows. The
ops that compute a pipelined load's pointers and mask (its *ahead slice*: address arithmetic,
masks, the loop-carried pointers and their increments) must be pure and at the top level of the
body, or in an `if` of such ops (a flattened nest's next tile); the lowering
evaluates them for iteration `i + num_stages - 1` in the prologue and in each iteration, on
loop-carried copies of the values they carry.

The number of stages is the loop's own (`tl.range(..., num_stages=n)`), else the kernel's
`num_stages` option; 1 turns pipelining off.

Each slot is handed over between the copies and the threads that read it in one of three ways (the
`handoff`, in the loop's `pipeline` attribute):
- *mbarriers* (mma.sync dots): a full and an empty barrier per slot; each thread waits only for the
  slot it reads next and the one it writes next, so warps drift apart by up to an iteration. On an
  H100 (sm_90 code against Triton's mma.sync path) the tutorial matmul went from 1.00-1.09x to
  1.02-1.11x Triton over 16 configurations, the attention forward pass from 0.92-1.03x to 0.95-1.12x.
- *barrier* (wgmma dots): `cp.async.wait_group` and a CTA barrier at the top of every iteration,
  which every thread meets. Measured the same way, mbarriers took d128 attention on wgmma from
  0.99-1.13x to 0.94-1.04x Triton (d64 and the matmul unchanged); making the two warpgroups take
  turns at the tensor cores (named barriers around each dot, as FlashAttention-3 does) did not help
  either (0.87-1.06x).
- *named* (every load copied by TMA, so every reader is a wgmma dot, and the body chains dots, as
  attention's S = Q K^T and O += P V): each thread waits for the slot's full mbarrier; slots are given
  back on named barriers, on which only the warp that copies waits, so the warpgroups meet at no CTA
  barrier ("slots given back on named barriers"; `lower/pipeline.py` has the protocol and the H100
  figures: the descriptor attention 2-8% faster). Not for a loop of one dot: tutorial 09's descriptor
  matmul ran the same named at 4 stages and at 128x256 blocks, but 128x128x64 with 3 stages 1-2%
  slower at 4096^3 and 13% slower at 8192^3 (H200: 0.89-0.90x Triton against 1.03x). Not where the
  body takes shared scratch (a flattened nest's epilogue, converting its accumulator through shared
  memory): it meets a CTA barrier every iteration for that anyway, and tutorial 09's persistent matmul
  ran 1-2.4% slower named. With the epilogue's barrier moved into its branch instead (the allocator
  placing a buffer of a branch behind its own barrier, so that the other iterations meet none), it ran
  9-13% slower on an H200 (128x128x64: 3 stages 0.91x Triton against 1.00x, 4 stages 0.87-0.90x
  against 0.99-1.00x; 94 -> 100 registers).

Operands of wgmma dots (`Mma(version=3)`) are stored in swizzle atoms (`SwizzledShared.atoms`), which
the instruction reads in place through descriptors, in a ring aligned to 1024 bytes. A wgmma dot
whose accumulator is only carried from one iteration to its own next is *asynchronous*: it waits
for all but its latest group (`wgmma.wait_group 1`), so that its multiplications overlap the next
iteration's. The slot its copies then overwrite may still be read by the group in flight: either
the ring has a slot more than stages (the copies go to the slot of two iterations back, retired
before the iteration's barrier), or the copies wait behind a second barrier, after every
warpgroup's wait has retired the previous group (the "named" handoff: until every warp has given that
slot back). The spare slot is taken unless it would cost the second block per SM that the ring without
it leaves room for.

With the spare slot, the barrier handoff and every load copied by TMA, the copies of iteration i + S-1 are
issued at the top of iteration i, right after its barrier, before its dots (`copies_first`, "copies before
the dots" in the attribute): the slot they fill is already free there, and they go out about a group's time
earlier than after the dots' wait. On an H200 (tutorial 09's kernels, fp16 and bf16, 8 warps, each beside the
copies after the dots in one run) the persistent matmul at 128x128x64 with 3 stages went 503.7 -> 538.6
TFLOP/s at 4096^3 and 509.9 -> 548.1 at 8192^3 (1.00x -> 1.07x Triton); its 4-stage rows and the descriptor
matmul's rows that take a spare slot (128x128x64 with 4 stages, 128x256x64 with 3) moved within 2% either
way, as much as rows whose code did not change. (cp.async copies, which every thread issues, stay after the
dots: `lower/pipeline.py`.)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ...ir.core import Block, Op, Value
from ...ir.types import ScalarType, TileType, elem_of, float8e4nv, float8e5
from ...passes.rewrite import users as users_of
from .access import access_dim, access_width
from .assign import CONVERT, GpuFunction
from .mma import Mma, MmaOperand
from .ops import LOCAL_ALLOC, LOCAL_LOAD, gpu_opdef
from .shared import SwizzledShared, operand_shared
from .tma import shared_layout as tma_shared
from .wgmma import RESERVED_BYTES, SHARED_BYTES, SM_SHARED_BYTES

if TYPE_CHECKING:
    from .specialize import Producer

_COPY_BYTES = (4, 8, 16)  # what one cp.async moves
MBARRIER_BYTES = 8
# Pure ops that still must not run ahead: a load may read what an earlier iteration stores, and a
# dot is no address arithmetic worth repeating.
_NOT_AHEAD = frozenset({"load", "dot"})
NOT_IN_FLIGHT = "no: waited where issued, the kernel sharing the SM with another CTA"


@dataclass(frozen=True)
class AsyncLoad:
    """A load issued as asynchronous copies into a ring of shared-memory buffers, read by `convert`
    (the conversion to a dot operand) with `ldmatrix` (or, for 8- and 32-bit operands read along their
    M or N rows, element by element: `lower/ldmatrix.py`)."""

    load: Op
    convert: Op
    shared: SwizzledShared
    op_idx: int  # 0: the dot's A, 1: its B
    vec: int  # elements per cp.async (0: copied by TMA)
    copy_bytes: int  # bytes per cp.async (TMA: the block's)
    slot_bytes: int
    tma: int | None = None  # a descriptor load TMA copies: its tensor map's index
    trans: Op | None = None  # the load's `trans`, which the dot reads the slot through (`shared` is in its frame)


@dataclass(frozen=True)
class LoopPipeline:
    """The plan of one pipelined loop."""

    stages: int
    loads: tuple[AsyncLoad, ...]
    ahead: tuple[Op, ...]  # the body ops evaluated `stages - 1` iterations ahead, in program order
    carried: tuple[int, ...]  # body arguments (1-based: 0 is the induction variable) they read
    current: frozenset[Op]  # the ahead ops that the iteration also needs for itself
    wgmma: bool = False  # some load feeds a wgmma dot (atoms, the ring aligned to 1024 bytes)
    async_dots: frozenset[Op] = frozenset()  # the wgmma dots that leave one group in flight
    spare_slot: bool = False  # asynchronous dots' ring has a slot more (else a second barrier)
    handoff: str = "barrier"  # how slots pass between copies and readers: "barrier", "mbarriers" or "named"
    # A flattened loop nest's asynchronous dots (passes/flatten.py): the select that starts a dot's
    # accumulator again at zero on a tile's first K step (its scale-d then), and the epilogue `if` whose
    # branch that reads the accumulators waits for their groups first.
    resets: tuple[tuple[Op, Op], ...] = ()
    settles: tuple[tuple[Op, tuple[Value, ...]], ...] = ()
    producer: Producer | None = None  # a producer warp issues the copies (gpuir.specialize)

    @property
    def slots(self) -> int:
        """Ring slots: one per stage, and the spare one an asynchronous dot's group may still read."""
        return self.stages + (1 if self.async_dots and self.spare_slot else 0)

    @property
    def copies_first(self) -> bool:
        """Whether each iteration issues its copies at its top, before its dots: every load is copied by TMA, and
        the barrier handoff's spare slot, which they fill, was retired before the iteration's barrier."""
        return (self.handoff == "barrier" and self.producer is None and bool(self.async_dots) and self.spare_slot
                and self.tma and not self.cp_async)

    @property
    def align(self) -> int:
        return 1024 if self.wgmma else 16

    @property
    def tma(self) -> bool:
        """Some load is copied by TMA (whose copies complete a full mbarrier per slot)."""
        return any(a.tma is not None for a in self.loads)

    @property
    def cp_async(self) -> bool:
        """Some load is copied by cp.async."""
        return any(a.tma is None for a in self.loads)

    def slot_ring_bytes(self) -> int:
        return self.slots * sum(a.slot_bytes for a in self.loads)

    def ring_bytes(self) -> int:
        """The slots' bytes, then the mbarriers' (a full and an empty one per slot; TMA's full ones)."""
        barriers = 2 if self.handoff == "mbarriers" or self.producer else 1 if self.tma else 0
        return self.slot_ring_bytes() + barriers * self.slots * MBARRIER_BYTES

    def is_async(self, op: Op) -> bool:
        return any(a.load is op for a in self.loads)


def _is_zero(v: Value) -> bool:
    """Whether `v` is a zero constant, or an fp8 zero (the cast of one, maybe splat: the IR has no fp8
    constants), all of whose bits are zero."""
    owner = v.owner
    if isinstance(owner, Op) and owner.name == "splat" and elem_of(v.type) in (float8e4nv, float8e5):
        return _is_zero(owner.operands[0])
    if isinstance(owner, Op) and owner.name == "cast" and owner.attrs["to"] in (float8e4nv, float8e5):
        return _is_zero(owner.operands[0])
    return isinstance(owner, Op) and owner.name == "constant" and owner.attrs.get("value") in (0, 0.0, False)


def _operand_of(op: Op, users: dict[Value, list[Op]]) -> tuple[Op | None, Op] | str:
    """How `op`'s tile reaches a dot: the `trans` the dot reads it through (or None; `tl.dot(a, b.T)`: the
    slot is read transposed) and the one conversion to the operand; or why it does not."""
    (user, *others) = users.get(op.result, [None])
    trans = None
    if user is not None and not others and user.name == "trans":
        trans = user
        (user, *others) = users.get(user.result, [None])
    if others or user is None or user.name != CONVERT:
        return "its tile has other users than one dot operand conversion"
    return trans, user


def _one_dot(users: dict[Value, list[Op]], convert: Op) -> bool:
    dots = users.get(convert.result, [])
    return len(dots) == 1 and dots[0].name == "dot"


_NOT_ONE_DOT = "its operand conversion has other users than one dot"


def _tma_load(gpu: GpuFunction, op: Op, users: dict[Value, list[Op]]) -> AsyncLoad | str:
    """The plan of a descriptor load that TMA copies into the ring, or why it is not pipelined."""
    found = _operand_of(op, users)
    if isinstance(found, str):
        return found
    trans, convert = found
    enc = gpu.encoding(convert.result)
    if not isinstance(enc, MmaOperand) or enc.parent.version != 3:
        return "it does not feed a wgmma dot"
    if not _one_dot(users, convert):
        return _NOT_ONE_DOT
    elem = elem_of(op.result.type)
    assert isinstance(elem, ScalarType)
    block = tuple(op.attrs["shape"])
    shared = tma_shared(block, elem.itemsize)
    if trans is not None:
        shared = replace(shared, order=(0, 1))  # the same bytes, read as the transposed tile
    kdim = 1 if enc.op_idx == 0 else 0
    if elem.itemsize == 1 and shared.order[0] != kdim:
        return "wgmma reads 8-bit operands K-major only, and this block is contiguous along M or N"
    nbytes = block[0] * block[1] * elem.itemsize
    return AsyncLoad(op, convert, shared, enc.op_idx, 0, nbytes, nbytes, op.attrs["tma"], trans)


def _async_load(gpu: GpuFunction, op: Op, users: dict[Value, list[Op]]) -> AsyncLoad | str:
    """The plan of one load, or why it is not copied asynchronously."""
    if op.name == "descriptor_load":
        return _tma_load(gpu, op, users)
    found = _operand_of(op, users)
    if isinstance(found, str):
        return found
    trans, convert = found
    enc = gpu.encoding(convert.result)
    elem = elem_of(op.result.type)
    if not isinstance(enc, MmaOperand) or not isinstance(elem, ScalarType) or enc.k_width * elem.itemsize != 4:
        return "it does not feed a tensor-core operand (32-bit registers of k_width elements)"
    if not _one_dot(users, convert):
        return _NOT_ONE_DOT
    if op.attrs.get("volatile") or op.attrs.get("cache") or op.attrs.get("evict"):
        return "it is volatile or names a cache or eviction policy (cp.async takes neither)"
    ptr, mask = op.operands[0], (op.operands[1] if len(op.operands) > 1 else None)
    if len(op.operands) > 2 and not _is_zero(op.operands[2]):
        return "its `other` is not zero (cp.async fills masked elements with zeros)"
    wgmma = enc.parent.version == 3
    tile = op.result if trans is None else trans.result  # the operand as the dot reads it
    shared = operand_shared(gpu.layout(tile), enc.op_idx, elem.itemsize, k_major=wgmma and elem.itemsize == 1)
    if wgmma:
        shared = shared.atoms()
    vec = access_width(gpu, ptr, mask)
    along = shared.order[0] if trans is None else trans.attrs["perm"][shared.order[0]]  # in the load's dimensions
    if vec * elem.itemsize not in _COPY_BYTES or (vec > 1 and access_dim(gpu, ptr) != along):
        return f"its accesses are {vec * elem.itemsize} bytes (cp.async copies 4, 8 or 16 contiguous bytes)"
    shape = op.result.type.shape if isinstance(op.result.type, TileType) else ()
    return AsyncLoad(op, convert, shared, enc.op_idx, vec, vec * elem.itemsize, shape[0] * shape[1] * elem.itemsize,
                     trans=trans)


def _ahead_slice(body: Block, roots: list[Value]) -> tuple[set[Op], set[int]] | None:
    """The body ops that compute `roots`, and the carried arguments (indices) they read, closed
    over the back edge; None when an op among them cannot run ahead (`_can_run_ahead`)."""
    top = set(body.ops)
    yields = body.terminator
    assert yields is not None
    ops: set[Op] = set()
    carried: set[int] = set()
    work = list(roots)
    while work:
        v = work.pop()
        owner = v.owner
        if owner is body:
            if v.index > 0 and v.index not in carried:
                carried.add(v.index)
                work.append(yields.operands[v.index - 1])
            continue
        if not isinstance(owner, Op) or owner not in top or owner in ops:
            continue  # defined outside the loop, or already taken
        if not _can_run_ahead(owner):
            return None
        ops.add(owner)
        work.extend(v for o in [owner, *(o for r in owner.regions for o in r.walk())] for v in o.operands)
    return ops, carried


def _can_run_ahead(op: Op) -> bool:
    """Pure and not a load or dot; an `if` of such ops (a flattened nest's next tile: its coordinates, or the
    pointers its K loop starts from: `passes/flatten.py`)."""
    if op.name in _NOT_AHEAD or gpu_opdef(op.name).side_effects:
        return False
    if not op.regions:
        return True
    return op.name == "if" and all(
        o.name == "yield" or (not o.regions and _can_run_ahead(o)) for r in op.regions for o in r.ops)


def _current(body: Block, loop: Op, ahead: set[Op], carried: set[int], skip: set[Op], users: dict[Value, list[Op]]) -> set[Op]:
    """The ahead ops whose values the iteration also needs for itself (not only to feed the
    asynchronous copies): used by other ops of the loop, or carried to after it."""
    yields = body.terminator
    assert yields is not None
    need: set[Op] = set()
    work: list[Value] = []
    for op in body.walk():
        if op not in ahead and op not in skip and op is not yields:
            work.extend(op.operands)
    for j, (y, r) in enumerate(zip(yields.operands, loop.results), start=1):
        if j not in carried or users.get(r):
            work.append(y)
    seen_args: set[int] = set()
    while work:
        v = work.pop()
        owner = v.owner
        if owner is body and v.index in carried and v.index not in seen_args:
            seen_args.add(v.index)
            work.append(yields.operands[v.index - 1])
        elif isinstance(owner, Op) and owner in ahead and owner not in need:
            need.add(owner)
            work.extend(owner.operands)
    return need


def plan_loop(gpu: GpuFunction, loop: Op, num_stages: int, users: dict[Value, list[Op]]) -> LoopPipeline | str:
    """The pipeline of `loop`, or why it is not pipelined."""
    stages = loop.attrs.get("num_stages") or num_stages
    if stages < 2:
        return f"num_stages={stages}"
    body = loop.regions[0]
    loads: list[AsyncLoad] = []
    ahead: set[Op] = set()
    carried: set[int] = set()
    reasons: list[str] = []
    for op in body.ops:
        if op.name != "load" and not (op.name == "descriptor_load" and isinstance(op.attrs.get("tma"), int)):
            continue
        plan = _async_load(gpu, op, users)
        found = _ahead_slice(body, list(op.operands)) if not isinstance(plan, str) else None
        if found is None:
            reason = plan if isinstance(plan, str) else "its address or mask needs an op that cannot run ahead"
            op.attrs["async_copy"] = f"none: {reason}"
            reasons.append(reason)
            continue
        assert not isinstance(plan, str)
        loads.append(plan)
        ahead |= found[0]
        carried |= found[1]
    if not loads:
        return f"no load to pipeline: {reasons[0]}" if reasons else "no load feeds a tensor-core dot"
    skip = {a.load for a in loads} | {a.trans for a in loads if a.trans is not None}
    current = _current(body, loop, ahead, carried, skip, users)
    order = tuple(op for op in body.ops if op in ahead)
    wgmma = any(a.shared.block for a in loads)
    asynchronous, resets, settles = (_async_dots(gpu, body, users, {a.convert for a in loads}) if wgmma
                                     else (frozenset(), (), ()))
    slot_bytes = sum(a.slot_bytes for a in loads)
    tma = any(a.tma is not None for a in loads)
    scratch = _body_scratch(gpu, body)
    # A body that takes shared scratch (a flattened nest's epilogue) meets a CTA barrier every iteration anyway; one
    # that feeds a single dot has no work for its warpgroups to overlap between the products.
    chained = sum(1 for op in body.walk() if op.name == "dot") > 1
    handoff = ("named" if all(a.tma is not None for a in loads) and not scratch and chained else "barrier"
               if wgmma or tma else "mbarriers")
    return LoopPipeline(stages, tuple(loads), order, tuple(sorted(carried)), frozenset(current), wgmma, asynchronous,
                        _spare_slot(stages, slot_bytes, scratch), handoff, resets, settles)


def _body_scratch(gpu: GpuFunction, body: Block) -> int:
    """About the most shared memory an op of the body takes beside the ring while the loop runs: a layout
    conversion through shared memory (a flattened nest's epilogue storing its accumulator), padded rows,
    or a TMA store's buffer, aligned to 1024 bytes."""
    most = 0
    for op in body.walk():
        if op.name == "descriptor_store" and isinstance(op.attrs.get("tma"), int):
            value = op.operands[-1].type
            assert isinstance(value, TileType)
            most = max(most, value.numel * elem_of(value).itemsize + 1024)
        ty = op.result.type if op.name == CONVERT else None
        if isinstance(ty, TileType) and not isinstance(gpu.encoding(op.result), MmaOperand):
            elem = elem_of(ty)
            size = elem.itemsize if isinstance(elem, ScalarType) else 8
            rows = ty.numel // ty.shape[-1] if ty.shape else 1
            most = max(most, ty.numel * size + 16 * rows)
    return most


def _spare_slot(stages: int, slot_bytes: int, scratch: int = 0) -> bool:
    """Whether a ring of `stages` slots takes a spare one: it fits beside the `scratch` bytes the loop's body
    takes, and it does not cost a second block per SM that the ring without it leaves room for."""
    def two_blocks(slots: int) -> bool:
        return 2 * (slots * slot_bytes + scratch + RESERVED_BYTES) <= SM_SHARED_BYTES

    fits = (stages + 1) * slot_bytes + scratch <= SHARED_BYTES
    return fits and (two_blocks(stages + 1) or not two_blocks(stages))


def _only_user(users: dict[Value, list[Op]], v: Value, op: Op) -> bool:
    found = users.get(v, [])
    return len(found) == 1 and found[0] is op


def _carried(body: Block, users: dict[Value, list[Op]], v: Value) -> tuple[Value, Op | None] | None:
    """The body argument that the next iteration receives `v` (a dot's result) as, and the top-level `if`
    it passes through on the way (a flattened nest's epilogue: one branch passes it on, the other, which
    reads it, passes it on or gives zeros, the next tile's start; its branches alone read it otherwise), or
    None when something else reads it."""
    yields = body.terminator
    assert yields is not None
    if any(w is v for w in yields.operands):
        j = next(j for j, w in enumerate(yields.operands) if w is v)
        return (body.args[j + 1], None) if _only_user(users, v, yields) else None
    for branch in body.ops:
        if branch.name != "if":
            continue
        ends = [r.terminator for r in branch.regions]
        inside = {o for r in branch.regions for o in r.walk()}
        for m, res in enumerate(branch.results):
            passed = [e is not None and e.operands[m] is v for e in ends]
            if any(passed) and all(p or (e is not None and _is_zero(e.operands[m])) for p, e in zip(passed, ends)) \
                    and _only_user(users, res, yields) and all(u in inside for u in users.get(v, [])):
                j = next(j for j, w in enumerate(yields.operands) if w is res)
                return body.args[j + 1], branch
    return None


def _reset(users: dict[Value, list[Op]], dot: Op, arg: Value) -> Op | None:
    """The `select(splat(first), zeros, arg)` that is `dot`'s accumulator in a flattened nest (the carried
    value, or zeros on a tile's first K step), when only the dot reads it and only it reads `arg`."""
    sel = dot.operands[2].owner
    if not isinstance(sel, Op) or sel.name != "select" or not _only_user(users, sel.result, dot):
        return None
    cond, start, carried = sel.operands
    splat = cond.owner
    if carried is not arg or not _is_zero(start) or not _only_user(users, arg, sel):
        return None
    return sel if isinstance(splat, Op) and splat.name == "splat" else None


def _async_dots(gpu: GpuFunction, body: Block, users: dict[Value, list[Op]], ring: set[Op]
                ) -> tuple[frozenset[Op], tuple[tuple[Op, Op], ...], tuple[tuple[Op, tuple[Value, ...]], ...]]:
    """The wgmma dots of the body that leave their group in flight into the next iteration: their result
    only goes to the next iteration (in a flattened nest, maybe through its epilogue, which waits for the
    group in the branch that reads it: `settles`), B stays put while the group runs (a ring slot, `ring`
    being the pipelined loads' conversions, or a buffer made once by `hoist`; not one that `staging`
    stores again every iteration), and either
    - A stays put too, and the accumulator is the carried value, which only the dot reads
      (`acc = tl.dot(a, b, acc)`: the next iteration's dot is the next reader, in order), or zeros on a
      flattened nest's first K step of a tile (`resets`: the first K step's scale-d is 0 there), or
    - A is in registers, derived from the result of a synchronous wgmma dot earlier in the body
      (attention: P from S = Q K^T), and so is every operation that reads the carried accumulator
      (`acc * alpha`): that dot's `wait_group 0` retires this group before the next iteration
      recomputes A or reads the accumulator, which their data dependence on its result orders; unless
      `gpu.register_a_in_flight` is off: then the dot is synchronous, and its `in_flight` attribute says why.
      In flight, its A and its accumulator hold registers while the next iteration's first product runs
      (at d64 with 128x128 blocks on 8 warps: P's 32, O's 32 and S's 64 a thread)."""
    found: set[Op] = set()
    resets: list[tuple[Op, Op]] = []
    settles: dict[Op, list[Value]] = {}
    synchronous: list[Op] = []
    for op in body.ops:
        enc = gpu.encoding(op.result) if op.name == "dot" else None
        if not isinstance(enc, Mma) or enc.version != 3:
            continue
        carried = _carried(body, users, op.result)
        if carried is None or not _stays(op.operands[1], ring):
            synchronous.append(op)
            continue
        arg, through = carried
        if op.attrs.get("operand_a") != "registers":
            reset = _reset(users, op, arg)
            plain = op.operands[2] is arg and _only_user(users, arg, op)
            if (plain or reset is not None) and _stays(op.operands[0], ring):
                found.add(op)
                if reset is not None:
                    resets.append((op, reset))
                if through is not None:
                    settles.setdefault(through, []).append(op.result)
            else:
                synchronous.append(op)
            continue
        after = [_derived(users, d.result) for d in synchronous]
        if through is None and any(op.operands[0] in derived and all(any(v in derived for v in u.operands)
                                                                     for u in users.get(arg, []))
                                   for derived in after):
            if gpu.register_a_in_flight:
                found.add(op)
                continue
            op.attrs["in_flight"] = NOT_IN_FLIGHT
        synchronous.append(op)
    return frozenset(found), tuple(resets), tuple((k, tuple(v)) for k, v in settles.items())


def _derived(users: dict[Value, list[Op]], root: Value) -> set[Value]:
    """The values computed from `root` (itself included), through the ops that read it."""
    seen, work = {root}, [root]
    while work:
        for user in users.get(work.pop(), []):
            for r in user.results:
                if r not in seen:
                    seen.add(r)
                    work.append(r)
    return seen


def _stays(operand: Value, ring: set[Op]) -> bool:
    """Whether a wgmma operand lies in a ring slot or in a buffer made once from a tile (`hoist`)."""
    owner = operand.owner
    if not isinstance(owner, Op):
        return False
    if owner in ring:
        return True
    made = owner.operands[0].owner if owner.name == LOCAL_LOAD else None
    return isinstance(made, Op) and made.name == LOCAL_ALLOC and bool(made.operands)


def describe(plan: LoopPipeline) -> str:
    """The loop's `pipeline` attribute, as the GPU IR dump shows it."""
    by = [f"{n} loads by {how}" for n, how in ((sum(a.tma is None for a in plan.loads), "cp.async"),
                                                (sum(a.tma is not None for a in plan.loads), "TMA")) if n]
    if plan.producer is not None:
        handoff = ", slots handed over by mbarriers to and from the producer"
    else:
        handoff = ((", copies after a second barrier" if plan.async_dots and not plan.spare_slot
                    and plan.handoff == "barrier" else "")
                   + (", copies before the dots" if plan.copies_first else "")
                   + (", slots handed over by mbarriers" if plan.handoff == "mbarriers" else "")
                   + (", slots given back on named barriers" if plan.handoff == "named" else ""))
    return (f"{plan.stages} stages, {' and '.join(by)}, ring of {plan.ring_bytes()} bytes"
            + (f" in {plan.slots} slots, wgmma waits with 1 group in flight" if plan.async_dots else "") + handoff)


def plan_pipelines(gpu: GpuFunction, num_stages: int) -> None:
    """Plan every `for` loop of the kernel (innermost loops that load dot operands) and record the
    plans in `gpu.pipelines` and as attributes the GPU IR dump shows."""
    users = users_of(gpu.fn)
    for op in gpu.fn.walk():
        if op.name != "for" or not any(o.name == "dot" for o in op.regions[0].walk()):
            continue
        plan = plan_loop(gpu, op, num_stages, users)
        if isinstance(plan, str):
            op.attrs["pipeline"] = f"none: {plan}"
            continue
        gpu.pipelines[op] = plan
        op.attrs["pipeline"] = describe(plan)
        for a in plan.loads:
            a.load.attrs["async_copy"] = (f"{a.copy_bytes}-byte copies into {a.shared}" if a.tma is None else
                                          f"TMA copies of {a.copy_bytes} bytes into {a.shared}")

