"""The ops and attributes the GPU IR adds to the tile IR's catalogue (`ir.ops.OPS`), defined as the
tile ops are.

Layout assignment inserts `convert_layout`, `hoist` keeps loop-invariant tensor-core operands in
shared memory with `local_alloc` and `local_load`, `staging` stores the other wgmma operands into
buffers of their own with `local_store`; the backend's stages key their rules by both catalogues
(`ir.registry.OpRegistry`), so a lowering rule for an op defined nowhere is refused on import. The
GPU passes record their decisions on tile ops as attributes (`GPU_ATTRS`: a dot's engine and where its
wgmma reads A, a loop's pipeline, a load's asynchronous copy), which the GPU-IR
dump shows and the verifier checks against this one schema beside the op's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...ir.attrs import Attr, attrs_error, enum, optional
from ...ir.core import Block, IRError, Op, Value
from ...ir.ops import OPS, OpDef
from ...ir.types import BufferType, ScalarType, TileType, Type

CONVERT = "convert_layout"
LOCAL_ALLOC = "local_alloc"
LOCAL_LOAD = "local_load"
LOCAL_STORE = "local_store"


def _convert_layout(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    # The shape and element type are the operand's; the encoding (the type's layout) is the result's own.
    if len(t) != 1:
        raise IRError(f"'{CONVERT}' takes 1 operand, got {len(t)}")
    return [t[0]]


def _local_alloc(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    if not t and "shape" in a and "dtype" in a and isinstance(a["dtype"], ScalarType):
        return [BufferType(tuple(a["shape"]), a["dtype"])]
    if len(t) != 1 or not isinstance(t[0], TileType) or "shape" in a or "dtype" in a:
        raise IRError(f"'{LOCAL_ALLOC}' takes 1 tile, or none and the buffer's shape and scalar dtype, got "
                      f"{', '.join(map(str, t)) or 'none'} and {', '.join(sorted(a)) or 'no attributes'}")
    return [BufferType(t[0].shape, t[0].element_ty)]


def _local_store(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    if len(t) != 2 or not isinstance(t[0], BufferType) or t[1] != TileType(t[0].shape, t[0].element_ty):
        raise IRError(f"'{LOCAL_STORE}' takes a shared-memory buffer and a tile of its shape and type, got "
                      f"{', '.join(map(str, t)) or 'none'}")
    return []


def _local_load(t: Sequence[Type], a: dict[str, Any], r: Sequence[Block]) -> list[Type]:
    if len(t) != 1 or not isinstance(t[0], BufferType):
        raise IRError(f"'{LOCAL_LOAD}' takes 1 shared-memory buffer, got {', '.join(map(str, t)) or 'none'}")
    return [TileType(t[0].shape, t[0].element_ty)]


GPU_OPS: dict[str, OpDef] = {
    CONVERT: OpDef(CONVERT, _convert_layout),
    # A buffer in shared memory for the rest of the kernel: holding the tile it is made from (never
    # stored to again), or empty (`shape` and `dtype`) until `local_store` writes a tile into it, which
    # replaces what it held (a loop's staged operand, every iteration); and a read into a register layout.
    LOCAL_ALLOC: OpDef(LOCAL_ALLOC, _local_alloc, {"shape": optional("ints"), "dtype": optional("type")},
                       side_effects=True),
    LOCAL_STORE: OpDef(LOCAL_STORE, _local_store, side_effects=True),
    LOCAL_LOAD: OpDef(LOCAL_LOAD, _local_load),
}

GPU_ATTRS: dict[str, Mapping[str, Attr]] = {
    # accelerate.plan_dot: mma.sync, wgmma or fma, and why; a wgmma dot's A read from registers
    # defer.defer_dots: where the lowering waits for a wgmma dot's group
    # pipeline.plan_pipelines: why a pipelined dot of A from registers does not leave its group in flight
    "dot": {"engine": optional("str"), "operand_a": enum("registers"), "wait": enum("at use"),
            "in_flight": optional("str")},
    "for": {"pipeline": optional("str"),  # pipeline.plan_pipelines: the stages and ring, or why none
            "flattened": optional("str"),  # passes/flatten.py: a flattened loop nest, or why a nest is not
            "deferred": optional("str"),  # defer.defer_dots: a chain's second product deferred, or why not
            "warp_specialized": optional("str")},  # specialize.specialize_warps: the producer and consumers, or why not
    "load": {"async_copy": optional("str"), "tma": optional("str")},  # pipeline.plan_pipelines: the copies, or why none
    # tma.plan_tensor_maps: the index of the block's tensor map, or why TMA does not copy or store it (then it is
    # a `load` or a `store`)
    # defer.defer_dots: the deferred product's B after the loop
    # pointer_tiles.pointer_tiles: a pointer load that reads a tile of a tensor, rewritten as this load
    "descriptor_load": {"tma": optional("int", "str"), "async_copy": optional("str"), "deferred": optional("str"),
                        "origin": enum("pointers")},
    "descriptor_store": {"tma": optional("int", "str")},
    "store": {"tma": optional("str")},
}


def gpu_opdef(name: str) -> OpDef:
    """The definition of op `name` in the GPU IR, or IRError."""
    opdef = GPU_OPS.get(name) or OPS.get(name)
    if opdef is None:
        raise IRError(f"unknown op '{name}'")
    return opdef


def plain(t: Type) -> Type:
    """`t` without its encoding: what the type rules take."""
    return t.without_encoding() if isinstance(t, (TileType, BufferType)) else t


def _plain_region(block: Block) -> Block:
    # What a region's type rule reads of it: its arguments' types and its terminator's operands'.
    out = Block([plain(a.type) for a in block.args])
    term = block.terminator
    if term is not None:
        out.ops.append(Op(term.name, [Value(plain(v.type)) for v in term.operands], []))
    return out


def infer_gpu(name: str, operand_types: Sequence[Type], attrs: dict[str, Any], regions: Sequence[Block] = ()) -> list[Type]:
    """The result types of GPU-IR op `name` by its type rule, without encodings (the rules know
    none), or IRError saying why the op is malformed; the attributes are checked against the op's
    schema and the GPU passes' (`GPU_ATTRS`)."""
    opdef = gpu_opdef(name)
    if len(regions) != opdef.num_regions and name not in ("if", "while"):
        raise IRError(f"'{name}' takes {opdef.num_regions} regions, got {len(regions)}")
    if err := attrs_error({**opdef.attrs, **GPU_ATTRS.get(name, {})}, attrs):
        raise IRError(f"op '{name}': {err}")
    return opdef.rule([plain(t) for t in operand_types], attrs, [_plain_region(r) for r in regions])
