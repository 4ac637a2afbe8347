"""Hypothesis strategies for random well-typed modules, built through `builder.Builder`.

`modules()` draws a module of a kernel and a few helpers that call each other (never
recursively): constants of every scalar type, grid indices, arange, shape ops, elementwise and
comparison ops, casts, pointer arithmetic with masked loads and stores, atomics, dot, and
for/if/while/reduce/scan with nested regions. Every module it draws passes `verify`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import strategies as st

from despina.compiler.ir import ops, ops_memory
from despina.compiler.ir.builder import Builder
from despina.compiler.ir.core import Block, Function, Loc, Module, Op, Value
from despina.compiler.ir.types import (
    SCALAR_NAMES,
    PointerType,
    ScalarType,
    TileType,
    Type,
    elem_of,
    float32,
    int1,
    int32,
    int64,
    shape_of,
    with_elem,
    with_shape,
)
from despina.compiler.ir.verifier import NAME, SYMBOL

SCALARS = [ScalarType(n) for n in SCALAR_NAMES]
FLOATS = [t for t in SCALARS if t.is_floating()]
ARITH = [t for t in SCALARS if not t.is_fp8()]  # what arithmetic, constants, atomics and kernel scalars take
INTS = [t for t in SCALARS if t.is_int()]
SHAPES: list[tuple[int, ...]] = [(1,), (2,), (4,), (8,), (2, 2), (1, 4), (4, 1), (2, 4), (4, 2), (2, 2, 2), (1, 2, 4)]
GROW_LIMIT = 64  # ops that make a tile larger take tiles of at most this many elements

names = st.from_regex(NAME, fullmatch=True).filter(lambda s: len(s) <= 12)
# Function names: GPU symbols ("__nv_" and "__despina" are taken, so none starts with "__").
symbols = st.from_regex(SYMBOL, fullmatch=True).filter(lambda s: len(s) <= 12 and not s.startswith("__"))
locs = st.builds(Loc, st.text(max_size=12), st.integers(0, 10**6), st.integers(0, 300))


def scalar_values(t: ScalarType) -> st.SearchStrategy[Any]:
    """Values a `constant` of element type `t` may hold."""
    if t.is_bool():
        return st.booleans()
    if t.is_floating():
        return st.one_of(st.floats(), st.integers(-1000, 1000))
    bits = t.primitive_bitwidth
    if t.is_int_signed():
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return st.integers(0, 2**bits - 1)


def types(tiles: bool = True) -> st.SearchStrategy[Type]:
    """Scalar, pointer and (if `tiles`) small tile types."""
    elems: st.SearchStrategy[Any] = st.one_of(st.sampled_from(SCALARS), st.sampled_from(SCALARS).map(PointerType))
    if not tiles:
        return elems
    return st.one_of(elems, st.builds(TileType, st.sampled_from(SHAPES), elems))


def attr_values(depth: int = 3) -> st.SearchStrategy[Any]:
    """Attribute values of every kind, lists nested up to `depth`."""
    base = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**64 - 1),
        st.floats(),
        st.text(max_size=8),
        types(),
    )
    if depth == 0:
        return base
    return st.one_of(base, st.lists(attr_values(depth - 1), max_size=3))


class _Gen:
    """Appends random well-typed ops through a Builder, tracking which values are in scope."""

    def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any], callees: Sequence[Function], with_locs: bool):
        self.draw = draw
        self.b = Builder()
        self.scopes: list[list[Value]] = []
        self.callees = list(callees)
        self.with_locs = with_locs

    # ---- helpers --------------------------------------------------------------------------

    def choice(self, seq: Sequence[Any]) -> Any:
        return self.draw(st.sampled_from(list(seq)))

    def flip(self) -> bool:
        return bool(self.draw(st.booleans()))

    def visible(self, pred: Callable[[Value], bool] = lambda v: True) -> list[Value]:
        return [v for scope in self.scopes for v in scope if pred(v)]

    def pick(self, pred: Callable[[Value], bool]) -> Value | None:
        have = self.visible(pred)
        return self.choice(have) if have else None

    def emit(
        self,
        name: str,
        operands: Sequence[Value] = (),
        attrs: dict[str, Any] | None = None,
        regions: Sequence[Block] = (),
    ) -> Op:
        self.b.loc = self.draw(locs) if self.with_locs and self.flip() else None
        op = self.b.create(name, operands, attrs, regions)
        self.scopes[-1].extend(op.results)
        return op

    def const(self, ty: Type) -> Value:
        elem = elem_of(ty)
        assert isinstance(elem, ScalarType)
        if elem.is_fp8():  # the IR has no fp8 constants: an fp32 one, cast
            return self.emit("cast", [self.const(with_elem(ty, float32))], {"to": elem}).result
        return self.emit("constant", [], {"value": self.draw(scalar_values(elem)), "type": ty}).result

    def value_of(self, ty: Type) -> Value:
        """A value of type `ty`: one in scope, or a new constant (`ty` must then have scalar elements)."""
        have = self.visible(lambda v: v.type == ty)
        if have and (not isinstance(elem_of(ty), ScalarType) or self.flip()):
            return self.choice(have)
        return self.const(ty)

    def ops(self, depth: int, max_ops: int) -> None:
        for _ in range(self.draw(st.integers(0, max_ops))):
            gens = self.flat_ops + (self.region_ops if depth < 2 else [])
            while not self.choice(gens)(self, depth):
                pass

    def region(self, arg_types: Sequence[Type], depth: int, finish: Callable[[Block], None]) -> Block:
        block = Block(arg_types)
        self.scopes.append(list(block.args))
        with self.b.at(block):
            self.ops(depth + 1, 4)
            finish(block)
        self.scopes.pop()
        return block

    def yields(self, tys: Sequence[Type]) -> Callable[[Block], None]:
        def finish(block: Block) -> None:
            self.emit("yield", [self.value_of(t) for t in tys])

        return finish

    def maybe_mask(self, ptr: Value) -> list[Value]:
        return [self.value_of(with_shape(int1, shape_of(ptr.type)))] if self.flip() else []

    # ---- ops without regions: each returns False when nothing in scope fits ----------------

    def g_constant(self, depth: int) -> bool:
        elem = self.choice(ARITH)
        self.const(self.choice([elem, TileType(self.choice(SHAPES), elem)]))
        return True

    def g_grid(self, depth: int) -> bool:
        self.emit(self.choice(["program_id", "num_programs"]), [], {"axis": self.draw(st.integers(0, 2))})
        return True

    def g_arange(self, depth: int) -> bool:
        start = self.draw(st.integers(0, 8))
        self.emit("arange", [], {"start": start, "end": start + self.choice([1, 2, 4, 8, 16])})
        return True

    def g_splat(self, depth: int) -> bool:
        v = self.pick(lambda v: not isinstance(v.type, TileType))
        if v is None:
            return False
        self.emit("splat", [v], {"shape": list(self.choice(SHAPES))})
        return True

    def g_broadcast(self, depth: int) -> bool:
        v = self.pick(lambda v: isinstance(v.type, TileType) and 1 in v.type.shape and v.type.numel <= GROW_LIMIT)
        if v is None:
            return False
        shape = [d if d != 1 else self.choice([1, 2, 4]) for d in shape_of(v.type)]
        self.emit("broadcast", [v], {"shape": shape})
        return True

    def g_expand_dims(self, depth: int) -> bool:
        v = self.pick(lambda v: len(shape_of(v.type)) < 3)
        if v is None:
            return False
        self.emit("expand_dims", [v], {"axis": self.draw(st.integers(0, len(shape_of(v.type))))})
        return True

    def g_reshape(self, depth: int) -> bool:
        v = self.pick(lambda v: isinstance(v.type, TileType))
        if v is None:
            return False
        n = v.type.numel
        first = self.choice([d for d in range(1, n + 1) if n % d == 0])
        attrs: dict[str, Any] = {"shape": self.choice([[n], [first, n // first]])}
        if self.flip():
            attrs["can_reorder"] = self.flip()
        self.emit("reshape", [v], attrs)
        return True

    def g_trans(self, depth: int) -> bool:
        v = self.pick(lambda v: isinstance(v.type, TileType))
        if v is None:
            return False
        self.emit("trans", [v], {"perm": self.draw(st.permutations(range(len(shape_of(v.type)))))})
        return True

    def g_cat_join_split(self, depth: int) -> bool:
        v = self.pick(
            lambda v: isinstance(elem_of(v.type), ScalarType) and len(shape_of(v.type)) < 3 and _numel(v) <= GROW_LIMIT
        )
        if v is None:
            return False
        if shape_of(v.type)[-1:] == (2,) and self.flip():
            self.emit("split", [v])
        elif isinstance(v.type, TileType) and self.flip():
            self.emit("cat", [v, self.value_of(v.type)])
        else:
            self.emit("join", [v, self.value_of(v.type)])
        return True

    def g_gather_histogram(self, depth: int) -> bool:
        v = self.pick(lambda v: isinstance(elem_of(v.type), ScalarType) and isinstance(v.type, TileType))
        if v is None:
            return False
        shape = shape_of(v.type)
        if len(shape) == 1 and elem_of(v.type).is_int() and self.flip():
            mask = [self.value_of(TileType(shape, int1))] if self.flip() else []
            self.emit("histogram", [v, *mask], {"num_bins": self.draw(st.integers(1, 64))})
        else:
            index = self.value_of(TileType(shape, self.choice([int32, int64])))
            self.emit("gather", [v, index], {"axis": self.draw(st.integers(0, len(shape) - 1))})
        return True

    def g_extern(self, depth: int) -> bool:
        v = self.arith_operand()
        if v is None:
            return False
        result = self.choice([float32, int32, int64])
        if elem_of(v.type) != int1 and self.flip():
            attrs = {"asm": "mov.b32 $0, $1;", "constraints": "=r,r", "pure": self.flip(), "pack": self.choice([1, 4]),
                     "results": [result] * self.draw(st.integers(1, 2))}
            self.emit("inline_asm", [v], attrs)
            return True
        self.emit("extern_elementwise", [v, self.value_of(v.type)], {"symbol": self.choice(["__nv_powf", "__nv_x1"]),
                                                                      "result": result})
        return True

    def arith_operand(self) -> Value | None:
        """A value with scalar elements (not fp8), floating-point ones half of the time when there are some."""
        v = (
            self.pick(lambda v: elem_of(v.type) in FLOATS and elem_of(v.type) in ARITH)
            if self.flip()
            else None
        )
        return v or self.pick(lambda v: elem_of(v.type) in ARITH)

    def g_unary(self, depth: int) -> bool:
        v = self.arith_operand()
        if v is None:
            return False
        elem = elem_of(v.type)
        names = list(ops.ANY_UNARY) + (list(ops.FLOAT_UNARY) if elem.is_floating() else ["not"])
        self.emit(self.choice(names), [v])
        return True

    def g_binary(self, depth: int) -> bool:
        v = self.arith_operand()
        if v is None:
            return False
        elem = elem_of(v.type)
        names = list(ops.ARITH_BINARY) + list(ops.FLOAT_BINARY if elem.is_floating() else ops.INT_BINARY)
        name = self.choice([*names, "cmp", "cmp"] + (["fma"] if elem.is_floating() else []))
        attrs: dict[str, Any] = {}
        if name == "cmp":
            attrs["pred"] = self.choice(ops.CMP_PREDICATES)
        elif name in ("maximum", "minimum") and self.flip():
            attrs["propagate_nan"] = self.choice(ops.NAN_MODES)
        elif name == "fdiv" and self.flip():
            attrs["ieee_rounding"] = self.flip()
        operands = [v, self.value_of(v.type)] + ([self.value_of(v.type)] if name == "fma" else [])
        self.emit(name, operands, attrs)
        return True

    def g_select(self, depth: int) -> bool:
        v = self.pick(lambda v: True)
        if v is None:
            return False
        cond = self.value_of(with_shape(int1, shape_of(v.type)))
        self.emit("select", [cond, v, self.value_of(v.type) if isinstance(elem_of(v.type), ScalarType) else v])
        return True

    def g_cast(self, depth: int) -> bool:
        v = self.pick(lambda v: isinstance(elem_of(v.type), ScalarType))
        if v is None:
            return False
        elem = elem_of(v.type)
        if self.flip():
            same = [t for t in SCALARS if t.primitive_bitwidth == elem.primitive_bitwidth]
            self.emit("bitcast", [v], {"to": self.choice(same)})
        else:
            partners = [ScalarType(n) for n in ops.FP8_CAST_PARTNERS]
            to = self.choice(partners if elem.is_fp8() else SCALARS)
            if to.is_fp8() and elem not in partners:
                to = float32
            attrs: dict[str, Any] = {"to": to}
            if self.flip():
                attrs["rounding"] = self.choice(["rtne", None] if to.is_fp8() else ["rtne", "rtz", None])
            self.emit("cast", [v], attrs)
        return True

    def pointers(self) -> Value | None:
        return self.pick(
            lambda v: isinstance(elem_of(v.type), PointerType) and isinstance(elem_of(v.type).element_ty, ScalarType)
        )

    def g_addptr(self, depth: int) -> bool:
        p = self.pointers()
        if p is None:
            return False
        self.emit("addptr", [p, self.value_of(with_shape(self.choice([int32, int64]), shape_of(p.type)))])
        return True

    def g_load(self, depth: int) -> bool:
        p = self.pointers()
        if p is None:
            return False
        pointee = _pointee(p)
        operands = [p, *self.maybe_mask(p)]
        if len(operands) == 2 and self.flip():
            operands.append(self.value_of(pointee))
        attrs = {"cache": self.choice(["", ".ca", ".cg"]), "volatile": self.flip()} if self.flip() else {}
        self.emit("load", operands, attrs)
        return True

    def g_store(self, depth: int) -> bool:
        p = self.pointers()
        if p is None:
            return False
        value = self.value_of(_pointee(p))
        operands = [p, value, *self.maybe_mask(p)]
        self.emit("store", operands, {"evict": self.choice(["", "evict_last", None])} if self.flip() else {})
        return True

    def g_atomic(self, depth: int) -> bool:
        p = self.pointers()
        if p is None or elem_of(p.type).element_ty not in ARITH:
            return False
        value = self.value_of(_pointee(p))
        sem = {"sem": self.choice(ops_memory.MEM_SEMANTICS), "scope": self.choice(ops_memory.MEM_SCOPES)}
        if self.flip():
            self.emit("atomic_cas", [p, self.value_of(value.type), value], sem)
        else:
            self.emit("atomic_rmw", [p, value, *self.maybe_mask(p)], dict(sem, kind=self.choice(ops_memory.ATOMIC_KINDS)))
        return True

    def g_dot(self, depth: int) -> bool:
        m, n, k = (self.choice([1, 2, 4]) for _ in range(3))
        elem = self.choice([ScalarType("fp16"), ScalarType("fp32"), ScalarType("int8"), ScalarType("fp8e4nv")])
        acc = ScalarType("int32") if elem.is_int() else ScalarType("fp32")
        a, b = self.value_of(TileType((m, k), elem)), self.value_of(TileType((k, n), elem))
        attrs = {"input_precision": self.choice(["ieee", "tf32", None])} if self.flip() else {}
        self.emit("dot", [a, b, self.value_of(TileType((m, n), acc))], attrs)
        return True

    def g_misc(self, depth: int) -> bool:
        name = self.choice(
            ["multiple_of", "max_contiguous", "max_constancy", "assume", "device_assert", "device_print", "barrier"]
        )
        if name in ("multiple_of", "max_contiguous", "max_constancy"):
            v = self.pick(lambda v: isinstance(elem_of(v.type), ScalarType) and elem_of(v.type).is_int())
            if v is None:
                return False
            self.emit(name, [v], {"values": [self.choice([1, 2, 16])] * max(len(shape_of(v.type)), 1)})
        elif name in ("assume", "device_assert"):
            cond = self.value_of(with_shape(int1, self.choice([(), *SHAPES])))
            self.emit(name, [cond], {"msg": self.draw(st.text(max_size=8))} if name == "device_assert" else {})
        elif name == "device_print":
            shown = self.draw(st.lists(st.sampled_from(self.visible()), max_size=2)) if self.visible() else []
            self.emit(name, shown, {"prefix": self.draw(st.text(max_size=8)), "hex": self.flip()})
        else:
            self.emit(name)
        return True

    def g_call(self, depth: int) -> bool:
        if not self.callees:
            return False
        fn = self.choice(self.callees)
        have = {v.type for v in self.visible()}
        if any(not isinstance(elem_of(a.type), ScalarType) and a.type not in have for a in fn.args):
            return False
        self.emit(
            "call", [self.value_of(a.type) for a in fn.args], {"callee": fn.name, "results": list(fn.result_types)}
        )
        return True

    # ---- ops with regions -----------------------------------------------------------------

    def some_types(self) -> list[Type]:
        have = self.visible()
        return [v.type for v in self.draw(st.lists(st.sampled_from(have), max_size=2))] if have else []

    def g_for(self, depth: int) -> bool:
        bound = self.choice([int32, int64])
        lo, hi, step = (self.value_of(bound) for _ in range(3))
        carried = [self.value_of(t) for t in self.some_types()]
        body = self.region([bound] + [v.type for v in carried], depth, self.yields([v.type for v in carried]))
        attrs = {"num_stages": self.draw(st.integers(1, 4))} if self.flip() else {}
        self.emit("for", [lo, hi, step, *carried], attrs, [body])
        return True

    def g_if(self, depth: int) -> bool:
        cond = self.value_of(int1)
        tys = self.some_types()
        then, other = (self.region([], depth, self.yields(tys)) for _ in range(2))
        self.emit("if", [cond], {}, [then, other])
        return True

    def g_while(self, depth: int) -> bool:
        init = [self.value_of(t) for t in self.some_types()]
        init_types = [v.type for v in init]
        passed: list[Type] = []

        def condition(block: Block) -> None:
            passed.extend(self.some_types())
            self.emit("condition", [self.value_of(int1)] + [self.value_of(t) for t in passed])

        before = self.region(init_types, depth, condition)
        after = self.region(passed, depth, self.yields(init_types))
        self.emit("while", init, {}, [before, after])
        return True

    def g_combine(self, depth: int) -> bool:
        v = self.pick(lambda v: isinstance(v.type, TileType) and v.type.element_ty in ARITH)
        if v is None:
            return False
        shape = shape_of(v.type)
        operands = [v] + ([self.value_of(TileType(shape, self.choice(ARITH)))] if self.flip() else [])
        scalars = [elem_of(x.type) for x in operands]

        def combine(block: Block) -> None:
            n = len(scalars)
            self.emit(
                "yield",
                [
                    self.emit(self.choice(["add", "maximum"]), [block.args[i], block.args[n + i]]).result
                    for i in range(n)
                ],
            )

        region = self.region(scalars + scalars, depth, combine)
        name = self.choice(["reduce", "scan"])
        attrs: dict[str, Any] = {"axis": self.draw(st.integers(0, len(shape) - 1))}
        if name == "scan" and self.flip():
            attrs["reverse"] = self.flip()
        self.emit(name, operands, attrs, [region])
        return True

    flat_ops = [
        g_constant, g_grid, g_arange, g_splat, g_broadcast, g_expand_dims, g_reshape, g_trans, g_cat_join_split, g_gather_histogram, g_extern,
        g_unary, g_binary, g_select, g_cast, g_addptr, g_load, g_store, g_atomic, g_dot, g_misc, g_call,
    ]  # fmt: skip
    region_ops = [g_for, g_if, g_while, g_combine]

    # ---- functions ------------------------------------------------------------------------

    def function(
        self, name: str, arg_types: list[Type], result_types: list[Type], kernel: bool, max_ops: int
    ) -> Function:
        body = Block(arg_types)
        self.scopes = [list(body.args)]
        with self.b.at(body):
            self.ops(0, max_ops)
            self.emit("return", [self.value_of(t) for t in result_types])
        arg_names = self.draw(st.lists(st.text(max_size=6), min_size=len(arg_types), max_size=len(arg_types)))
        return Function(
            name, body, arg_names, result_types, kernel, self.draw(locs) if self.with_locs and self.flip() else None
        )


def _pointee(p: Value) -> Type:
    """The type `load` gives for pointer(s) `p`."""
    elem = elem_of(p.type)
    assert isinstance(elem, PointerType)
    return with_elem(p.type, elem.element_ty)


def _numel(v: Value) -> int:
    return v.type.numel if isinstance(v.type, TileType) else 1


@st.composite
def modules(
    draw: Callable[[st.SearchStrategy[Any]], Any], max_helpers: int = 2, max_ops: int = 10, with_locs: bool = True
) -> Module:
    """A random module that passes `verify`: helpers (each may call earlier ones) and a kernel."""
    functions: list[Function] = []
    prefix = draw(symbols)
    for i in range(draw(st.integers(0, max_helpers))):
        arg_types = draw(st.lists(types(), max_size=3))
        result_types = draw(st.lists(st.sampled_from(SCALARS + arg_types), max_size=2))
        gen = _Gen(draw, functions, with_locs)
        functions.append(gen.function(f"{prefix}_{i}", arg_types, result_types, False, max_ops))
    arg_types = draw(st.lists(st.sampled_from(SCALARS).map(PointerType), min_size=1, max_size=3))
    arg_types += draw(st.lists(st.sampled_from(ARITH), max_size=2))  # fp8 only through pointers
    functions.append(_Gen(draw, functions, with_locs).function(f"{prefix}_kernel", arg_types, [], True, max_ops))
    order = draw(st.permutations(functions))
    attrs = draw(st.dictionaries(names.filter(lambda s: s != "version"), attr_values(), max_size=3))
    return Module(list(order), attrs)
