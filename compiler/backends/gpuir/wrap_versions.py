"""Loops whose tile offsets wrap (`% M`) or may start below 0, versioned for the programs whose tiles do neither,
so that TMA copies them.

Tutorial 03, as Triton ships it, wraps its rows and columns around the matrix:

    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M

(tutorial 09's pointer kernel writes `tl.where(offs_am < M, offs_am, 0)`), and its grouped ordering makes
`pid_m` a quotient by a runtime value, which no analysis proves non-negative. `pointer_tiles` takes neither.
Yet each program's rows `x = c + tl.arange(0, B)` wrap only when they end past M: where `0 <= c` and
`c + B <= M`, `x % M` (and the `where`) is `x` itself. So each loop whose wgmma-fed loads read offsets so
wrapped, or rows x whose start c no analysis proves non-negative (a grouped ordering without `% M`), becomes

    if 0 <= c and c < M and M - c >= B (for each wrapped x; 0 <= c alone for rows that do not wrap):
        the loop, those offsets replaced by `maximum(c, 0) + tl.arange(0, B)`    # (the guard: once a program)
    else:
        the loop as written

in which `maximum(c, 0)` (equal to c there) is what proves the tile's start non-negative. `pointer_tiles`
then rewrites the first loop's loads for TMA, and a version whose first loop gained no more pointer tiles
than the second is dropped again (`drop_idle_versions`), leaving the loop as written. The programs at the
matrix's edge run the second loop (cp.async), every other program the first; both loops' shared memory is
allocated over the same bytes (`smem_alloc`: an `if` lowers both branches from the same state).

`c < M` is in the condition so that `M - c >= B` counts only where `M - c` cannot overflow; `c` is
computed as int32 arithmetic, which is exact modulo 2^32, so where it lands in [0, M - B] every element of
x is c + i exactly.

Where no store keeps what the loop's loads read at rows past M (`masked_rows.py`: the store's mask drops them,
as tutorials 03 and 09 store), the rows past M need not be the rows the wrap names: that wrap's condition is
`0 <= c < M <= 2^31 - B` (c + i exact), and the version's loads read `maximum(c, 0) + tl.arange(0, B)` masked
`< M`, which `pointer_tiles` makes the map's extent: TMA fills zeros past M, and the programs at the matrix's edge
take the version too.

A persistent nest (`tl.range(..., flatten=True)`, tutorial 09's pointer kernel) computes each tile's rows
inside its outer loop, from the tile's index. It is versioned whole, before `flatten` makes one loop of it:
a loop of scalar arithmetic before the nest evaluates the guard for every tile the program takes (its
induction variable's range; the starts' slice of the nest's body, which must read nothing the nest carries),
and both versions are then flattened (`_version_nest`).
"""

from __future__ import annotations

from typing import Any

from ...ir.core import Block, Function, Module, Op, Value
from ...ir.types import TileType, int1, int32, shape_of
from ...passes.dce import dce
from ...passes.flatten import ATTR as FLATTEN
from ...passes.flatten import defined_in, why_not
from ...passes.rewrite import Emitter, clone_op, feeding, has_side_effects, replace_all_uses, users
from .affine import Poly, Tiles
from .masked_rows import masked_loads
from .pointer_tiles import emit_poly
from .tma import feeds_wgmma


def _wrapped(op: Op) -> tuple[Value, Value] | None:
    """(x, the bound M's block) when `op` is `x % M` or `where(x < M, x, other)` of a 1-D int32 block x."""
    if len(op.results) != 1 or not isinstance(op.result.type, TileType):
        return None
    if len(op.result.type.shape) != 1 or op.result.type.element_ty != int32:
        return None
    if op.name == "rem":
        return op.operands[0], op.operands[1]
    if op.name == "select":
        cond, x = op.operands[0], op.operands[1]
        test = cond.owner
        if isinstance(test, Op) and test.name == "cmp":
            a, b = test.operands
            pred = test.attrs["pred"]
            if pred == "lt" and a is x:
                return x, b
            if pred == "gt" and b is x:
                return x, a
    return None


def _start(tiles: Tiles, x: Value, bound: Value) -> tuple[Poly, Poly] | None:
    """(c, M) when x is `c + tl.arange(0, B)` and the bound is the same scalar M at every element."""
    form, m = tiles.form(x, (0,)), tiles.form(bound, (0,))
    if form is None or m is None or not m.uniform() or form.coef[0] != Poly.const(1):
        return None
    return form.const, m.const


