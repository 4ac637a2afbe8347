"""Rows past a matrix's edge that nothing stores: where a loop's loads read rows that wrap (`x % M`,
`tl.where(x < M, x, 0)`, x = c + tl.arange(0, B)) only to compute elements that masked stores then drop, those
loads may read what they like at the rows x >= M. `wrap_versions` then reads x itself there, masked `x < M`:
TMA copies the tiles at the matrix's edge too, filling zeros past it, where they had stayed on cp.async.

Tutorial 09's persistent pointer kernel is the case:

    offs_am = tl.where(offs_am < M, offs_am, 0)           # rows past M read row 0
    ...  a = tl.load(a_ptr + offs_am[:, None] * stride_am + ...);  acc = tl.dot(a, b, acc)
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)       # pid_m computed again, from a count of tiles
    tl.store(c_ptrs, acc.to(tl.float16), mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))

`masked_loads` follows the wrapped rows forward, each value they reach with the dimensions along which its
elements at rows x >= M may differ when the loads read other rows there (its element i along such a dimension
depends on the rows' element i alone):
- an elementwise op: the union of its operands' (an `expand_dims` or `trans` moves them, a `broadcast` keeps
  them);
- a load whose pointers they reach along one dimension: its value, along it (the load is masked there);
- `dot`: A's rows are the product's rows, B's columns its columns, the accumulator's its own (along K, A's
  columns or B's rows, every element of the product would differ: refused);
- a reduction or scan along another dimension: its results, along what is left of them (along theirs: refused);
- a value a loop carries, for a loop inside the wrap's block (the same rows at each of its iterations): its
  argument and result;
- a store's pointers or value (1-D or 2-D): its mask must be a conjunction with `c' + i < M'` along that
  dimension (`<=` read as `< M' + 1`), c' and M' the same polynomials as c and M (their factors compared by
  `Same`), so that it stores no element of a row x >= M. Each side apart: equal modulo 2^32, they are the same
  int32 values, where `c' - M'` alone would let `(cm + d) < (M + d)` through, which overflow makes another test.
Whatever else reads them (a mask, a loop's bounds, a reduction along them, an `if`, the loop over the program's
tiles that carries them from one tile to the next) refuses: the rows must then not wrap, as before.

`Same` compares two values as computations: the same op of the same operands, through constants and the grid's
indices, and a count a loop carries stepped as its induction variable is (tutorial 09's `tile_id_c`, which
starts a step before the loop and takes the step before it is read) the same as that variable. The comparison
is over int32 values; `wrap_versions` versions on `c < M <= 2^31 - B`, where c + i does not overflow.
"""

from __future__ import annotations

from ...ir.core import Block, Op, Value
from ...ir.ops import ANY_UNARY, ARITH_BINARY, FLOAT_BINARY, FLOAT_UNARY, INT_BINARY
from ...ir.types import TileType, shape_of
from ...passes.rewrite import constant_value
from .affine import HINTS, Form, Poly, Tiles

ELEMENTWISE = frozenset((*FLOAT_UNARY, *ANY_UNARY, *ARITH_BINARY, *FLOAT_BINARY, *INT_BINARY, *HINTS, "not", "cmp",
                         "select", "fma", "cast", "bitcast", "addptr"))
"""Ops whose element i of the result reads element i of each operand alone (scalars splat)."""
_COMPUTED = ELEMENTWISE | {"splat", "broadcast", "expand_dims", "arange", "constant", "program_id", "num_programs"}
"""Ops that `Same` compares by their operands: what they compute depends on nothing else."""


class Same:
    """Whether two int32 values of a kernel are equal wherever both are computed (module docstring)."""

    def __init__(self, tiles: Tiles) -> None:
        self.tiles = tiles
        self.memo: dict[tuple[Value, Value], bool] = {}

    def __call__(self, a: Value, b: Value) -> bool:
        if a is b:
            return True
        key = (a, b)
        if key not in self.memo:
            self.memo[key] = False  # a cycle through a loop's arguments proves nothing
            self.memo[key] = self._same(a, b)
        return self.memo[key]

    def _same(self, a: Value, b: Value) -> bool:
        if a.type != b.type:
            return False
        if constant_value(a) is not None or constant_value(b) is not None:
            return constant_value(a) == constant_value(b)
        x, y = a.owner, b.owner
        if isinstance(x, Op) and isinstance(y, Op) and x.name == y.name and x.name in _COMPUTED:
            return (a.index == b.index and x.attrs == y.attrs and len(x.operands) == len(y.operands)
                    and all(self(u, v) for u, v in zip(x.operands, y.operands)))
        return self._counts(a, b) or self._counts(b, a)

    def _counts(self, count: Value, iv: Value) -> bool:
        """Whether `count` is `arg + s` of a value `arg` a loop carries, whose induction variable is `iv`, stepped
        by `s` each iteration from `lo - s`, where the loop runs from `lo` by `s`: the count at each iteration is
        `iv` (it steps where it is read, the yield takes it)."""
        loop_body = iv.owner
        step_op = count.owner
        if not isinstance(loop_body, Block) or iv.index != 0 or not isinstance(step_op, Op) or step_op.name != "add":
            return False
        loop = self.tiles.loop_of.get(loop_body)
        if loop is None:
            return False
        for arg, by in (step_op.operands, step_op.operands[::-1]):
            if arg.owner is not loop_body or arg.index == 0 or loop_body.ops[-1].operands[arg.index - 1] is not count:
                continue
            s, step = self.tiles.scalar(by), self.tiles.scalar(loop.operands[2])
            init, lo = self.tiles.scalar(loop.operands[3 + arg.index - 1]), self.tiles.scalar(loop.operands[0])
            if None not in (s, step, init, lo) and s == step and init + s == lo:  # type: ignore[operator]
                return True
        return False

    def poly(self, p: Poly, like: Poly) -> Poly:
        """`p` with each factor that is the same as one of `like`'s (`__call__`) replaced by that one."""
        leaf = self.tiles.leaf
        theirs = sorted({n for m in like.terms for n in m})
        out = Poly()
        for m, c in p.terms.items():
            mapped = [next((t for t in theirs if self(leaf[n], leaf[t])), n) for n in m]
            out = out + Poly({tuple(sorted(mapped)): c})
        return out


