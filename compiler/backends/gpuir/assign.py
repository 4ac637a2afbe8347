"""Layout assignment: tile IR -> GPU IR, every tile value given an encoding.

Encodings are unified over the ops that need equal layouts (elementwise ops, loads and stores,
loop-carried values, broadcasts), and related structurally where one layout derives from
another (`expand_dims` and `reduce`: a slice of the parent; `dot` operands: a dot operand of the
result's layout). Each resulting class takes the coalesced layout of its widest memory access,
else the default blocked layout. Where two uses disagree, a `convert_layout` op is inserted
before the later use; the lowering moves its data through shared memory.

Tensor-core dots are *anchors*: `accelerate.plan_dot` fixes the encodings of their result (with
the loop-carried accumulator) and operands. An anchored class never absorbs a class that a
memory access prefers: the epilogue's store gets a `convert_layout` from the accumulator's
layout to its own coalesced one instead of being dragged into the MMA layout. Conversions
between layouts that place every element alike are removed (`drop_trivial_converts`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import TYPE_CHECKING

from ...ir.core import Block, Function, Module, Op, Value
from ...ir.registry import OpRegistry
from ...ir.types import PointerType, TileType, elem_of, shape_of
from ...passes.descriptors import expand_descriptors
from ...passes.flatten import flatten_loops
from ...passes.rewrite import Subst, clone_function, replace_results, rewrite_block
from ...passes.unroll import unroll_loops
from ..errors import BackendError, op_error
from .accelerate import DotPlan, dot_feeds, plan_dot, upcast_fp8_dots
from .axis import AxisAnalysis
from .coalesce import private_addresses, private_leaves
from .combine import accumulate_dot_adds
from .defer import defer_dots
from .encodings import Blocked, DotOperand, Encoding, Slice, coalesced_blocked, default_blocked
from .linear import LinearLayout, log2, scalar_layout
from .mma import MmaOperand
from .ops import CONVERT
from .pointer_tiles import pointer_tiles
from .tma import plan_tensor_maps
from .wrap_versions import drop_idle_versions, version_wraps

if TYPE_CHECKING:
    from .pipeline import LoopPipeline

# How each op relates the layout classes of its operands and results: the `_Assigner` method of its rule.
RULES: OpRegistry[Callable[[_Assigner, Op], None]] = OpRegistry("layout assignment")
RULES.builtin("terminators: the op that owns the region relates what they carry", "yield", "condition", "return")
RULES.unsupported("calls must be inlined before code generation (run passes.inline)", "call")

Term = tuple[str, int, int]  # ("slice", axis, parent class) or ("dot", operand index, result class)


@dataclass
class GpuFunction:
    """The GPU IR of a kernel: a copy of its function with `convert_layout` ops inserted and an
    encoding in the type of every tile value, the facts of axis analysis about it, and the plans of
    its software-pipelined loops (by loop op, filled in by `pipeline.plan_pipelines`). With
    `register_a_in_flight` off, a pipelined loop's wgmma dot that takes A from registers (attention's P V) is
    waited for where it is issued (`pipeline._async_dots`; the backend's choice for a kernel that shares the SM
    with another CTA, `nvptx.occupancy.more_ctas`)."""

    fn: Function
    module_attrs: dict[str, object]
    num_warps: int
    axis: AxisAnalysis
    pipelines: dict[Op, LoopPipeline] = field(default_factory=dict)
    register_a_in_flight: bool = True

    def encoding(self, v: Value) -> Encoding | None:
        """The layout of tile `v` (None for a scalar)."""
        return v.type.encoding if isinstance(v.type, TileType) else None

    def layout(self, v: Value) -> LinearLayout:
        """Where each element of `v` lives (a function of its type); a scalar is held by every thread."""
        ty = v.type
        if not isinstance(ty, TileType) or ty.encoding is None:
            return _scalar(self.num_warps)
        return _linear(ty.encoding, ty.shape)


@lru_cache(maxsize=8)
def _scalar(num_warps: int) -> LinearLayout:
    return scalar_layout(num_warps)


@lru_cache(maxsize=4096)
def _linear(enc: Encoding, shape: tuple[int, ...]) -> LinearLayout:
    return enc.linear(shape)


class _Assigner:
    def __init__(self, fn: Function, axis: AxisAnalysis, num_warps: int, has_wgmma: bool = False) -> None:
        self.fn, self.axis, self.num_warps, self.has_wgmma = fn, axis, num_warps, has_wgmma
        self.feeds = dot_feeds(fn)
        self.vclass: dict[Value, int] = {}
        self.parent: list[int] = []
        self.rank: list[int] = []
        self.shape: list[tuple[int, ...]] = []
        self.term: dict[int, Term] = {}
        self.prefs: list[tuple[Value, int, Blocked]] = []
        self.anchor: dict[int, Encoding] = {}
        self.memory: set[int] = set()
        self.order: dict[int, tuple[int, ...]] = {}  # a memory class's vectorized dimension order
        self.inserts: dict[Op, list[Op]] = {}

    # ---- classes ----------------------------------------------------------------------------

    def new_class(self, rank: int, shape: tuple[int, ...] = ()) -> int:
        self.parent.append(len(self.parent))
        self.rank.append(rank)
        self.shape.append(shape)
        return len(self.parent) - 1

    def find(self, c: int) -> int:
        while self.parent[c] != c:
            self.parent[c] = self.parent[self.parent[c]]
            c = self.parent[c]
        return c

    def cls(self, v: Value) -> int:
        key = v
        if key not in self.vclass:
            shape = shape_of(v.type)
            for d in shape:
                if d & (d - 1):
                    raise BackendError(f"tile {v.type} has a dimension that is not a power of two", self.fn.name)
            self.vclass[key] = self.new_class(len(shape), shape)
        return self.vclass[key]

    def join(self, v: Value, c: int) -> None:
        """Put a fresh value (an op result, a region argument) into class `c`."""
        self.vclass[v] = c
        root = self.find(c)
        shape = shape_of(v.type)
        if _numel(shape) > _numel(self.shape[root]):
            self.shape[root] = shape

    def can_unify(self, a: int, b: int) -> bool:
        a, b = self.find(a), self.find(b)
        if a == b:
            return True
        if self.rank[a] != self.rank[b]:
            return False
        aa, ab = self.anchor.get(a), self.anchor.get(b)
        if aa is not None and ab is not None and aa != ab:
            return False
        if (aa is not None and b in self.memory) or (ab is not None and a in self.memory):
            return False
        # Two accesses vectorized along different dimensions (a tile read transposed beside one read
        # straight) each keep their coalesced layout; their data meets through a conversion.
        if self.order.get(a, self.order.get(b)) != self.order.get(b, self.order.get(a)):
            return False
        ta, tb = self.term.get(a), self.term.get(b)
        if ta is None or tb is None:
            return True
        return ta[:2] == tb[:2] and self.can_unify(ta[2], tb[2])

    def unify(self, a: int, b: int) -> None:
        a, b = self.find(a), self.find(b)
        if a == b:
            return
        ta, tb = self.term.pop(a, None), self.term.pop(b, None)
        anchor = self.anchor.pop(a, None) or self.anchor.pop(b, None)
        if anchor is not None:
            self.anchor[a] = anchor
        if b in self.memory:
            self.memory.add(a)
        if b in self.order:
            self.order.setdefault(a, self.order.pop(b))
        self.parent[b] = a
        if _numel(self.shape[b]) > _numel(self.shape[a]):
            self.shape[a] = self.shape[b]
        if ta is not None and tb is not None:
            self.unify(ta[2], tb[2])
        term = ta or tb
        if term is not None:
            self.term[self.find(a)] = term

    def can_derive(self, c: int, term: Term) -> bool:
        c = self.find(c)
        old = self.term.get(c)
        if old is None:
            return self.rank[c] == self.rank[self.find(term[2])] - (1 if term[0] == "slice" else 0)
        return old[:2] == term[:2] and self.can_unify(old[2], term[2])

    def derive(self, c: int, term: Term) -> None:
        c = self.find(c)
        old = self.term.get(c)
        if old is not None:
            self.unify(old[2], term[2])
        else:
            self.term[c] = term

    # ---- edges ------------------------------------------------------------------------------

    def convert(self, op: Op, i: int, target: int) -> None:
        v = op.operands[i]
        conv = Op(CONVERT, [v], [v.type], {}, (), op.loc)
        self.join(conv.result, target)
        op.operands[i] = conv.result
        self.inserts.setdefault(op, []).append(conv)

    def same(self, op: Op, indices: list[int], results: list[Value], target: int | None = None) -> int | None:
        for i in indices:
            v = op.operands[i]
            if not isinstance(v.type, TileType):
                continue
            if target is None:
                target = self.cls(v)
            elif self.can_unify(target, self.cls(v)):
                self.unify(target, self.cls(v))
            else:
                self.convert(op, i, target)
        for r in results:
            if isinstance(r.type, TileType):
                if target is None:
                    target = self.cls(r)
                else:
                    self.join(r, target)
        return target

    def block(self, block: Block) -> None:
        for op in block.ops:
            self.op(op)
            for r in op.results:  # every tile gets a class, even one nothing relates
                if isinstance(r.type, TileType):
                    self.cls(r)

    def op(self, op: Op) -> None:
        rule = RULES.get(op.name)
        if rule is not None:
            rule(self, op)
        elif op.name in RULES.unsupported_ops:
            raise op_error(op, RULES.unsupported_ops[op.name], self.fn.name)

    # ---- rules: one per op ------------------------------------------------------------------

    @RULES.register("exp", "exp2", "log", "log2", "sqrt", "sqrt_rn", "rsqrt", "sin", "cos", "erf", "floor", "ceil",
                    "neg", "abs", "add", "sub", "mul", "rem", "maximum", "minimum", "div", "div_rn", "fdiv", "pow",
                    "floordiv", "and", "or", "xor", "shl", "shr", "umulhi", "not", "cmp", "select", "fma", "cast",
                    "bitcast", "addptr", "multiple_of", "max_contiguous", "max_constancy", "device_assert",
                    "broadcast", "scan", "extern_elementwise", "inline_asm")
    def same_layout(self, op: Op) -> None:
        self.same(op, list(range(len(op.operands))), op.results)

    @RULES.register("load", "store", "atomic_rmw", "atomic_cas")
    def memory_access(self, op: Op) -> None:
        if isinstance(op.operands[0].type, TileType):
            self.prefer(op.operands[0])
        self.same_layout(op)

    @RULES.register("descriptor_load")
    def descriptor_load(self, op: Op) -> None:
        """A block TMA copies is read from shared memory in 16-byte vectors along its contiguous last dimension."""
        ty = op.result.type
        assert isinstance(ty, TileType)
        nbytes = elem_of(ty).itemsize
        self.prefer_vectors(op.result, tuple(reversed(range(len(ty.shape)))), max(min(16 // nbytes, ty.shape[-1]), 1),
                            nbytes)

    @RULES.register("descriptor_store")
    def descriptor_store(self, op: Op) -> None:
        """A block TMA stores is written to shared memory from the layout it has: a tensor-core result's (a
        matmul's epilogue) as it is, with no conversion for the sake of the store; any other in 16-byte
        vectors along its contiguous last dimension, as a block TMA loads is read."""
        value = op.operands[-1]
        ty = value.type
        assert isinstance(ty, TileType)
        if self.find(self.cls(value)) not in self.anchor:
            nbytes = elem_of(ty).itemsize
            self.prefer_vectors(value, tuple(reversed(range(len(ty.shape)))), max(min(16 // nbytes, ty.shape[-1]), 1),
                                nbytes)

    @RULES.register("constant", "program_id", "num_programs", "arange", "splat", "reshape", "trans", "cat", "join",
                    "split", "device_print", "assume", "barrier")
    def own_layout(self, op: Op) -> None:
        """Operands are read in whatever layout they have; each tile result takes a class of its own
        (`block` gives it one)."""

    @RULES.register("histogram")
    def histogram(self, op: Op) -> None:
        """The values and their mask are read register by register together (`lower/indexing.py`): one
        layout, converting the mask where it has another. The counts take a class of their own."""
        self.same(op, list(range(len(op.operands))), [])

    @RULES.register("gather")
    def gather(self, op: Op) -> None:  # the result is laid out as its index; the source is read from shared memory
        self.same(op, [1], op.results)

    @RULES.register("expand_dims")
    def expand_dims(self, op: Op) -> None:
        if isinstance(op.operands[0].type, TileType):
            self.slice_edge(op, 0, self.cls(op.result), op.attrs["axis"])

    @RULES.register("reduce")
    def reduce(self, op: Op) -> None:
        src = self.same(op, list(range(len(op.operands))), [])
        assert src is not None
        if isinstance(op.results[0].type, TileType):
            out = self.same(op, [], op.results)
            assert out is not None
            self.derive(out, ("slice", op.attrs["axis"], src))

    @RULES.register("dot")
    def dot(self, op: Op) -> None:
        plan = plan_dot(self.fn, op, self.num_warps, self.feeds, self.has_wgmma)
        if plan is not None:
            self.anchored_dot(op, plan)
            return
        acc = self.same(op, [2], op.results)
        assert acc is not None
        for i in (0, 1):
            target = self.new_class(self.rank[self.find(acc)])
            self.term[target] = ("dot", i, acc)
            self.convert(op, i, target)

    @RULES.register("for")
    def loop(self, op: Op) -> None:
        body = op.regions[0]
        self.carried(op, list(range(3, len(op.operands))), body.args[1:])
        self.block(body)
        self.yields(body, body.args[1:])
        self.results(op.results, body.args[1:])

    @RULES.register("if")
    def branch(self, op: Op) -> None:
        for region in op.regions:
            self.block(region)
        then = op.regions[0].terminator
        assert then is not None
        self.results(op.results, then.operands)
        self.yields(op.regions[1], op.results)

    @RULES.register("while")
    def while_loop(self, op: Op) -> None:
        before, after = op.regions
        self.carried(op, list(range(len(op.operands))), before.args)
        self.block(before)
        cond = before.terminator
        assert cond is not None
        self.results(after.args, cond.operands[1:])
        self.block(after)
        self.yields(after, before.args)
        self.results(op.results, after.args)

    # ---- what the rules share ---------------------------------------------------------------

    def anchored_dot(self, op: Op, plan: DotPlan) -> None:
        """Fix a tensor-core dot's encodings: the accumulator's class takes the MMA layout unless a
        memory access or another anchor already claims it (`tl.dot(a, b, tl.load(...))`), in
        which case the accumulator is converted into a class of its own; the operands are
        converted to their dot-operand layouts."""
        c = self.find(self.cls(op.operands[2]))
        if c in self.memory or self.anchor.get(c, plan.acc) != plan.acc:
            c = self.new_class(2)
            self.convert(op, 2, c)
        self.anchor[c] = plan.acc
        self.join(op.result, c)
        for i in (0, 1):
            target = self.new_class(2)
            self.anchor[target] = plan.operand(i)
            self.convert(op, i, target)

    def slice_edge(self, op: Op, i: int, parent: int, axis: int) -> None:
        term: Term = ("slice", axis, parent)
        c = self.cls(op.operands[i])
        if self.can_derive(c, term):
            self.derive(c, term)
        else:
            target = self.new_class(self.rank[self.find(parent)] - 1)
            self.term[target] = term
            self.convert(op, i, target)

    def carried(self, op: Op, indices: list[int], args: list[Value]) -> None:
        for i, arg in zip(indices, args):
            if isinstance(arg.type, TileType):
                self.join(arg, self.cls(op.operands[i]))

    def yields(self, block: Block, targets: list[Value]) -> None:
        term = block.terminator
        assert term is not None
        for i, t in enumerate(targets):
            if isinstance(t.type, TileType):
                self.same(term, [i], [], self.cls(t))

    def results(self, results: list[Value], sources: list[Value]) -> None:
        for r, s in zip(results, sources):
            if isinstance(r.type, TileType):
                self.join(r, self.cls(s))

    # ---- choosing encodings ------------------------------------------------------------------

    def prefer(self, ptr: Value) -> None:
        ty = ptr.type
        assert isinstance(ty, TileType)
        pointee = elem_of(ty)
        assert isinstance(pointee, PointerType)
        info = self.axis.info(ptr)
        rank = len(ty.shape)
        order = tuple(sorted(reversed(range(rank)), key=lambda d: -info.contig[d]))
        nbytes = pointee.element_ty.itemsize
        aligned = min(max(info.div[order[0]] // nbytes, 1), info.contig[order[0]])
        self.prefer_vectors(ptr, order, min(aligned, 16 // nbytes), nbytes)

    def prefer_vectors(self, v: Value, order: tuple[int, ...], per_thread: int, nbytes: int) -> None:
        """Ask for `v`'s class a layout that accesses memory in vectors of `per_thread` elements of `nbytes`
        along `order[0]` (the strongest ask of a class wins)."""
        ty = v.type
        assert isinstance(ty, TileType)
        blocked = coalesced_blocked(ty.shape, order, per_thread, self.num_warps)
        self.memory.add(self.find(self.cls(v)))
        if per_thread > 1:
            self.order.setdefault(self.find(self.cls(v)), order)
        self.prefs.append((v, blocked.size_per_thread[order[0]] * nbytes, blocked))

    def resolve(self) -> None:
        """Give every tile value the encoding of its class, in its type."""
        best: dict[int, tuple[int, Blocked]] = {}
        for ptr, score, blocked in self.prefs:
            root = self.find(self.vclass[ptr])
            if root not in best or score > best[root][0]:
                best[root] = (score, blocked)
        cache: dict[int, Encoding] = {}

        def encoding(c: int) -> Encoding:
            root = self.find(c)
            if root not in cache:
                term = self.term.get(root)
                if root in self.anchor:
                    cache[root] = self.anchor[root]
                elif term is not None and term[0] == "slice":
                    cache[root] = Slice(term[1], encoding(term[2]))
                elif term is not None:
                    cache[root] = DotOperand(term[1], encoding(term[2]))
                elif root in best:
                    cache[root] = best[root][1]
                else:
                    cache[root] = default_blocked(self.shape[root], self.num_warps)
            return cache[root]

        for v, c in self.vclass.items():
            assert isinstance(v.type, TileType)
            v.type = replace(v.type, encoding=encoding(c))

    def materialize(self, block: Block) -> None:
        ops: list[Op] = []
        for op in block.ops:
            ops.extend(self.inserts.get(op, []))
            ops.append(op)
            for region in op.regions:
                self.materialize(region)
        block.ops = ops


ONE_LAYOUT = (_Assigner.same_layout, _Assigner.memory_access)
"""The rules that put an op's tile operands and results in one layout class (what the verifier checks)."""