def _guarded(tiles: Tiles, op: Op) -> tuple[Poly, Poly | None] | None:
    """(c, M) when `op` wraps rows `c + tl.arange(0, B)` around M; (c, None) when `op` computes such rows
    (`add`, `sub`) and c is not provably non-negative (a grouped ordering's quotients, `- 8`)."""
    wrap = _wrapped(op)
    if wrap is not None:
        return _start(tiles, *wrap)
    ty = op.results[0].type if len(op.results) == 1 else None
    if op.name not in ("add", "sub") or not isinstance(ty, TileType) or len(ty.shape) != 1:
        return None
    form = tiles.form(op.result, (0,))
    if form is None or form.coef[0] != Poly.const(1) or tiles.nonnegative(form.const):
        return None
    return form.const, None


def _slice(block: Block, loop: Op, roots: set[Value]) -> list[Op] | None:
    """The ops of `block` before `loop` that read `roots`, directly or through each other, or None when one of
    them has regions or side effects."""
    reach, found = set(roots), []
    for op in block.ops[: block.ops.index(loop)]:
        if any(v in reach for v in op.operands):
            if op.regions or has_side_effects(op):
                return None
            found.append(op)
            reach.update(op.results)
    return found


def version_wraps(fn: Function, attrs: dict[str, Any], num_warps: int) -> list[tuple[Block, Op]]:
    """Version each outermost loop of `fn` whose wgmma-fed loads read wrapped offsets computed before it in its
    block (module docstring); each `if` made, with its block, for `drop_idle_versions`. A versioned loop's inner
    loops are left as they are (its copy unwraps what they read from before it)."""
    tiles = Tiles(fn, attrs)
    readers = users(fn)
    made: list[tuple[Block, Op]] = []

    def visit(block: Block) -> None:
        for loop in list(block.ops):
            fed = loop.name == "for" and any(o.name == "load" and feeds_wgmma(o, readers, fn, num_warps)
                                             for o in loop.regions[0].walk())
            wraps = _wraps(tiles, block, loop) if fed else {}
            if wraps:
                made.append((block, _version(fn, tiles, block, loop, wraps, _masked(fn, tiles, block, wraps, loop))))
                continue
            if fed and loop.attrs.get(FLATTEN) and why_not(loop) is None:  # a nest to flatten: versioned whole
                version = _version_nest(fn, tiles, block, loop)
                if version is not None:
                    made.append((block, version))
                continue
            for region in loop.regions:
                visit(region)

    visit(fn.body)
    return made


Guarded = dict[Op, tuple[Poly, Poly | None, list[Op]]]  # an op `_guarded` takes -> its (c, M) and `_slice`
Masked = dict[Op, dict[Op, int]]  # a wrap whose rows past M only masked stores read -> the loads it reaches, along


def _masked(fn: Function, tiles: Tiles, block: Block, wraps: Guarded, loop: Op) -> Masked:
    """The wraps of `wraps` (in `block`) whose rows past M no store keeps (`masked_rows.masked_loads`), with
    their loads, all of them in `loop`, whose copy reads the rows unwrapped."""
    inside, readers = set(loop.walk()), users(fn)
    found: Masked = {}
    for op, (c, m, _) in wraps.items():
        loads = masked_loads(readers, tiles, block, op, c, m) if m is not None else None
        if loads is not None and inside.issuperset(loads):
            found[op] = loads
    return found


def _wraps(tiles: Tiles, block: Block, loop: Op) -> Guarded:
    """The ops of `block` before `loop` that `_guarded` takes and `loop` reads (through the ops between), each
    with its (c, M) and the ops that read it; of two such ops one reads the other's rows (`x % M` of x), the
    reader alone."""
    read = {v for op in loop.walk() for v in op.operands}
    found: Guarded = {}
    for op in block.ops[: block.ops.index(loop)]:
        start = _guarded(tiles, op)
        ops = _slice(block, loop, {op.result}) if start is not None else None
        if start is not None and ops is not None and any(v in read for o in [op, *ops] for v in o.results):
            found[op] = (*start, ops)
    inner = {v for op in found for v in op.operands}
    return {op: got for op, got in found.items() if op.result not in inner}


def _emit(emit: Emitter, tiles: Tiles, p: Poly, mapping: dict[Value, Value]) -> Value:
    """`emit_poly` of `p`, its leaves taken through `mapping`."""
    at = len(emit.ops)
    value = emit_poly(emit, tiles, p)
    for op in emit.ops[at:]:
        op.operands = [mapping.get(v, v) for v in op.operands]
    return mapping.get(value, value)


