"""Pointer loads that read a tile of a tensor, as descriptor loads, so that TMA copies them (sm_90a).

Tutorial 03's matmul loads its operands through pointers:

    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak   # stride_ak == 1
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        ...
        a_ptrs += BLOCK_K * stride_ak

Each such load reads the block of rows r0 + i and columns c0 + j of the matrix at `a_ptr` whose rows are
`stride_am` elements apart, and the mask bounds the columns by K: `desc.load([r0, c0])` of the descriptor
`(a_ptr, shape [2^31 - 1, K], strides [stride_am, 1])` reads the same elements, and the same zeros outside
K. `pointer_tiles` finds such loads and rewrites them so; `tma.plan_tensor_maps` then keeps them for TMA.

A load is rewritten when all of this is proved:
- its pointers are `base + c + a0 * i + a1 * j` over the block's rows i and columns j, with `base` a
  pointer parameter (`affine.Tiles.pointers`: `c`, `a0`, `a1` polynomials of the kernel's scalars, the
  parameters specialized to 1 being 1, and pointers a loop steps followed through it);
- one of `a0`, `a1` is 1 (that dimension is the tensor's innermost) and the other, the row stride, a
  parameter the launch specialized as a positive multiple of 16 (`:16+`; TMA steps by positive strides
  alone, where a pointer's stride may be 0 or negative) or a positive constant; `c` then splits into
  `r0 * stride + c0`, the monomials with the stride as a factor and the rest;
- its mask is absent, or a conjunction of `r0 + i < R` and `c0 + j < C` (each dimension at most once,
  `<`, `<=`, `>` or `>=` written either way round), with R and C parameters or constants; a dimension
  the mask leaves unbounded gets the extent 2^31 - 1 (the driver takes any extent up to 2^32 whatever
  the strides, and TMA then reads the next rows as the pointers would: run on an H200); what the mask
  excludes reads `other`, which must be 0 (or NaN, TMA's other fill). A bound below 0 excludes every
  element: the map says `clamp`, and the launch maps such a size as 0 (`runtime/tensor_maps.py`);
- r0 and c0 are provably non-negative (`affine.Tiles.nonnegative`: TMA fills a negative coordinate where
  the pointers read memory before the row);
- the descriptor's map is one that TMA takes (`tma.tensor_map`: an aligned base, strides of 16 bytes,
  swizzle atoms) and the loaded tile feeds a wgmma dot in a loop, as for `desc.load`;
- the loop's tiles that pass copy `MIN_STAGE_BYTES` an iteration at least (smaller stages stay on cp.async,
  measured no slower).

A tile whose columns are the tensor's rows (a1 the stride, a0 == 1: a column-major operand) is loaded as
its transpose and transposed back (`trans`), which wgmma reads without moving data. Pointers whose
offsets wrap around int32 address other memory than the indices name; TMA addresses what the indices
name. Every other load stays as it is, for cp.async.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...ir.core import Block, Function, Module, Op, Value
from ...ir.types import TileType, int32, int64, shape_of
from ...passes.dce import dce
from ...passes.rewrite import Emitter, constant_value, has_side_effects, replace_all_uses, users
from .affine import Poly, Tiles
from .tma import feeds_wgmma, tensor_map

UNBOUNDED = 2**31 - 1
"""The extent of a dimension that a load's mask does not bound: past any int32 coordinate."""
MIN_STAGE_BYTES = 24 * 1024
"""The fewest bytes a loop's tiles must copy an iteration for TMA to take them. On an H200 (8192^3, e4m3, 3 stages,
the benchmark's tutorial matmul), with the maps' L2 promotion at 256 bytes then, the copies of 16 KiB an iteration
(128x128x64) ran 977 -> 862 TFLOP/s through TMA, where 24 KiB (128x256x64) ran 902 -> 1014 and 48 KiB
(128x256x128) held (1234 -> 1250); fp16's 32 KiB (128x128x64) ran 1.00-1.21x Triton through TMA, against
0.95-1.02x through cp.async. With 128-byte promotion (`runtime/libcuda.py`) the 16 KiB row runs the same either
way (971 through cp.async, 966 through TMA): nothing to gain there, so smaller stages stay on cp.async."""

@dataclass(frozen=True)
class _Tile:
    """A load's block as a tensor's tile: its base, per dimension of the tensor (outermost first) the
    extent (a parameter, a constant or None: unbounded) and the tile's start, and the row stride."""

    base: Value
    extents: tuple[Value | int | None, Value | int | None]
    starts: tuple[Poly, Poly]
    stride: Value | int
    transposed: bool


