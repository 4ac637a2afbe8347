"""Which tensor-descriptor loads the tensor memory accelerator (TMA) copies, and the tensor maps
they need.

A `descriptor_load` (`desc.load(offsets)`) is one `cp.async.bulk.tensor` per swizzle atom of its
block, issued by one thread, which lands the block in shared memory already swizzled as a
tensor-core operand wants it and completes an mbarrier (`lower/tma.py`, `lower/pipeline.py`).
The copy reads through a *tensor map*: the tensor's address, shape and byte strides, the box (the
atom) and the swizzle, which the launch encodes on the host (`cuTensorMapEncodeTiled`) and passes
as a 128-byte `__grid_constant__` parameter after the kernel's own. So the compiler keeps a
descriptor load for TMA only where the host can build its map from the launch's arguments:

- the target has wgmma (sm_90a), whose pipelined loops take the copies;
- the block is 2-D, of 1-, 2- or 4-byte elements, with rows of at least 16 bytes that are whole
  swizzle atoms (a row of up to 128 bytes is one atom; wider rows are several 128-byte ones), and at
  most 256 rows;
- the base, the shape and the strides are kernel parameters or constants (a host
  `TensorDescriptor`, or `tl.make_tensor_descriptor` of the kernel's arguments), and the
  specialization proves what TMA requires: a base aligned to 16 bytes and strides of a multiple of
  16 bytes;
- the tile feeds a dot that wgmma takes (directly or through `tl.trans`) inside a loop, where the
  copies replace the loop's `cp.async` traffic (an mma.sync dot's loop keeps its cp.async pipeline,
  handed over by mbarriers).

Every other descriptor load is expanded to a masked tile load (`passes/descriptors.py`). Out of
the tensor's bounds TMA writes zeros (or NaN, with `padding_option="nan"`), which is what the
expansion's mask and padding read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...ir.core import Function, Op, Value
from ...ir.types import PointerType, ScalarType
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

    def as_metadata(self) -> dict[str, Any]:
        def src(s: tuple[str, int]) -> dict[str, int]:
            return {s[0]: s[1]}

        return {"dtype": self.dtype, "base": {"arg": self.base}, "shape": [src(s) for s in self.shape],
                "strides": [src(s) for s in self.strides], "box": list(self.box), "swizzle": self.swizzle,
                "fill": self.fill}


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


def _feeds_wgmma(op: Op, users: dict[Value, list[Op]], fn: Function, num_warps: int) -> bool:
    """Whether `op`'s tile is an operand of a dot (maybe through `trans`) that wgmma takes."""
    use = users.get(op.result, [])
    if len(use) == 1 and use[0].name == "trans":
        use = users.get(use[0].result, [])
    return len(use) == 1 and use[0].name == "dot" and not isinstance(wgmma_fit(fn, use[0], num_warps), str)


def tensor_map(op: Op, fn: Function, attrs: dict[str, Any]) -> TensorMap | str:
    """The tensor map of `op`, a `descriptor_load` of `fn` (specialized as module `attrs` say), or why
    the host cannot build one that TMA copies its block with."""
    block = tuple(op.attrs["shape"])
    rank = len(block)
    base = op.operands[0]
    assert isinstance(base.type, PointerType) and isinstance(base.type.element_ty, ScalarType)
    elem = base.type.element_ty
    size = elem.itemsize
    if rank != 2:
        return f"its block has rank {rank} (TMA copies 2-D blocks here)"
    if size not in (1, 2, 4):
        return f"its elements are {size} bytes"
    if op.attrs["padding"] == "nan" and size == 1:
        return "TMA fills out-of-bounds elements with NaN for 16- and 32-bit floats only"
    cols = atom_columns(block, size)
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
    return TensorMap(elem.name, base.index, shape, strides, (block[0], cols), swizzle_bytes(block, size),
                     str(op.attrs["padding"]))


def plan_tensor_maps(fn: Function, attrs: dict[str, Any], num_warps: int) -> None:
    """Mark each descriptor load of `fn` (on `num_warps` warps) that TMA copies with the attribute `tma` (the
    index of its tensor map among the kernel's: loads of one map share it), every other one with
    `tma = "none: <why>"`."""
    users: dict[Value, list[Op]] = {}
    for o in fn.walk():
        for v in o.operands:
            users.setdefault(v, []).append(o)
    index: dict[TensorMap, int] = {}

    def walk(ops: list[Op], in_loop: bool) -> None:
        for op in ops:
            if op.name == "descriptor_load":
                plan = tensor_map(op, fn, attrs)
                if not isinstance(plan, str) and not (in_loop and _feeds_wgmma(op, users, fn, num_warps)):
                    plan = "it does not feed a wgmma dot in a loop"
                op.attrs["tma"] = f"none: {plan}" if isinstance(plan, str) else index.setdefault(plan, len(index))
            for region in op.regions:
                walk(region.ops, in_loop or op.name == "for")

    walk(fn.body.ops, False)


def tensor_maps(fn: Function, attrs: dict[str, Any]) -> list[tuple[list[Op], TensorMap]]:
    """The kernel's tensor maps in the order of its tensor-map parameters, each with the descriptor loads
    that TMA copies through it."""
    found: dict[int, tuple[list[Op], TensorMap]] = {}
    for op in fn.walk():
        index = op.attrs.get("tma") if op.name == "descriptor_load" else None
        if isinstance(index, int) and not isinstance(index, bool):
            plan = tensor_map(op, fn, attrs)
            assert not isinstance(plan, str), plan
            ops, known = found.setdefault(index, ([], plan))
            assert known == plan, f"descriptor loads of tensor map {index} describe different maps"
            ops.append(op)
    assert sorted(found) == list(range(len(found))), "tensor-map indices must be 0, 1, ..."
    return [found[i] for i in range(len(found))]
