"""Which tensor-descriptor loads and stores the tensor memory accelerator (TMA) carries out, and the
tensor maps they need.

A `descriptor_load` (`desc.load(offsets)`) is one `cp.async.bulk.tensor` per swizzle atom of its
block, issued by one thread, which lands the block in shared memory already swizzled as a
tensor-core operand wants it and completes an mbarrier (`lower/tma.py`, `lower/pipeline.py`). A
`descriptor_store` (`desc.store(offsets, value)`, a matmul's epilogue) is the reverse: every thread
writes its part of the tile into shared memory in the same swizzled layout, and one thread stores
it with one bulk copy per atom. A copy reads through a *tensor map*: the tensor's address, shape and
byte strides, the box (the atom) and the swizzle, which the launch encodes on the host
(`cuTensorMapEncodeTiled`) and passes as a 128-byte `__grid_constant__` parameter after the kernel's
own. So the compiler keeps a descriptor access for TMA only where the host can build its map from the
launch's arguments:

- the target has wgmma (sm_90a), whose pipelined loops take the copies;
- the block is 2-D, of 1-, 2- or 4-byte elements, with rows of at least 16 bytes that are whole
  swizzle atoms (a row of up to 128 bytes is one atom; wider rows are several 128-byte ones), and at
  most 256 rows; or, for a store, 1-D (unswizzled boxes of up to 256 elements);
- the base, the shape and the strides are kernel parameters or constants (a host
  `TensorDescriptor`, or `tl.make_tensor_descriptor` of the kernel's arguments), and the
  specialization proves what TMA requires: a base aligned to 16 bytes and strides of a multiple of
  16 bytes;
- a load's tile feeds a dot that wgmma takes (directly or through `tl.trans`) inside a loop, where
  the copies replace the loop's `cp.async` traffic (an mma.sync dot's loop keeps its cp.async
  pipeline, handed over by mbarriers); a store's offsets are provably non-negative and 16-byte aligned
  along the rows, and the tensor's rows provably end on a 16-byte boundary (`_store_fit` says what an
  H100 ran otherwise).

Every other descriptor access is expanded to a masked tile load or store (`passes/descriptors.py`).
Out of the tensor's bounds TMA writes zeros (or NaN, with `padding_option="nan"`) into a loaded box,
which is what the expansion's mask and padding read, and writes nothing of a stored box, which is
what the expanded store's mask writes. An access whose map equals an earlier one's (a store's fill
aside, which a store does not use) shares its index.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ...ir.core import Block, Function, Op, Value
from ...ir.types import PointerType, ScalarType, shape_of
from ...passes.descriptors import DESCRIPTOR_OPS
from ...passes.rewrite import constant_value
from ...passes.rewrite import users as users_of
from .accelerate import wgmma_fit
from .shared import SwizzledShared, operand_swizzle

SWIZZLE_BYTES = 128
"""The widest swizzle mode, and the widest atom row."""
MAX_BOX = 256
"""The most elements a TMA box spans along a dimension."""
MIN_ROW_BYTES = 16
ATOM_ROWS = 8
"""The rows over which a swizzle pattern repeats: a block's rows come in multiples of it."""
ALIGN = 16
"""TMA's alignment of the global address and of every stride but the last, in bytes."""


@dataclass(frozen=True)
class TensorMap:
    """One tensor map the kernel takes: the source of its base, shape and strides (a kernel parameter
    by index, or a constant), its box (one atom, outermost dimension first) and swizzle; as the
    launch's metadata names it (`as_metadata`)."""

    dtype: str
    base: int
    shape: tuple[tuple[str, int], ...]
    strides: tuple[tuple[str, int], ...]
    box: tuple[int, ...]
    swizzle: int
    fill: str
    clamp: bool = False
    """A pointer load's map (`pointer_tiles.py`): a negative size is its mask's bound, and maps as 0."""

    def as_metadata(self) -> dict[str, Any]:
        def src(s: tuple[str, int]) -> dict[str, int]:
            return {s[0]: s[1]}

        clamp = {"clamp": True} if self.clamp else {}
        return {"dtype": self.dtype, "base": {"arg": self.base}, "shape": [src(s) for s in self.shape],
                "strides": [src(s) for s in self.strides], "box": list(self.box), "swizzle": self.swizzle,
                "fill": self.fill, **clamp}