def _fits(emit: Emitter, tiles: Tiles, wraps: Guarded, mapping: dict[Value, Value],
          masked: Masked) -> tuple[Value, list[Value]]:
    """The guard (module docstring) of `wraps`, their leaves through `mapping`, and each wrap's start c; for
    the `masked`, `0 <= c < M <= 2^31 - B` (its rows past M read as the mask says, c + i exact)."""
    zero = emit.const(0, int32)
    cond: Value | None = None
    starts = []
    for op, (c, m, _) in wraps.items():
        start = _emit(emit, tiles, c, mapping)
        fits = emit.op("cmp", start, zero, pred="ge")
        if m is not None:
            bound, size = _emit(emit, tiles, m, mapping), shape_of(op.result.type)[0]
            fits = emit.op("and", fits, emit.op("cmp", start, bound, pred="lt"))
            if op in masked:
                fits = emit.op("and", fits, emit.op("cmp", bound, emit.const(2**31 - size, int32), pred="le"))
            else:
                fits = emit.op("and", fits, emit.op("cmp", emit.op("sub", bound, start), emit.const(size, int32),
                                                    pred="ge"))
        cond = fits if cond is None else emit.op("and", cond, fits)
        starts.append(start)
    assert cond is not None
    return cond, starts


def _unwrapped(emit: Emitter, op: Op, start: Value) -> Value:
    """`maximum(c, 0) + tl.arange(0, B)`: the rows `op` wraps, where they do not wrap."""
    shape = list(shape_of(op.result.type))
    first = emit.op("splat", emit.op("maximum", start, emit.const(0, int32)), shape=shape)
    return emit.op("add", first, emit.op("arange", start=0, end=shape[0]))


def _mask_rows(root: Op, load: Op, rows: Value, bound: Value, dim: int) -> None:
    """Mask the load `load` (inside `root`) to `rows < bound` along its dimension `dim`, `rows` the 1-D block its
    pointers take along it: the rows past a masked wrap's M are read as the mask says (zeros for TMA)."""
    block = next(b for op in root.walk() for b in op.regions if load in b.ops)
    ops: list[Op] = []
    emit = Emitter(ops, load.loc)
    shape = list(shape_of(load.result.type))
    below = emit.op("cmp", rows, emit.op("splat", bound, shape=[shape[dim]]), pred="lt")
    mask = emit.op("broadcast", emit.op("expand_dims", below, axis=1 - dim), shape=shape)
    if len(load.operands) > 1:
        mask = emit.op("and", load.operands[1], mask)
    load.operands = [load.operands[0], mask, *load.operands[2:]]
    at = block.ops.index(load)
    block.ops[at:at] = ops


def _versioned(fn: Function, block: Block, loop: Op, guard: list[Op], cond: Value, then: list[Op], copy: Op) -> Op:
    """Replace `loop` in `block` by `guard` and `if cond {then, copy} else {loop}`; the `if`."""
    then_block, else_block = Block(), Block()
    version = Op("if", [cond], [r.type for r in loop.results], {}, [then_block, else_block], loop.loc)
    replace_all_uses(fn, dict(zip(loop.results, version.results)))  # before the else branch's yield reads them
    then_block.ops = [*then, copy, Op("yield", list(copy.results), [], {}, (), loop.loc)]
    else_block.ops = [loop, Op("yield", list(loop.results), [], {}, (), loop.loc)]
    at = block.ops.index(loop)
    block.ops[at : at + 1] = [*guard, version]
    return version


def _version(fn: Function, tiles: Tiles, block: Block, loop: Op, wraps: Guarded, masked: Masked) -> Op:
    """Replace `loop` in `block` by `if (no wrap) {loop, unwrapped} else {loop}`; the `if`."""
    guard: list[Op] = []
    cond, starts = _fits(Emitter(guard, loop.loc), tiles, wraps, {}, masked)
    then: list[Op] = []
    inner = Emitter(then, loop.loc)
    mapping = {op.result: _unwrapped(inner, op, start) for op, start in zip(wraps, starts)}
    bounds = {op: _emit(inner, tiles, wraps[op][1] or Poly(), mapping) for op in masked}
    sliced = {o for _, _, ops in wraps.values() for o in ops}  # the slices' union: the forward slice of them all
    then.extend(clone_op(o, mapping) for o in block.ops if o in sliced)
    copy = clone_op(loop, mapping)  # the wraps, before the loop and not in their slices, keep their unwrapped rows
    for op, loads in masked.items():
        for load, dim in loads.items():
            _mask_rows(copy, mapping[load.result].owner, mapping[op.result], bounds[op], dim)  # type: ignore[arg-type]
    return _versioned(fn, block, loop, guard, cond, then, copy)