def _source(tiles: Tiles, p: Poly) -> Value | int | None:
    """`p` as a map's source: an int32 parameter or a positive constant."""
    value = p.constant()
    if value is not None:
        return value if value > 0 else None
    if len(p.terms) == 1:
        (m, c), = p.terms.items()
        leaf = tiles.leaf[m[0]] if len(m) == 1 else None
        if c == 1 and leaf is not None and leaf.owner is tiles.fn.body:
            return leaf
    return None


def _split(c: Poly, stride: Value | int, tiles: Tiles) -> tuple[Poly, Poly]:
    """`c` as `r0 * stride + c0`: the monomials with the stride as a factor (or, for a constant stride,
    whose coefficient it divides), and the rest."""
    rows, cols = Poly(), Poly()
    for m, coef in c.terms.items():
        if isinstance(stride, Value) and tiles.number[stride] in m:
            rest = list(m)
            rest.remove(tiles.number[stride])
            rows = rows + Poly({tuple(rest): coef})
        elif isinstance(stride, int) and coef % stride == 0:
            rows = rows + Poly({m: coef // stride})
        else:
            cols = cols + Poly({m: coef})
    return rows, cols


def _tile(tiles: Tiles, op: Op) -> _Tile | None:
    """The load `op` as a tile of a tensor, or None."""
    if op.attrs.get("volatile") or len(shape_of(op.result.type)) != 2:
        return None
    found = tiles.pointers(op.operands[0], (0, 1))
    if found is None:
        return None
    base, form = found
    one = Poly.const(1)
    if form.coef[1] == one:
        inner, outer = 1, 0
    elif form.coef[0] == one:
        inner, outer = 0, 1
    else:
        return None
    stride = _source(tiles, form.coef[outer])
    if stride is None or isinstance(stride, Value) and stride not in tiles.positive:
        return None
    halves = _split(form.const, stride, tiles)
    starts = {outer: halves[0], inner: halves[1]}
    extents: dict[int, Value | int | None] = {0: None, 1: None}
    atoms = tiles.bounds(op.operands[1], (0, 1)) if len(op.operands) > 1 else []
    if atoms is None or (len(op.operands) == 3 and atoms and not _fills(op.operands[2])):
        return None
    for atom in atoms:
        dim = 0 if atom.coef == (one, Poly()) else 1 if atom.coef == (Poly(), one) else None
        extent = _source(tiles, starts[dim] - atom.const) if dim is not None else None
        if dim is None or extent is None or extents[dim] is not None:
            return None
        extents[dim] = extent
    if not all(tiles.nonnegative(starts[d]) for d in (0, 1)):
        return None
    order = (outer, inner)
    return _Tile(base, (extents[order[0]], extents[order[1]]), (starts[order[0]], starts[order[1]]), stride,
                 transposed=inner == 0)


def _fill(other: Value) -> Any:
    """The constant a load's `other` is: a `constant`, or one splat or cast (an 8-bit float's, which the IR
    makes from an fp32 constant); else None."""
    owner = other.owner
    while isinstance(owner, Op) and owner.name in ("splat", "cast"):
        other = owner.operands[0]
        owner = other.owner
    return constant_value(other)


def _fills(other: Value) -> bool:
    """Whether a load's `other` is what TMA fills with: zero (or NaN, asked for as the padding)."""
    value = _fill(other)
    return value is not None and (value == 0 or value != value)


def emit_poly(emit: Emitter, tiles: Tiles, p: Poly) -> Value:
    """`p` as int32 arithmetic, monomials in the order of their factors' definitions."""
    total: Value | None = None
    for m in sorted(p.terms):
        term: Value | None = None
        for n in m:
            leaf = tiles.leaf[n]
            term = leaf if term is None else emit.op("mul", term, leaf)
        coef = p.terms[m]
        if term is None:
            term = emit.const(coef, int32)
        elif coef != 1:
            term = emit.op("mul", term, emit.const(coef, int32))
        total = term if total is None else emit.op("add", total, term)
    return total if total is not None else emit.const(0, int32)


def _operand(emit: Emitter, source: Value | int | None) -> Value:
    """A map's extent or stride as the descriptor's int64 operand."""
    if isinstance(source, Value):
        return emit.op("cast", source, to=int64)
    return emit.const(UNBOUNDED if source is None else source, int64)


def _descriptor_load(tiles: Tiles, op: Op, tile: _Tile) -> list[Op]:
    """The ops that load `op`'s block through a descriptor; the last one's result replaces `op`'s."""
    ops: list[Op] = []
    emit = Emitter(ops, op.loc)
    shape = [_operand(emit, e) for e in tile.extents]
    stride = _operand(emit, tile.stride)
    starts = [emit_poly(emit, tiles, s) for s in tile.starts]
    block = shape_of(op.result.type)
    other = _fill(op.operands[2]) if len(op.operands) == 3 else 0
    padding = "nan" if other is not None and other != other else "zero"
    attrs = {"shape": list(block[::-1] if tile.transposed else block), "padding": padding,
             "cache": op.attrs.get("cache") or "", "evict": op.attrs.get("evict") or ""}
    load = emit.op("descriptor_load", tile.base, *shape, stride, *starts, **attrs)
    ops[-1].attrs["origin"] = "pointers"  # the GPU IR's attribute (gpuir/ops.py): its map's sizes clamp at 0
    if tile.transposed:
        emit.op("trans", load, perm=[1, 0])
    return ops


def pointer_tiles(fn: Function, attrs: dict[str, Any], num_warps: int) -> int:
    """Rewrite the loads of `fn` (specialized as module `attrs` say) that read a tile of a tensor into a
    wgmma dot in a loop as descriptor loads that TMA takes; the number rewritten."""
    tiles = Tiles(fn, attrs)
    readers = users(fn)
    found: dict[Op, list[Op]] = {}  # a load -> the ops that replace it
    loop_of: dict[Op, Op] = {}  # a load -> its innermost loop

    def visit(b: Block, loop: Op | None) -> None:
        for op in b.ops:
            for region in op.regions:
                visit(region, op if op.name == "for" else loop)
            if loop is not None and op.name == "load" and feeds_wgmma(op, readers, fn, num_warps):
                new = _rewrite(op)
                if new is not None:
                    found[op], loop_of[op] = new, loop

    def _rewrite(op: Op) -> list[Op] | None:
        tile = _tile(tiles, op)
        if tile is None:
            return None
        new = _descriptor_load(tiles, op, tile)
        load = next(o for o in new if o.name == "descriptor_load")
        return None if isinstance(tensor_map(load, fn, attrs), str) else new

    visit(fn.body, None)
    stage: dict[Op, int] = {}
    for op, loop in loop_of.items():
        stage[loop] = stage.get(loop, 0) + _bytes(op.result)
    subst = {op.result: new[-1].result for op, new in found.items() if stage[loop_of[op]] >= MIN_STAGE_BYTES}

    def splice(b: Block) -> None:
        ops: list[Op] = []
        for op in b.ops:
            for region in op.regions:
                splice(region)
            ops.extend(found[op] if op.results and op.results[0] in subst else [op])
        b.ops = ops

    splice(fn.body)
    if subst:
        replace_all_uses(fn, subst)
        _drop_dead_carried(fn)
        dce(Module([fn]))
    return len(subst)


def _bytes(v: Value) -> int:
    assert isinstance(v.type, TileType)
    n = v.type.element_ty.itemsize
    for d in v.type.shape:
        n *= d
    return n


def _drop_dead_carried(fn: Function) -> None:
    """Remove the values loops carry that nothing reads but their own steps (pointers a rewritten load no
    longer uses)."""
    readers = users(fn)
    for loop in [o for o in fn.walk() if o.name == "for"]:
        body = loop.regions[0]
        dead = [k for k in range(len(loop.results)) if _dead(body, k, readers) and not readers.get(loop.results[k])]
        if not dead:
            continue
        keep = [k for k in range(len(loop.results)) if k not in dead]
        yield_op = body.ops[-1]
        yield_op.operands = [yield_op.operands[k] for k in keep]
        body.args = [body.args[0]] + [body.args[k + 1] for k in keep]
        for i, arg in enumerate(body.args):
            arg.index = i
        loop.operands = loop.operands[:3] + [loop.operands[3 + k] for k in keep]
        loop.results = [loop.results[k] for k in keep]
        for i, r in enumerate(loop.results):
            r.index = i


def _dead(body: Block, k: int, readers: dict[Value, list[Op]]) -> bool:
    """Whether carried value `k` of the loop with body `body` is read only by pure ops of the body whose
    results only each other and the yield's operand `k` read (its step)."""
    arg, yield_op = body.args[k + 1], body.ops[-1]
    ops = set(body.ops)
    reach: set[Value] = {arg}
    work = [arg]
    while work:
        for op in readers.get(work.pop(), []):
            if op is yield_op:
                continue
            if op.regions or has_side_effects(op) or op not in ops:
                return False
            fresh = [r for r in op.results if r not in reach]
            reach.update(fresh)
            work.extend(fresh)
    return [i for i, v in enumerate(yield_op.operands) if v in reach] == [k]
