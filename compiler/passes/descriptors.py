"""Tensor-descriptor loads and stores as masked tile accesses: `descriptor_load` (`desc.load(offsets)`)
and `descriptor_store` (`desc.store(offsets, value)`) become the pointers and the mask of their block,
as a block pointer's load and store with every dimension checked.

    descriptor_load(base, shape..., strides..., offsets...) {shape = B, padding}
      ->  load(base + sum_d (offsets[d] + arange(B[d])) * strides[d],
               0 <= offsets[d] + arange(B[d]) < shape[d] for every d,
               0 or NaN)
    descriptor_store(base, shape..., strides..., offsets..., value)
      ->  store(the same pointers, value, the same mask)

The NVPTX backend keeps the accesses it carries out with the tensor memory accelerator (TMA) and
expands the rest; the interpreter runs descriptor accesses as they are.
"""

from __future__ import annotations

from collections.abc import Callable

from ..ir.builder import Builder
from ..ir.core import Module, Op, Value
from ..ir.ops import OPS
from ..ir.types import PointerType, ScalarType, TileType, float32, int1, int32, int64, shape_of
from .pipeline import PIPELINE, run_pipeline
from .rewrite import Subst, replace_results, rewrite_module

DESCRIPTOR_OPS = ("descriptor_load", "descriptor_store")


def expand_descriptors(module: Module, keep: Callable[[Op], bool] = lambda op: False) -> Module:
    """Expand every `descriptor_load` and `descriptor_store` of `module` but those `keep` selects; the
    module, tidied up by the tile-IR passes when anything was expanded. Attributes a backend gave a
    descriptor op that the op's schema does not name carry over to its `load` or `store`."""
    expanded = False

    def visit(op: Op, subst: Subst) -> list[Op] | None:
        nonlocal expanded
        if op.name not in DESCRIPTOR_OPS or keep(op):
            return None
        b = Builder()
        b.loc = op.loc
        access = _masked_load(b, op) if op.name == "descriptor_load" else _masked_store(b, op)
        replace_results(subst, op, list(access.results))
        known = OPS[op.name].attrs
        access.attrs.update({k: v for k, v in op.attrs.items() if k not in known})
        expanded = True
        return b.block.ops

    rewrite_module(module, visit)
    return run_pipeline(module, [p for p in PIPELINE if p[0] != "inline"]) if expanded else module


def _index(b: Builder, offset: Value, block: tuple[int, ...], d: int) -> tuple[Value, Value, tuple[int, ...]]:
    """The indices along dimension `d` of a block at `offset` there, as int32 and int64 tiles of the block's
    rank that span dimension `d` only, and their shape."""
    along = tuple(block[d] if a == d else 1 for a in range(len(block)))
    index = b.value("add", [b.value("splat", [offset], shape=[block[d]]), b.value("arange", start=0, end=block[d])])
    for axis in range(len(block)):
        if axis != d:
            index = b.value("expand_dims", [index], axis=axis)
    return index, b.value("cast", [index], to=int64), along


def _inside(b: Builder, index: Value, wide: Value, size: Value, along: tuple[int, ...]) -> Value:
    """Whether each index is in 0 .. size - 1."""
    return b.value("and", [b.value("cmp", [index, b.constant(0, TileType(along, int32))], pred="ge"),
                           b.value("cmp", [wide, b.value("splat", [size], shape=along)], pred="lt")])


def _broadcast(b: Builder, v: Value, shape: tuple[int, ...]) -> Value:
    if isinstance(v.type, TileType):
        return v if v.type.shape == shape else b.value("broadcast", [v], shape=shape)
    return b.value("splat", [v], shape=shape)


def _both(b: Builder, name: str, x: Value, y: Value) -> Value:
    """Op `name` of `x` and `y` broadcast to their common shape."""
    sx, sy = shape_of(x.type), shape_of(y.type)
    shape = tuple(max(p, q) for p, q in zip(sx or (1,) * len(sy), sy or (1,) * len(sx)))
    return b.value(name, [_broadcast(b, x, shape), _broadcast(b, y, shape)])


def _block(b: Builder, op: Op, block: tuple[int, ...]) -> tuple[Value, Value]:
    """The pointers and the mask (every dimension inside the shape) of the block `op` addresses, a
    load's way: the offsets summed over the block, then added to the base."""
    rank = len(block)
    base = op.operands[0]
    shape, strides, offsets = op.operands[1 : 1 + rank], op.operands[1 + rank : 2 * rank], op.operands[2 * rank :]
    offset: Value | None = None
    mask: Value | None = None
    for d in range(rank):
        index, wide, along = _index(b, offsets[d], block, d)
        term = wide if d == rank - 1 else b.value("mul", [wide, b.value("splat", [strides[d]], shape=along)])
        term = b.value("broadcast", [term], shape=block)
        offset = term if offset is None else b.value("add", [offset, term])
        inside = b.value("broadcast", [_inside(b, index, wide, shape[d], along)], shape=block)
        mask = inside if mask is None else b.value("and", [mask, inside])
    assert offset is not None and mask is not None and mask.type == TileType(block, int1)
    return b.value("addptr", [b.value("splat", [base], shape=block), offset]), mask


def _masked_load(b: Builder, op: Op) -> Op:
    block = tuple(op.attrs["shape"])
    base = op.operands[0]
    assert isinstance(base.type, PointerType) and isinstance(base.type.element_ty, ScalarType)
    elem = base.type.element_ty
    pointers, mask = _block(b, op, block)
    fill = float("nan") if op.attrs["padding"] == "nan" else 0.0 if elem.is_floating() else 0
    if elem.is_fp8():  # the IR has no fp8 constants: an fp32 one, cast
        other = b.value("splat", [b.value("cast", [b.constant(fill, float32)], to=elem)], shape=block)
    else:
        other = b.constant(fill, TileType(block, elem))
    return b.create("load", [pointers, mask, other], {"cache": op.attrs.get("cache") or "",
                                                      "evict": op.attrs.get("evict") or "", "volatile": False})


def _masked_store(b: Builder, op: Op) -> Op:
    """The store of a block pointer with every dimension checked (`block_ptr.pointers`), as `desc.store`
    wrote it before it was an op: each dimension's term added to the pointers in turn."""
    value = op.operands[-1]
    block = shape_of(value.type)
    rank = len(block)
    shape, strides, offsets = op.operands[1 : 1 + rank], op.operands[1 + rank : 2 * rank], op.operands[2 * rank : 3 * rank]
    pointers = op.operands[0]
    mask: Value | None = None
    for d in range(rank):
        index, wide, along = _index(b, offsets[d], block, d)
        term = wide if d == rank - 1 else b.value("mul", [wide, b.value("splat", [strides[d]], shape=along)])
        pointers = _both(b, "addptr", pointers, term)
        inside = _inside(b, index, wide, shape[d], along)
        mask = inside if mask is None else _both(b, "and", mask, inside)
    assert mask is not None
    return b.create("store", [_broadcast(b, pointers, block), value, _broadcast(b, mask, block)],
                    {"cache": "", "evict": ""})