def _version_nest(fn: Function, tiles: Tiles, block: Block, loop: Op) -> Op | None:
    """Version the loop nest `loop` (marked to be flattened) whose tiles' rows wrap, computed before its inner
    loop from its induction variable: the guard holds when it holds for every tile, which a loop of scalar
    arithmetic before the nest computes (`flatten` then makes one loop of each version). None where the nest's
    inner loop reads no wrap, or a start reads what the outer loop carries."""
    body = loop.regions[0]
    inner = next(op for op in body.ops if op.regions)
    wraps = _wraps(tiles, body, inner)
    leaves = [tiles.leaf[n] for c, m, _ in wraps.values() for p in (c, m or Poly()) for mono in p.terms
              for n in mono]
    pre = body.ops[: body.ops.index(inner)]
    computing = feeding(pre, leaves)
    made = {r for op in computing for r in op.results} | {body.args[0]}
    inside = defined_in(loop)
    if not wraps or any(v in inside and v not in made for v in leaves) or any(
            v in body.args[1:] for op in computing for v in op.operands):
        return None
    masked = _masked(fn, tiles, body, wraps, inner)
    guard: list[Op] = []
    every = _every_tile(Emitter(guard, loop.loc), tiles, loop, wraps, computing, masked)
    return _versioned(fn, block, loop, guard, every, [], _rows_inside(tiles, loop, inner, wraps, masked))


def _every_tile(emit: Emitter, tiles: Tiles, loop: Op, wraps: Guarded, computing: list[Op], masked: Masked) -> Value:
    """Whether the guard of `wraps` holds at every iteration of `loop`: a loop over its range of `computing` (the
    ops of its body that the starts and bounds read) and the guard."""
    iv = loop.regions[0].args[0]
    scan = Block([iv.type, int1], ["t", "unwrapped"])
    smap: dict[Value, Value] = {iv: scan.args[0]}
    scan.ops += [clone_op(op, smap) for op in computing]
    fits, _ = _fits(Emitter(scan.ops, loop.loc), tiles, wraps, smap, masked)
    scan.ops.append(Op("yield", [Emitter(scan.ops, loop.loc).op("and", scan.args[1], fits)], [], {}, (), loop.loc))
    emit.ops.append(Op("for", [*loop.operands[:3], emit.const(True, int1)], [int1], {}, [scan], loop.loc))
    return emit.ops[-1].result


def _rows_inside(tiles: Tiles, loop: Op, inner: Op, wraps: Guarded, masked: Masked) -> Op:
    """A copy of the nest `loop` whose inner loop computes the rows of `wraps` itself, unwrapped, from each start
    c computed before it: a flattened loop carries c, a scalar, which `pointer_tiles` sees through
    (`affine.Tiles`), where it would carry the block of rows."""
    body = loop.regions[0]
    cmap: dict[Value, Value] = {}
    copy = clone_op(loop, cmap)
    cbody = copy.regions[0]
    at = body.ops.index(inner)
    firsts: list[Op] = []
    starts = [_emit(Emitter(firsts, loop.loc), tiles, c, cmap) for c, _, _ in wraps.values()]
    cbody.ops[at:at] = firsts
    rows: list[Op] = []
    emit = Emitter(rows, loop.loc)
    rmap = dict(cmap)
    for op, start in zip(wraps, starts):
        rmap[op.result] = _unwrapped(emit, op, start)
    bounds = {op: _emit(emit, tiles, wraps[op][1] or Poly(), cmap) for op in masked}
    sliced = {o for _, _, ops in wraps.values() for o in ops}
    rows.extend(clone_op(o, rmap) for o in body.ops[:at] if o in sliced)
    cinner = cbody.ops[at + len(firsts)]
    ibody = cinner.regions[0]
    subst = {cmap[v]: rmap[v] for v in [*(op.result for op in wraps), *(r for o in sliced for r in o.results)]}
    for op in ibody.walk():
        op.operands = [subst.get(v, v) for v in op.operands]
    ibody.ops[:0] = rows
    for op, loads in masked.items():
        for load, dim in loads.items():
            _mask_rows(cinner, cmap[load.result].owner, rmap[op.result], bounds[op], dim)  # type: ignore[arg-type]
    return copy


def _tiles(block: Block) -> int:
    return sum(1 for op in block.walk() if op.name == "descriptor_load" and op.attrs.get("origin") == "pointers")


def drop_idle_versions(fn: Function, versions: list[tuple[Block, Op]]) -> None:
    """Put back the loop as written for each of `versions` whose unwrapped loop `pointer_tiles` gave no more
    pointer tiles than the loop as written."""
    idle = [(block, v) for block, v in versions if _tiles(v.regions[0]) <= _tiles(v.regions[1])]
    subst: dict[Value, Value] = {}
    for block, version in idle:
        *ops, yield_op = version.regions[1].ops
        subst.update(zip(version.results, yield_op.operands))
        at = block.ops.index(version)
        block.ops[at : at + 1] = ops
    if idle:
        replace_all_uses(fn, subst)
        dce(Module([fn]))