def drop_trivial_converts(block: Block) -> None:
    """Remove each `convert_layout` whose source and result place every element alike (equal
    linear layouts), using its source directly."""

    def visit(op: Op, subst: Subst) -> list[Op] | None:
        if op.name != CONVERT:
            return None
        src, dst = _encoding(op.operands[0]), _encoding(op.result)
        shape = shape_of(op.result.type)
        # A dot operand keeps its conversion even when it only renames registers (attention's
        # P, the first dot's accumulator as the second's A): the lowering reads its encoding.
        if src is None or dst is None or isinstance(dst, MmaOperand) or _linear(src, shape) != _linear(dst, shape):
            return None
        replace_results(subst, op, [op.operands[0]])
        return []

    rewrite_block(block, visit, {})


def _encoding(v: Value) -> Encoding | None:
    return v.type.encoding if isinstance(v.type, TileType) else None


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def assign_layouts(module: Module, num_warps: int, has_wgmma: bool = False) -> GpuFunction:
    """The GPU IR of `module`'s kernel for `num_warps` warps (the module is not modified); with
    `has_wgmma` (an sm_90a target) the dots that fit run on wgmma, pointer loads that read a tile of a
    tensor into one become descriptor loads (`pointer_tiles.py`), and the descriptor loads and stores
    that TMA carries out (`tma.py`) stay; the other descriptor accesses become masked loads and stores
    first."""
    log2(num_warps)
    fn = clone_function(module.kernel)
    versions = version_wraps(fn, module.attrs, num_warps) if has_wgmma else []  # before nests become one loop
    fn = flatten_loops(fn)
    if has_wgmma:
        pointer_tiles(fn, module.attrs, num_warps)
        drop_idle_versions(fn, versions)
        plan_tensor_maps(fn, module.attrs, num_warps)
    expand_descriptors(Module([fn], module.attrs), keep=lambda op: isinstance(op.attrs.get("tma"), int))
    fn = unroll_loops(fn)
    accumulate_dot_adds(fn)
    if has_wgmma:
        defer_dots(fn)
    upcast_fp8_dots(fn, num_warps, has_wgmma)
    private_addresses(fn)
    private_leaves(fn)
    axis = AxisAnalysis(module.attrs, fn)
    assigner = _Assigner(fn, axis, num_warps, has_wgmma)
    for arg in fn.args:
        if isinstance(arg.type, TileType):
            raise BackendError("kernel arguments must be scalars or pointers", fn.name)
    assigner.block(fn.body)
    assigner.resolve()
    assigner.materialize(fn.body)
    drop_trivial_converts(fn.body)
    for op in fn.walk():
        if op.name == CONVERT:
            axis.op(op)
    return GpuFunction(fn, dict(module.attrs), num_warps, axis)