def masked_loads(readers: dict[Value, list[Op]], tiles: Tiles, block: Block, wrap: Op, c: Poly,
                 m: Poly) -> dict[Op, int] | None:
    """The loads whose pointers the rows `wrap` computes (c + tl.arange(0, B), wrapped around M = m; in `block`)
    reach, each with the dimension of its block they reach it along, where no store keeps an element that
    depends on what those loads read at rows x >= M (module docstring); else None. `readers`: `rewrite.users` of
    the kernel."""
    loops = {op for op in block.walk() if op.name == "for"}
    yields = {loop.regions[0].ops[-1]: loop for loop in loops}
    along: dict[Value, set[int]] = {wrap.result: {0}}
    loads: dict[Op, int] = {}
    stores: dict[Op, set[int]] = {}
    work = [wrap.result]

    def reach(v: Value, dims: set[int]) -> None:
        have = along.setdefault(v, set())
        if not dims <= have:
            have |= dims
            work.append(v)

    while work:
        v = work.pop()
        dims = along[v]
        for op in readers.get(v, []):
            at = [i for i, u in enumerate(op.operands) if u is v]
            if op.name in ELEMENTWISE:
                if any(isinstance(u.type, TileType) and shape_of(u.type) != shape_of(op.result.type) for u in op.operands):
                    return None
                reach(op.result, dims)
            elif op.name == "expand_dims":
                axis = op.attrs["axis"]
                reach(op.result, {d + (d >= axis) for d in dims})
            elif op.name == "broadcast":
                reach(op.result, dims)
            elif op.name == "trans":
                perm = op.attrs["perm"]
                reach(op.result, {perm.index(d) for d in dims})
            elif op.name in ("reduce", "scan") and op.attrs["axis"] not in dims:
                axis = op.attrs["axis"]
                for result in op.results:
                    reach(result, {d - (d > axis) for d in dims} if op.name == "reduce" else dims)
            elif op.name == "load" and at == [0] and len(shape_of(op.result.type)) == 2 and len(dims) == 1:
                (d,) = dims
                if loads.setdefault(op, d) != d:
                    return None
                reach(op.result, dims)
            elif op.name == "dot" and len(shape_of(op.result.type)) == 2:
                if 0 in at and dims != {0} or 1 in at and dims != {1}:
                    return None  # along K: every element of the product
                reach(op.result, dims)
            elif op.name == "for" and op in loops and min(at) >= 3:
                for i in at:
                    reach(op.regions[0].args[i - 2], dims)
                    reach(op.results[i - 3], dims)
            elif op.name == "yield" and op in yields:
                for i in at:
                    reach(yields[op].regions[0].args[i + 1], dims)
                    reach(yields[op].results[i], dims)
            elif op.name == "store" and 2 not in at and len(shape_of(op.operands[0].type)) in (1, 2):
                stores.setdefault(op, set()).update(dims)
            else:
                return None
    same = Same(tiles)
    for op, dims in stores.items():
        rank = len(shape_of(op.operands[0].type))
        pairs = tiles.comparisons(op.operands[2], (0, 1)[:rank]) if len(op.operands) == 3 else None
        if pairs is None or not all(any(_rows_below(same, lhs, rhs, d, c, m) for lhs, rhs in pairs) for d in dims):
            return None
    return loads


def _rows_below(same: Same, lhs: Form, rhs: Form, d: int, c: Poly, m: Poly) -> bool:
    """Whether the mask's conjunct `lhs < rhs` is `c' + i < M'` along dimension `d`, c' the same as c and M' as
    M."""
    unit, zero = Poly.const(1), Poly()
    rows = lhs.coef[d] == unit and lhs.coef[1 - d] == zero and rhs.uniform()
    return rows and same.poly(lhs.const, c) == c and same.poly(rhs.const, m) == m