def atom_columns(block: tuple[int, ...], itemsize: int) -> int:
    """The elements of a row one TMA box (a swizzle atom) holds."""
    return min(block[-1], SWIZZLE_BYTES // itemsize)


def swizzle_bytes(block: tuple[int, ...], itemsize: int) -> int:
    """The swizzle mode of the atoms of `block`: their row's bytes (32, 64 or 128)."""
    return atom_columns(block, itemsize) * itemsize


def shared_layout(block: tuple[int, ...], itemsize: int) -> SwizzledShared:
    """Where TMA lands a block: its atoms one after the other, each row after row, swizzled by the mode
    of its row's bytes (`shared.py`: the layout a tensor-core operand takes in swizzle atoms)."""
    return operand_swizzle((block[0], block[1]), (1, 0), itemsize).atoms()


def _source(v: Value, fn: Function) -> tuple[str, int] | None:
    """A kernel parameter (maybe widened to int64) or a constant, as a map's source; else None."""
    owner = v.owner
    if owner is fn.body:
        return "arg", v.index
    if isinstance(owner, Op) and owner.name == "cast" and owner.operands[0].owner is fn.body:
        src = owner.operands[0]
        if isinstance(src.type, ScalarType) and src.type.is_int() and src.type.is_int_signed():
            return "arg", src.index
    if isinstance(owner, Op) and owner.name == "constant" and isinstance(owner.attrs.get("value"), int):
        return "value", owner.attrs["value"]
    return None


def feeds_wgmma(op: Op, users: dict[Value, list[Op]], fn: Function, num_warps: int) -> bool:
    """Whether `op`'s tile is an operand of a dot (maybe through `trans`) that wgmma takes."""
    use = users.get(op.result, [])
    if len(use) == 1 and use[0].name == "trans":
        use = users.get(use[0].result, [])
    return len(use) == 1 and use[0].name == "dot" and not isinstance(wgmma_fit(fn, use[0], num_warps), str)


Carried = Callable[[Value, int, int], bool]
"""Whether a value a loop carries (a block argument) is a non-negative multiple of n, at a depth (`affine.Tiles`)."""


def multiple_of(v: Value, n: int, depth: int = 0, carried: Carried | None = None) -> bool:
    """Whether integer `v` is provably a non-negative multiple of `n`: program ids, non-negative constants, and
    sums, products, quotients by positive constants, remainders, minima and maxima of such values, selects and
    `if` results between such values; for n == 1, maxima with one such value (a `maximum(c, 0)`); and the values
    loops carry as `carried` says."""
    owner = v.owner
    if depth > 32:
        return False
    if isinstance(owner, Block):
        return carried is not None and carried(v, n, depth + 1)
    if not isinstance(owner, Op):
        return False
    name, args = owner.name, owner.operands

    def of(a: Value, k: int = n) -> bool:
        return multiple_of(a, k, depth + 1, carried)

    if name == "constant":
        value = constant_value(v)
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0 and value % n == 0
    if name == "program_id":
        return n == 1
    if name == "maximum" and n == 1:
        return any(of(a) for a in args)
    if name in ("add", "minimum", "maximum"):
        return all(of(a) for a in args)
    if name == "select":
        return all(of(a) for a in args[1:])
    if name == "if":
        return all(of(branch.ops[-1].operands[v.index]) for branch in owner.regions)
    if name == "mul":
        return any(of(a) and of(b, 1) for a, b in (args, args[::-1]))
    if name == "cast":
        return isinstance(v.type, ScalarType) and v.type.is_int() and of(args[0])
    if name == "rem":  # a remainder takes the dividend's sign
        return n == 1 and of(args[0], 1)
    if name == "floordiv":
        divisor = constant_value(args[1])
        return n == 1 and of(args[0], 1) and isinstance(divisor, int) and divisor > 0
    return False


def _store_fit(op: Op, size: int, inner: tuple[str, int], divisible: set[int]) -> str | None:
    """Why TMA does not store `op`'s block (whose map's innermost extent comes from `inner`), beyond its map.
    On an H100, a box at a negative offset or at an innermost one not a multiple of 16 bytes raised an illegal
    instruction, which loses the CUDA context; and where the tensor's rows end inside a 16-byte unit, the
    store wrote that unit whole, past the row's end (a 100 x 90 fp16 tensor in rows of 96: columns 90-95).
    Checking unproven offsets where the store runs instead (an `if`: TMA's store where they are non-negative and
    aligned, the masked store elsewhere) ran tutorial 09's persistent matmul slower on an H200, 128x128x64 with
    3 stages 0.985-0.998x -> 0.944-0.955x Triton: the two epilogues took 94 -> 115 registers, and the TMA store waits
    for its bulk group before the buffer can be reused. Even unchecked (unsafe: an upper bound) TMA's store was the
    slower epilogue there, on an H200 at 4096^3 and 8192^3: 0.984-0.996x -> 0.946-0.949x Triton with 3 stages,
    0.994-1.019x -> 0.962-0.974x with 4, 94 -> 102 registers; and a 2-D box at row -3, column 0 failed there too.
    Where the offsets are provable (tutorial 09's descriptor matmul, one tile a program), the masked store instead
    of TMA's ran within 1.9% of it either way over 16 rows, neither ahead."""
    kind, value = inner
    if (kind == "value" and value * size % ALIGN) or (kind == "arg" and value not in divisible):
        return "its rows are not known to end on a 16-byte boundary (TMA stores whole 16-byte units)"
    rank = len(shape_of(op.operands[-1].type))
    offsets = op.operands[2 * rank : 3 * rank]
    if not all(multiple_of(v, ALIGN // size if i == rank - 1 else 1) for i, v in enumerate(offsets)):
        return "its offsets are not provably non-negative, the last a multiple of 16 bytes"
    return None


def block_of(op: Op) -> tuple[int, ...]:
    """The block a descriptor op moves: a load's `shape`, a store's value's."""
    return tuple(op.attrs["shape"]) if op.name == "descriptor_load" else shape_of(op.operands[-1].type)


def tensor_map(op: Op, fn: Function, attrs: dict[str, Any]) -> TensorMap | str:
    """The tensor map of `op`, a `descriptor_load` or `descriptor_store` of `fn` (specialized as module
    `attrs` say), or why the host cannot build one that TMA moves its block with. A store's map has the
    fill "zero" (a store reads none)."""
    block = block_of(op)
    rank = len(block)
    base = op.operands[0]
    assert isinstance(base.type, PointerType) and isinstance(base.type.element_ty, ScalarType)
    elem = base.type.element_ty
    size = elem.itemsize
    fill = str(op.attrs["padding"]) if op.name == "descriptor_load" else "zero"
    if rank != 2 and not (rank == 1 and op.name == "descriptor_store"):
        return f"its block has rank {rank} (TMA moves 2-D blocks here, and stores 1-D ones)"
    if size not in (1, 2, 4):
        return f"its elements are {size} bytes"
    if fill == "nan" and size == 1:
        return "TMA fills out-of-bounds elements with NaN for 16- and 32-bit floats only"
    box: tuple[int, ...]
    if rank == 1:  # boxes of up to 256 elements, unswizzled
        box, swizzle = (min(block[0], MAX_BOX),), 0
        if block[0] * size < MIN_ROW_BYTES:
            return f"its block {list(block)} is less than {MIN_ROW_BYTES} bytes"
    else:
        cols = atom_columns(block, size)
        box, swizzle = (block[0], cols), swizzle_bytes(block, size)
        if cols * size < MIN_ROW_BYTES or block[-1] % cols or block[0] % ATOM_ROWS or block[0] > MAX_BOX:
            return f"its block {list(block)} is not whole swizzle atoms of {ATOM_ROWS} to {MAX_BOX} rows"
    sources = [_source(v, fn) for v in op.operands[1 : 2 * rank]]
    if _source(base, fn) is None or any(s is None for s in sources):
        return "its base, shape or strides are not kernel parameters or constants"
    shape = tuple(s for s in sources[:rank] if s is not None)
    strides = tuple(s for s in sources[rank:] if s is not None)
    divisible = set(attrs.get("divisibility", []) or [])
    if base.index not in divisible:
        return "its base is not known to be 16-byte aligned"
    for kind, value in strides:
        if (kind == "value" and value * size % ALIGN) or (kind == "arg" and value not in divisible):
            return "its strides are not known to be multiples of 16 bytes"
    why = _store_fit(op, size, shape[-1], divisible) if op.name == "descriptor_store" else None
    if why is not None:
        return why
    return TensorMap(elem.name, base.index, shape, strides, box, swizzle, fill, op.attrs.get("origin") == "pointers")


def _serves(known: TensorMap, op: Op, plan: TensorMap) -> bool:
    """Whether map `known` serves `op`, whose own map is `plan`: the same map, or a store's but the fill."""
    return known == (plan if op.name == "descriptor_load" else replace(plan, fill=known.fill))


def plan_tensor_maps(fn: Function, attrs: dict[str, Any], num_warps: int) -> None:
    """Mark each descriptor load of `fn` (on `num_warps` warps) that TMA copies and each descriptor store
    that TMA stores with the attribute `tma` (the index of its tensor map among the kernel's: accesses of
    one map share it), every other one with `tma = "none: <why>"`."""
    users = users_of(fn)
    maps: list[TensorMap] = []

    def index(op: Op, plan: TensorMap) -> int:
        found = next((i for i, known in enumerate(maps) if _serves(known, op, plan)), None)
        if found is None:
            maps.append(plan)
            return len(maps) - 1
        return found

    def walk(ops: list[Op], in_loop: bool) -> None:
        for op in ops:
            if op.name in DESCRIPTOR_OPS:
                plan = tensor_map(op, fn, attrs)
                if (op.name == "descriptor_load" and not isinstance(plan, str)
                        and not (in_loop and feeds_wgmma(op, users, fn, num_warps))):
                    plan = "it does not feed a wgmma dot in a loop"
                op.attrs["tma"] = f"none: {plan}" if isinstance(plan, str) else index(op, plan)
            for region in op.regions:
                walk(region.ops, in_loop or op.name == "for")

    walk(fn.body.ops, False)


def tensor_maps(fn: Function, attrs: dict[str, Any]) -> list[tuple[list[Op], TensorMap]]:
    """The kernel's tensor maps in the order of its tensor-map parameters, each with the descriptor loads
    and stores that TMA carries out through it (a map that loads use has their fill)."""
    found: dict[int, tuple[list[Op], TensorMap]] = {}
    ops = [op for op in fn.walk() if op.name in DESCRIPTOR_OPS]
    for op in sorted(ops, key=lambda op: op.name != "descriptor_load"):  # loads first: their fill is the map's
        index = op.attrs.get("tma")
        if isinstance(index, int) and not isinstance(index, bool):
            plan = tensor_map(op, fn, attrs)
            assert not isinstance(plan, str), plan
            users, known = found.setdefault(index, ([], plan))
            assert _serves(known, op, plan), f"descriptor accesses of tensor map {index} describe different maps"
            users.append(op)
    assert sorted(found) == list(range(len(found))), "tensor-map indices must be 0, 1, ..."
    return [found[i] for i in range(len(found))]
