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
  pointer parameter and `c`, `a0`, `a1` sums of products of scalars (`Poly`): program ids, parameters
  (those specialized to 1 are 1), constants, the induction variables of loops, and other scalar values as
  they are. A pointer a loop carries and steps by a scalar `s` an iteration is its initial value plus
  `(iv - lo) / step * s`, when the loop's step is a positive constant that divides `s`;
- one of `a0`, `a1` is 1 (that dimension is the tensor's innermost) and the other, the row stride, a
  parameter the launch specialized as a positive multiple of 16 (`:16+`; TMA steps by positive strides
  alone, where a pointer's stride may be 0 or negative) or a positive constant; `c` then splits into `r0 * stride + c0`, the monomials with the stride as a
  factor and the rest;
- its mask is absent, or a conjunction of `r0 + i < R` and `c0 + j < C` (each dimension at most once,
  `<`, `<=`, `>` or `>=` written either way round), with R and C parameters or constants; a dimension
  the mask leaves unbounded gets the extent 2^31 - 1 (the driver takes any extent up to 2^32 whatever
  the strides, and TMA then reads the next rows as the pointers would: run on an H200); what the mask
  excludes reads `other`, which must be 0 (or NaN, TMA's other fill). A bound below 0 excludes every
  element: the map says `clamp`, and the launch maps such a size as 0 (`runtime/tensor_maps.py`);
- r0 and c0 are non-negative (TMA fills a negative coordinate where the pointers read memory before the
  row): sums of products of non-negative constants, program ids, and induction variables of loops from a
  non-negative start by a positive constant step (`tma._multiple` says which other values are);
- the descriptor's map is one that TMA takes (`tma.tensor_map`: an aligned base, strides of 16 bytes,
  swizzle atoms) and the loaded tile feeds a wgmma dot in a loop, as for `desc.load`;
- the loop's tiles that pass copy `MIN_STAGE_BYTES` an iteration at least (smaller stages stay on cp.async,
  whose copies complete sooner).

A tile whose columns are the tensor's rows (a1 the stride, a0 == 1: a column-major operand) is loaded as
its transpose and transposed back (`trans`), which wgmma reads without moving data. Pointers whose
offsets wrap around int32 address other memory than the indices name; TMA addresses what the indices
name. Every other load stays as it is, for cp.async.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...ir.core import Block, Function, Module, Op, Value
from ...ir.types import ScalarType, TileType, int32, int64, shape_of
from ...passes.dce import dce
from ...passes.flatten import defined_in
from ...passes.rewrite import Emitter, constant_value, has_side_effects, replace_all_uses
from .tma import _feeds_wgmma, _multiple, tensor_map

UNBOUNDED = 2**31 - 1
"""The extent of a dimension that a load's mask does not bound: past any int32 coordinate."""
MIN_STAGE_BYTES = 24 * 1024
"""The fewest bytes a loop's tiles must copy an iteration for TMA to take them. One thread issues TMA's copies,
which complete on an mbarrier later than every thread's cp.async copies do: on an H200 (8192^3, e4m3, 3 stages,
the benchmark's tutorial matmul) the copies of 16 KiB an iteration (128x128x64) ran 977 -> 862 TFLOP/s through
TMA, where 24 KiB (128x256x64) ran 902 -> 1014 and 48 KiB (128x256x128) held (1234 -> 1250); fp16's 32 KiB
(128x128x64) ran 1.00-1.21x Triton through TMA, against 0.95-1.02x through cp.async."""

Monomial = tuple[int, ...]  # the numbers of its scalar factors, sorted, repeated for powers


class Poly:
    """A sum of integer multiples of products of scalar values, keyed by the values' numbers in `Tiles`."""

    __slots__ = ("terms",)

    def __init__(self, terms: dict[Monomial, int] | None = None) -> None:
        self.terms = {m: c for m, c in (terms or {}).items() if c}

    @staticmethod
    def const(c: int) -> Poly:
        return Poly({(): c})

    def __add__(self, other: Poly) -> Poly:
        terms = dict(self.terms)
        for m, c in other.terms.items():
            terms[m] = terms.get(m, 0) + c
        return Poly(terms)

    def __neg__(self) -> Poly:
        return Poly({m: -c for m, c in self.terms.items()})

    def __sub__(self, other: Poly) -> Poly:
        return self + -other

    def __mul__(self, other: Poly) -> Poly:
        out = Poly()
        for m1, c1 in self.terms.items():
            for m2, c2 in other.terms.items():
                out = out + Poly({tuple(sorted(m1 + m2)): c1 * c2})
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Poly) and self.terms == other.terms

    def __hash__(self) -> int:
        return hash(frozenset(self.terms.items()))

    def divided(self, n: int) -> Poly | None:
        """This over the positive constant `n`, when `n` divides every coefficient."""
        if any(c % n for c in self.terms.values()):
            return None
        return Poly({m: c // n for m, c in self.terms.items()})

    def constant(self) -> int | None:
        if not self.terms:
            return 0
        return self.terms.get(()) if list(self.terms) == [()] else None


@dataclass(frozen=True)
class Form:
    """An integer block `const + coef[0] * i + coef[1] * j` over the block's rows i and columns j."""

    const: Poly
    coef: tuple[Poly, Poly]

    def __add__(self, other: Form) -> Form:
        return Form(self.const + other.const, (self.coef[0] + other.coef[0], self.coef[1] + other.coef[1]))

    def __sub__(self, other: Form) -> Form:
        return Form(self.const - other.const, (self.coef[0] - other.coef[0], self.coef[1] - other.coef[1]))

    def scaled(self, p: Poly) -> Form:
        return Form(self.const * p, (self.coef[0] * p, self.coef[1] * p))

    def uniform(self) -> bool:
        return not self.coef[0].terms and not self.coef[1].terms


Dims = tuple[int | None, ...]  # the block dimension each dimension of a value spans (None: size 1)


def _uniform(p: Poly) -> Form:
    return Form(p, (Poly(), Poly()))


class Tiles:
    """The affine forms of one kernel's integer and pointer blocks (2-D loads' views of them)."""

    def __init__(self, fn: Function, attrs: dict[str, Any]) -> None:
        self.fn = fn
        self.ones = {fn.args[i] for i in attrs.get("equal_to_1", []) or []}
        self.positive = {fn.args[i] for i in attrs.get("positive", []) or []}
        self.number: dict[Value, int] = {}
        self.loop_of: dict[Block, Op] = {}
        for v in fn.args:
            self.number[v] = len(self.number)
        for op in fn.walk():
            for region in op.regions:
                if op.name == "for":
                    self.loop_of[region] = op
                for v in region.args:
                    self.number[v] = len(self.number)
            for v in op.results:
                self.number[v] = len(self.number)
        self.leaf = {n: v for v, n in self.number.items()}
        self.memo: dict[tuple[Value, Dims], Any] = {}

    def scalar(self, v: Value) -> Poly | None:
        """`v`, a signed int32 scalar, as a polynomial of scalars."""
        if not (isinstance(v.type, ScalarType) and v.type == int32):
            return None
        if v in self.ones:
            return Poly.const(1)
        owner = v.owner
        if isinstance(owner, Op):
            value = constant_value(v)
            if isinstance(value, int) and not isinstance(value, bool):
                return Poly.const(value)
            if owner.name in ("add", "sub", "mul"):
                x, y = (self.scalar(a) for a in owner.operands)
                if x is not None and y is not None:
                    return x + y if owner.name == "add" else x - y if owner.name == "sub" else x * y
        return Poly({(self.number[v],): 1})

    def form(self, v: Value, dims: Dims) -> Form | None:
        """The integer block `v` (viewed through `dims`) as a `Form`."""
        key = (v, dims)
        if key not in self.memo:
            self.memo[key] = self._form(v, dims)
        found = self.memo[key]
        return found if isinstance(found, Form) else None

    def _form(self, v: Value, dims: Dims) -> Form | None:
        if isinstance(v.type, ScalarType):
            p = self.scalar(v)
            return None if p is None else _uniform(p)
        if not (isinstance(v.type, TileType) and v.type.element_ty == int32):
            return None
        owner = v.owner
        if isinstance(owner, Block):
            return self._carried(v, dims, "add")
        if not isinstance(owner, Op):
            return None
        value = constant_value(v)
        if isinstance(value, int) and not isinstance(value, bool):
            return _uniform(Poly.const(value))
        name, args = owner.name, owner.operands
        if name == "arange":
            start = Poly.const(owner.attrs["start"])
            unit = (Poly.const(1) if dims[0] == 0 else Poly(), Poly.const(1) if dims[0] == 1 else Poly())
            return Form(start, unit)
        if name == "splat":
            return self.form(args[0], ())
        if name in ("add", "sub", "mul"):
            x, y = (self.form(a, dims) for a in args)
            if x is None or y is None:
                return None
            if name != "mul":
                return x + y if name == "add" else x - y
            return x.scaled(y.const) if y.uniform() else y.scaled(x.const) if x.uniform() else None
        return self._view(v, dims, self.form)

    def _view(self, v: Value, dims: Dims, of: Any) -> Any:
        """`of` of the operand of `expand_dims` or `broadcast` `v`, through the dimensions it keeps."""
        owner = v.owner
        assert isinstance(owner, Op)
        if owner.name == "expand_dims":
            axis = owner.attrs["axis"]
            return of(owner.operands[0], dims[:axis] + dims[axis + 1 :])
        if owner.name == "broadcast":
            inner = shape_of(owner.operands[0].type)
            outer = shape_of(v.type)
            return of(owner.operands[0], tuple(d if inner[k] == outer[k] else None for k, d in enumerate(dims)))
        return None

    def pointers(self, v: Value, dims: Dims) -> tuple[Value, Form] | None:
        """The pointer block `v` as (a pointer parameter, the `Form` of the element offsets from it)."""
        key = (v, dims)
        if key not in self.memo:
            self.memo[key] = self._pointers(v, dims)
        return self.memo[key]

    def _pointers(self, v: Value, dims: Dims) -> tuple[Value, Form] | None:
        owner = v.owner
        if owner is self.fn.body:
            return v, _uniform(Poly())
        if isinstance(owner, Block):
            return self._carried(v, dims, "addptr")
        if owner is None or not isinstance(owner, Op):
            return None
        if owner.name == "splat":
            return self.pointers(owner.operands[0], ())
        if owner.name == "addptr":
            found, offset = self.pointers(owner.operands[0], dims), self.form(owner.operands[1], dims)
            return None if found is None or offset is None else (found[0], found[1] + offset)
        return self._view(v, dims, self.pointers)

    def _carried(self, v: Value, dims: Dims, step_op: str) -> Any:
        """A value loop `L` carries, stepped by a loop-invariant scalar `s` an iteration (`step_op` of it and
        `s`): its initial value plus `(iv - lo) * (s / L's step)`."""
        block = v.owner
        assert isinstance(block, Block)
        loop = self.loop_of.get(block)
        if loop is None or v.index == 0:
            return None
        stepped = block.ops[-1].operands[v.index - 1].owner
        if not isinstance(stepped, Op) or stepped.name != step_op or v not in stepped.operands:
            return None
        by = stepped.operands[1] if stepped.operands[0] is v else stepped.operands[0]
        step, lo = constant_value(loop.operands[2]), self.scalar(loop.operands[0])
        inc = self.form(by, dims)
        if inc is None or not inc.uniform() or lo is None or not isinstance(step, int) or step <= 0:
            return None
        per = inc.const.divided(step)
        inside = defined_in(loop)
        if per is None or any(self.leaf[n] in inside for m in per.terms for n in m):
            return None
        moved = _uniform((Poly({(self.number[block.args[0]],): 1}) - lo) * per)
        init = loop.operands[3 + v.index - 1]
        if step_op == "addptr":
            pointers = self.pointers(init, dims)
            return None if pointers is None else (pointers[0], pointers[1] + moved)
        start = self.form(init, dims)
        return None if start is None else start + moved

    def bounds(self, mask: Value, dims: Dims) -> list[Form] | None:
        """The mask block as the conjunction of `form < 0` over the returned forms, or None."""
        owner = mask.owner
        value = constant_value(mask)
        if value is True:
            return []
        if not isinstance(owner, Op):
            return None
        if owner.name == "and":
            x, y = (self.bounds(a, dims) for a in owner.operands)
            return None if x is None or y is None else x + y
        if owner.name == "splat":
            return self.bounds(owner.operands[0], ())
        if owner.name == "cmp" and owner.attrs["pred"] in ("lt", "le", "gt", "ge"):
            fx, fy = (self.form(a, dims) for a in owner.operands)
            if fx is None or fy is None:
                return None
            pred = owner.attrs["pred"]
            diff = fx - fy if pred in ("lt", "le") else fy - fx
            return [diff + _uniform(Poly.const(1))] if pred in ("le", "ge") else [diff]
        return self._view(mask, dims, self.bounds)

    def nonnegative(self, p: Poly) -> bool:
        """Whether every value `p` takes is provably >= 0 (a sum of non-negative products)."""
        return all(c > 0 and all(self._nonnegative_leaf(self.leaf[n]) for n in m) for m, c in p.terms.items())

    def _nonnegative_leaf(self, v: Value) -> bool:
        owner = v.owner
        if isinstance(owner, Block):
            loop = self.loop_of.get(owner)
            step = constant_value(loop.operands[2]) if loop is not None else None
            lo = self.scalar(loop.operands[0]) if loop is not None else None
            return v.index == 0 and isinstance(step, int) and step > 0 and lo is not None and self.nonnegative(lo)
        return _multiple(v, 1)


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


def _emit_poly(emit: Emitter, tiles: Tiles, p: Poly) -> Value:
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
    starts = [_emit_poly(emit, tiles, s) for s in tile.starts]
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
    users: dict[Value, list[Op]] = {}
    for o in fn.walk():
        for v in o.operands:
            users.setdefault(v, []).append(o)
    found: dict[Op, list[Op]] = {}  # a load -> the ops that replace it
    loop_of: dict[Op, Op] = {}  # a load -> its innermost loop

    def visit(b: Block, loop: Op | None) -> None:
        for op in b.ops:
            for region in op.regions:
                visit(region, op if op.name == "for" else loop)
            if loop is not None and op.name == "load" and _feeds_wgmma(op, users, fn, num_warps):
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
    users: dict[Value, list[Op]] = {}
    for o in fn.walk():
        for v in o.operands:
            users.setdefault(v, []).append(o)
    for loop in [o for o in fn.walk() if o.name == "for"]:
        body = loop.regions[0]
        dead = [k for k in range(len(loop.results)) if _dead(body, k, users) and not users.get(loop.results[k])]
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


def _dead(body: Block, k: int, users: dict[Value, list[Op]]) -> bool:
    """Whether carried value `k` of the loop with body `body` is read only by pure ops of the body whose
    results only each other and the yield's operand `k` read (its step)."""
    arg, yield_op = body.args[k + 1], body.ops[-1]
    reach: set[Value] = {arg}
    work = [arg]
    while work:
        for op in users.get(work.pop(), []):
            if op is yield_op:
                continue
            if op.regions or has_side_effects(op) or op not in body.ops:
                return False
            fresh = [r for r in op.results if r not in reach]
            reach.update(fresh)
            work.extend(fresh)
    return [i for i, v in enumerate(yield_op.operands) if v in reach] == [k]
