"""Tensor-descriptor loads as masked tile loads: `descriptor_load` (`desc.load(offsets)`) becomes the
pointers and the mask of its block, as a block pointer's load with every dimension checked.

    descriptor_load(base, shape..., strides..., offsets...) {shape = B, padding}
      ->  load(base + sum_d (offsets[d] + arange(B[d])) * strides[d],
               0 <= offsets[d] + arange(B[d]) < shape[d] for every d,
               0 or NaN)

The NVPTX backend keeps the loads it copies with the tensor memory accelerator (TMA) and expands
the rest; the interpreter reads descriptor loads as they are.
"""

from __future__ import annotations

from collections.abc import Callable

from ..ir.builder import Builder
from ..ir.core import Module, Op, Value
from ..ir.ops import OPS
from ..ir.types import PointerType, ScalarType, TileType, float32, int1, int32, int64
from .pipeline import PIPELINE, run_pipeline
from .rewrite import Subst, replace_results, rewrite_module


def expand_descriptor_loads(module: Module, keep: Callable[[Op], bool] = lambda op: False) -> Module:
    """Expand every `descriptor_load` of `module` but those `keep` selects; the module, tidied up by the
    tile-IR passes when anything was expanded. Attributes a backend gave a descriptor load that the
    op's schema does not name carry over to its `load`."""
    expanded = False

    def visit(op: Op, subst: Subst) -> list[Op] | None:
        nonlocal expanded
        if op.name != "descriptor_load" or keep(op):
            return None
        b = Builder()
        b.loc = op.loc
        load = _masked_load(b, op)
        known = OPS["descriptor_load"].attrs
        assert isinstance(load.owner, Op)
        load.owner.attrs.update({k: v for k, v in op.attrs.items() if k not in known})
        replace_results(subst, op, [load])
        expanded = True
        return b.block.ops

    rewrite_module(module, visit)
    return run_pipeline(module, [p for p in PIPELINE if p[0] != "inline"]) if expanded else module


def _masked_load(b: Builder, op: Op) -> Value:
    block = tuple(op.attrs["shape"])
    rank = len(block)
    base = op.operands[0]
    shape, strides, offsets = op.operands[1 : 1 + rank], op.operands[1 + rank : 2 * rank], op.operands[2 * rank :]
    assert isinstance(base.type, PointerType) and isinstance(base.type.element_ty, ScalarType)
    elem = base.type.element_ty
    offset: Value | None = None
    mask: Value | None = None
    for d in range(rank):
        along = tuple(block[d] if a == d else 1 for a in range(rank))
        index = b.value("add", [b.value("splat", [offsets[d]], shape=[block[d]]), b.value("arange", start=0, end=block[d])])
        for axis in range(rank):
            if axis != d:
                index = b.value("expand_dims", [index], axis=axis)
        wide = b.value("cast", [index], to=int64)
        term = wide if d == rank - 1 else b.value("mul", [wide, b.value("splat", [strides[d]], shape=along)])
        term = b.value("broadcast", [term], shape=block)
        offset = term if offset is None else b.value("add", [offset, term])
        inside = b.value("and", [
            b.value("cmp", [index, b.constant(0, TileType(along, int32))], pred="ge"),
            b.value("cmp", [wide, b.value("splat", [shape[d]], shape=along)], pred="lt"),
        ])
        inside = b.value("broadcast", [inside], shape=block)
        mask = inside if mask is None else b.value("and", [mask, inside])
    assert offset is not None and mask is not None and mask.type == TileType(block, int1)
    pointers = b.value("addptr", [b.value("splat", [base], shape=block), offset])
    fill = float("nan") if op.attrs["padding"] == "nan" else 0.0 if elem.is_floating() else 0
    if elem.is_fp8():  # the IR has no fp8 constants: an fp32 one, cast
        other = b.value("splat", [b.value("cast", [b.constant(fill, float32)], to=elem)], shape=block)
    else:
        other = b.constant(fill, TileType(block, elem))
    return b.value("load", [pointers, mask, other], cache=op.attrs.get("cache") or "", evict=op.attrs.get("evict") or "",
                   volatile=False)
