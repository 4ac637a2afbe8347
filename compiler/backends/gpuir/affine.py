"""Integer and pointer blocks as affine forms over a 2-D block's rows i and columns j: `const + a0 * i + a1 * j`,
with `const`, `a0` and `a1` polynomials of the kernel's scalars (`Poly`: program ids, parameters, constants,
loop induction variables, other scalar values as they are), seen through the hints `tl.multiple_of` and the like.
What `pointer_tiles.py` proves a load's pointers and mask to be.

- `Tiles.pointers(v, dims)`: a pointer block as (a pointer parameter, the `Form` of its offsets). A pointer a
  loop carries and steps by a loop-invariant scalar `s` an iteration is its initial value plus
  `(iv - lo) / step * s`, when the loop's step is a positive constant that divides `s`; an integer block
  likewise (`Tiles.form`).
- `Tiles.bounds(mask, dims)`: a mask as a conjunction of `form < 0` (`<`, `<=`, `>`, `>=` either way round);
  `Tiles.comparisons`, of `lhs < rhs`, each side as written.
- `Tiles.nonnegative(p)`: sums of products of non-negative constants, program ids, induction variables of
  loops from a non-negative start by a positive constant step, values loops carry from and to such values,
  and what `tma.multiple_of` proves.

`dims` says which block dimension each dimension of a value spans (None where it has size 1), through the
`expand_dims` and `broadcast` that shaped it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...ir.core import Block, Function, Op, Value
from ...ir.types import ScalarType, TileType, int32, shape_of
from ...passes.flatten import defined_in
from ...passes.rewrite import constant_value
from .tma import multiple_of

HINTS = ("multiple_of", "max_contiguous", "max_constancy")  # the value itself, with what the user says it is
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


def uniform(p: Poly) -> Form:
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
        self.scalars: dict[Value, Poly | None] = {}
        self.assumed: set[tuple[Value, int]] = set()  # carried values being proved multiples, as they step

    def scalar(self, v: Value) -> Poly | None:
        """`v`, a signed int32 scalar, as a polynomial of scalars (each value's once: a sum of a value and itself
        reads it twice, and a chain of them doubles its reads at each step)."""
        if v not in self.scalars:
            self.scalars[v] = self._scalar(v)
        return self.scalars[v]

    def _scalar(self, v: Value) -> Poly | None:
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
            return None if p is None else uniform(p)
        if not (isinstance(v.type, TileType) and v.type.element_ty == int32):
            return None
        owner = v.owner
        if isinstance(owner, Block):
            return self._carried(v, dims, "add")
        if not isinstance(owner, Op):
            return None
        value = constant_value(v)
        if isinstance(value, int) and not isinstance(value, bool):
            return uniform(Poly.const(value))
        name, args = owner.name, owner.operands
        if name == "arange":
            start = Poly.const(owner.attrs["start"])
            unit = (Poly.const(1) if dims[0] == 0 else Poly(), Poly.const(1) if dims[0] == 1 else Poly())
            return Form(start, unit)
        if name == "splat":
            return self.form(args[0], ())
        if name in HINTS:
            return self.form(args[0], dims)
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
            return v, uniform(Poly())
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
        moved = uniform((Poly({(self.number[block.args[0]],): 1}) - lo) * per)
        init = loop.operands[3 + v.index - 1]
        if step_op == "addptr":
            pointers = self.pointers(init, dims)
            return None if pointers is None else (pointers[0], pointers[1] + moved)
        start = self.form(init, dims)
        return None if start is None else start + moved

    def bounds(self, mask: Value, dims: Dims) -> list[Form] | None:
        """The mask block as the conjunction of `form < 0` over the returned forms, or None."""
        pairs = self.comparisons(mask, dims)
        return None if pairs is None else [lhs - rhs for lhs, rhs in pairs]

    def comparisons(self, mask: Value, dims: Dims) -> list[tuple[Form, Form]] | None:
        """The mask block as the conjunction of `lhs < rhs` over the returned pairs (integers: `a <= b` is
        `a < b + 1`, `a > b` is `b < a`), or None."""
        owner = mask.owner
        value = constant_value(mask)
        if value is True:
            return []
        if not isinstance(owner, Op):
            return None
        if owner.name == "and":
            x, y = (self.comparisons(a, dims) for a in owner.operands)
            return None if x is None or y is None else x + y
        if owner.name == "splat":
            return self.comparisons(owner.operands[0], ())
        if owner.name == "cmp" and owner.attrs["pred"] in ("lt", "le", "gt", "ge"):
            fx, fy = (self.form(a, dims) for a in owner.operands)
            if fx is None or fy is None:
                return None
            pred = owner.attrs["pred"]
            lhs, rhs = (fx, fy) if pred in ("lt", "le") else (fy, fx)
            return [(lhs, rhs + uniform(Poly.const(1)))] if pred in ("le", "ge") else [(lhs, rhs)]
        return self._view(mask, dims, self.comparisons)

    def nonnegative(self, p: Poly) -> bool:
        """Whether every value `p` takes is provably >= 0 (a sum of non-negative products)."""
        return all(c > 0 and all(self._nonnegative_leaf(self.leaf[n]) for n in m) for m, c in p.terms.items())

    def _nonnegative_leaf(self, v: Value) -> bool:
        return multiple_of(v, 1, carried=self._carried_multiple)

    def _carried_multiple(self, v: Value, n: int, depth: int) -> bool:
        """`tma.multiple_of` of a block argument `v`: a loop's induction variable (n == 1) from a non-negative
        start by a positive constant step; a value a loop carries whose initial value and every step are such
        multiples, given that it is one (a flattened loop's tile starts and K index, which `if`s and selects
        compute again or keep)."""
        block = v.owner
        assert isinstance(block, Block)
        loop = self.loop_of.get(block)
        if loop is None:
            return False
        if v.index == 0:
            step, lo = constant_value(loop.operands[2]), self.scalar(loop.operands[0])
            return n == 1 and isinstance(step, int) and step > 0 and lo is not None and self.nonnegative(lo)
        if (v, n) in self.assumed:
            return True
        self.assumed.add((v, n))
        try:
            init, step = loop.operands[3 + v.index - 1], block.ops[-1].operands[v.index - 1]
            return all(multiple_of(x, n, depth, self._carried_multiple) for x in (init, step))
        finally:
            self.assumed.discard((v, n))
