"""The GPU IR's verifier: what every GPU pass and the lowering may rely on.

- every op is in a catalogue (the tile IR's or the GPU IR's) and its attributes fit its schema and
  the GPU passes' (`ops.GPU_ATTRS`);
- its result types are what its type rule gives for its operands, encodings aside;
- every tile value's type names an encoding of the tile's rank that places the tile on the kernel's
  warps of 32 lanes; every shared-memory buffer's a shared layout of its rank, only `local_load`
  reads a buffer and only `local_store` writes one (made empty by `local_alloc`);
- the values that layout assignment puts in one layout class are in one layout: the operands and
  results of an op whose rule is `same_layout` or `memory_access`, the values a loop carries (init,
  region argument, yield, result) and a branch's results. Two values of one shape may name different
  encodings that place every element alike (a conversion between them is dropped as trivial);
- `convert_layout` changes nothing but the encoding.

`verify_gpuir` runs after layout assignment and after each GPU pass (`passes.run_gpu_passes`), so
a pass that breaks the IR is named before the lowering trips over it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...ir.core import Block, IRError, Op, Value
from ...ir.types import BufferType, TileType
from ..errors import BackendError
from .assign import ONE_LAYOUT, RULES, GpuFunction
from .encodings import Encoding
from .ops import LOCAL_ALLOC, LOCAL_LOAD, LOCAL_STORE, infer_gpu, plain
from .shared import SwizzledShared


class GpuIRError(BackendError):
    """The GPU IR breaks an invariant (a compiler bug, or hand-written GPU IR); the message names the
    kernel, the pass that ran last, the op and why."""


class _Verifier:
    def __init__(self, gpu: GpuFunction, after: str) -> None:
        self.gpu = gpu
        self.after = after

    def fail(self, op: Op | None, why: str) -> GpuIRError:
        after = f" after {self.after}" if self.after else ""
        what = f", op '{op.name}'" if op is not None else ""
        return GpuIRError(f"GPU IR{after}{what}: {why}", self.gpu.fn.name, op.loc if op is not None else None)

    def block(self, block: Block) -> None:
        for op in block.ops:
            self.op(op)

    def value(self, v: Value, op: Op | None, what: str) -> None:
        ty = v.type
        if isinstance(ty, BufferType):
            self.buffer(ty, op, what)
        if not isinstance(ty, TileType):
            return
        enc = ty.encoding
        if not isinstance(enc, Encoding):
            raise self.fail(op, f"{what} {ty} names no layout encoding" if enc is None else
                            f"{what} {ty} names {type(enc).__name__}, which is no register layout")
        if enc.rank != len(ty.shape):
            raise self.fail(op, f"{what} {ty}: an encoding of rank {enc.rank} on a tile of rank {len(ty.shape)}")
        try:
            ll = self.gpu.layout(v)
        except ValueError as e:
            raise self.fail(op, f"{what} {ty}: {e}") from None
        if ll.in_size("lane") != 32 or ll.in_size("warp") != self.gpu.num_warps:
            raise self.fail(op, f"{what} {ty} spreads over {ll.in_size('lane')} lanes and {ll.in_size('warp')} "
                                f"warps, not 32 and {self.gpu.num_warps}")

    def buffer(self, ty: BufferType, op: Op | None, what: str) -> None:
        if not isinstance(ty.encoding, SwizzledShared):
            raise self.fail(op, f"{what} {ty} names no shared-memory layout")
        if len(ty.shape) != ty.encoding.rank:
            raise self.fail(op, f"{what} {ty}: a layout of rank {ty.encoding.rank} on a buffer of rank {len(ty.shape)}")
        try:
            ty.encoding.linear(ty.shape)
        except ValueError as e:
            raise self.fail(op, f"{what} {ty}: {e}") from None

    def op(self, op: Op) -> None:
        if op.name not in (LOCAL_LOAD, LOCAL_STORE) and any(isinstance(v.type, BufferType) for v in op.operands):
            raise self.fail(op, f"only {LOCAL_LOAD} and {LOCAL_STORE} take a shared-memory buffer")
        if op.name == LOCAL_STORE and not (isinstance(op.operands[0].owner, Op) and op.operands[0].owner.name == LOCAL_ALLOC
                                           and not op.operands[0].owner.operands):
            raise self.fail(op, f"{LOCAL_STORE} writes only into a buffer that an empty {LOCAL_ALLOC} made "
                                "(one made from a tile holds it for the rest of the kernel)")
        try:
            types = infer_gpu(op.name, [v.type for v in op.operands], op.attrs, op.regions)
        except IRError as e:
            raise self.fail(op, str(e)) from None
        if types != [plain(r.type) for r in op.results]:
            shown = ", ".join(map(str, types)) or "none"
            raise self.fail(op, f"result types ({', '.join(str(r.type) for r in op.results)}) are not ({shown}) "
                                "by the op's type rule")
        for i, r in enumerate(op.results):
            self.value(r, op, f"result {i}")
        for region in op.regions:
            for i, a in enumerate(region.args):
                self.value(a, op, f"region argument {i}")
            self.block(region)
        rule = RULES.get(op.name)
        if rule in ONE_LAYOUT:
            self.one_layout(op, [*op.operands, *op.results], "its operands and results")
        elif op.name == "for":
            body = op.regions[0]
            self.carried(op, op.operands[3:], body.args[1:], body, op.results)
        elif op.name == "if":
            for region in op.regions:
                term = region.terminator
                if term is not None:
                    for r, y in zip(op.results, term.operands):
                        self.one_layout(op, [r, y], "a result and what a branch yields for it")
        elif op.name == "while":
            before, after = op.regions
            cond = before.terminator
            self.carried(op, op.operands, before.args, after, after.args)
            if cond is not None:
                for c, a, r in zip(cond.operands[1:], after.args, op.results):
                    self.one_layout(op, [c, a, r], "what the condition passes on, the body's argument and the result")

    def carried(self, op: Op, inits: Sequence[Value], args: Sequence[Value], body: Block,
                results: Sequence[Value]) -> None:
        term = body.terminator
        yields = term.operands if term is not None else []
        for init, arg, y, r in zip(inits, args, yields, results):
            self.one_layout(op, [init, arg, y, r], "a carried value's init, argument, yield and result")

    def one_layout(self, op: Op, values: Sequence[Value], what: str) -> None:
        tiles = [v for v in values if isinstance(v.type, TileType)]
        for v in tiles[1:]:
            a, b = tiles[0].type, v.type
            assert isinstance(a, TileType) and isinstance(b, TileType)
            if a.encoding == b.encoding:
                continue
            if a.shape == b.shape and self.gpu.layout(tiles[0]) == self.gpu.layout(v):
                continue
            raise self.fail(op, f"{what} must share one layout, but {a} and {b} place their elements differently")


def verify_gpuir(gpu: GpuFunction, after: str = "") -> None:
    """Check the invariants above; `GpuIRError` names the kernel, the op (and `after`, the pass
    that ran last) and what is wrong."""
    v = _Verifier(gpu, after)
    for i, a in enumerate(gpu.fn.args):
        if isinstance(a.type, TileType):
            raise v.fail(None, f"argument {i} is a tile; kernel arguments are scalars and pointers")
    v.block(gpu.fn.body)
