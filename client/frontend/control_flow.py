"""`if`, `for` and `while`: static ones unroll in Python, dynamic ones become IR regions.

A dynamic construct traces each body into its own block with a copy of the scope; the names a
body rebinds that existed before become the region's carried values (loop) or results (`if`).
A Python number carried into a loop is materialized as a tensor; if the body changes its type
(`acc = 0` then `acc += x_fp32`), the loop is traced again with the new type. A block pointer
(`tl.make_block_ptr`) is carried as its offsets, the only part `tl.advance` changes.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from despina import language as tl
from despina.compiler.ir import types as _t
from despina.compiler.ir.core import Block, Value
from despina.language.block_ptr import block_ptr
from despina.language.core import tensor
from despina.language.semantic import broadcast_to, cast, promote, to_tensor

if TYPE_CHECKING:
    from despina.compiler.ir.builder import Builder

    from .errors import FrontendError


class LoopExit(Exception):
    """`break` or `continue` inside a loop unrolled at compile time."""

    def __init__(self, kind: str, node: ast.AST) -> None:
        super().__init__(kind)
        self.kind = kind
        self.node = node


def _assigned_names(stmts: Sequence[ast.stmt]) -> list[str]:
    names: list[str] = []
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id not in names:
                names.append(node.id)
    return names


def _is_number(value: Any) -> bool:
    return isinstance(value, (bool, int, float)) and not isinstance(value, tensor)


def _has_tensor(value: Any) -> bool:
    if isinstance(value, (tuple, list)):
        return any(_has_tensor(v) for v in value)
    return isinstance(value, tensor)


def _flat(value: Any) -> list[Any]:
    """The run-time values a carried name holds: a block pointer's offsets, else the value itself."""
    return list(value.offsets) if isinstance(value, block_ptr) else [value]


def _rebuild(names: list[str], templates: dict[str, Any], values: Sequence[Any]) -> dict[str, Any]:
    """`names` bound to `values` (as `_flat` lists them), block pointers rebuilt from `templates`."""
    it = iter(values)
    out: dict[str, Any] = {}
    for n in names:
        template = templates[n]
        if isinstance(template, block_ptr):
            out[n] = template.with_offsets([next(it) for _ in template.offsets])
        else:
            out[n] = next(it)
    return out


def _slot_names(names: list[str], scope: dict[str, Any]) -> list[str]:
    return [f"{n}_offset{i}" if isinstance(scope[n], block_ptr) else n for n in names for i in range(len(_flat(scope[n])))]


def _same_constexpr(a: Any, b: Any) -> bool:
    return a is b or (not _has_tensor(a) and not _has_tensor(b) and type(a) is type(b) and a == b)


class ControlFlow:
    """Mixin of `CodeGenerator` for control flow."""

    # The state and methods of `CodeGenerator` that control flow uses.
    scope: dict[str, Any]
    builder: Builder
    returned: bool
    has_return_value: bool
    static_loop_depth: int
    dynamic_depth: int

    if TYPE_CHECKING:
        def error(self, node: ast.AST, message: str) -> FrontendError: ...
        def visit(self, node: ast.AST) -> Any: ...
        def visit_statements(self, stmts: Sequence[ast.stmt]) -> None: ...
        def assign(self, target: ast.expr, value: Any) -> None: ...

    # ---- helpers -----------------------------------------------------------------------------

    def dynamic_loop_depth(self) -> int:
        return self.dynamic_depth

    def loop_exit(self, node: ast.AST, kind: str) -> None:
        if self.static_loop_depth == 0:
            raise self.error(node, f"'{kind}' is supported only in loops unrolled at compile time (tl.static_range) "
                             "under constexpr conditions; use a mask or a while-loop condition instead")
        raise LoopExit(kind, node)

    def _trace_body(self, block: Block, scope: dict[str, Any], stmts: Sequence[ast.stmt]) -> dict[str, Any]:
        saved_scope, saved_block, saved_returned = self.scope, self.builder.block, self.returned
        self.scope, self.builder.block = scope, block
        try:
            self.visit_statements(stmts)
            return self.scope
        except LoopExit as exit_:
            raise self.error(exit_.node, f"'{exit_.kind}' under a run-time condition is not supported; "
                             "use a mask or a while-loop condition instead") from None
        finally:
            self.scope, self.builder.block = saved_scope, saved_block
            self.returned = saved_returned

    def _yield(self, block: Block, values: list[Value], name: str = "yield") -> None:
        with self.builder.at(block):
            self.builder.create(name, values)

    # ---- if ----------------------------------------------------------------------------------

    def visit_If(self, node: ast.If) -> None:
        cond = self.visit(node.test)
        if not isinstance(cond, tensor):
            self.visit_statements(node.body if cond else node.orelse)
            return
        if cond.shape:
            raise self.error(node.test, f"an `if` condition must be a scalar, got {cond.type}; use tl.where for tiles")
        cond = cast(cond, _t.int1)
        before = dict(self.scope)
        then_block, else_block = Block(), Block()
        then_scope = self._trace_body(then_block, dict(before), node.body)
        then_returned = self.returned or _returns(node.body)
        else_scope = self._trace_body(else_block, dict(before), node.orelse)
        else_returned = _returns(node.orelse)
        if self.has_return_value and (then_returned or else_returned):
            if not (then_returned and else_returned):
                raise self.error(node, "a function returning a value must return on both sides of a run-time `if`")
            raise self.error(node, "returning values from inside a run-time `if` is not supported; "
                             "assign the value and return it at the end")
        names = [n for n in dict.fromkeys(list(then_scope) + list(else_scope))
                 if (n in before and (then_scope.get(n) is not before[n] or else_scope.get(n) is not before[n]))
                 or (n not in before and n in then_scope and n in else_scope)]
        results: list[tuple[str, Any]] = []
        then_values: list[Value] = []
        else_values: list[Value] = []
        for n in names:
            a, b = then_scope.get(n, before.get(n)), else_scope.get(n, before.get(n))
            if isinstance(a, block_ptr) or isinstance(b, block_ptr):
                if not (isinstance(a, block_ptr) and isinstance(b, block_ptr) and a.same_frame(b)):
                    raise self.error(node, f"'{n}' must be one block pointer after both branches of the `if` (they may "
                                     "differ only by tl.advance); make it with tl.make_block_ptr before the `if`")
                for oa, ob in zip(a.offsets, b.offsets):
                    ta, tb = self._unify_branch_values(node, n, oa, ob, then_block, else_block)
                    then_values.append(ta.handle)
                    else_values.append(tb.handle)
                results.append((n, a))
                continue
            if not isinstance(a, tensor) and not isinstance(b, tensor):
                if _same_constexpr(a, b):
                    results.append((n, a))
                    continue
                if not (_is_number(a) and _is_number(b)):
                    raise self.error(node, f"'{n}' takes different compile-time values in the two branches; "
                                     "it must be a tensor or the same constexpr on both sides (unpack tuples into "
                                     "separate variables)")
            ta, tb = self._unify_branch_values(node, n, a, b, then_block, else_block)
            then_values.append(ta.handle)
            else_values.append(tb.handle)
            results.append((n, None))
        self._yield(then_block, then_values)
        self._yield(else_block, else_values)
        op = self.builder.create("if", [cond.handle], {}, [then_block, else_block])
        outs = iter(op.results)
        for n, value in results:
            if isinstance(value, block_ptr):
                self.scope[n] = value.with_offsets([tensor(next(outs)) for _ in value.offsets])
            else:
                self.scope[n] = tensor(next(outs)) if value is None else value
        if then_returned and else_returned:
            self.returned = True

    def _unify_branch_values(self, node: ast.AST, name: str, a: Any, b: Any, then_block: Block,
                             else_block: Block) -> tuple[tensor, tensor]:
        def materialize(value: Any, block: Block, like: Any) -> tensor:
            with self.builder.at(block):
                if isinstance(value, tensor):
                    return value
                if isinstance(like, tensor) and isinstance(like.dtype, _t.ScalarType):
                    return broadcast_to(to_tensor(value, like.dtype), like.shape)
                return to_tensor(value)

        ta, tb = materialize(a, then_block, b), materialize(b, else_block, a)
        if ta.type != tb.type and _is_number(a) and _is_number(b):
            common = promote(ta.dtype, tb.dtype)  # type: ignore[arg-type]
            with self.builder.at(then_block):
                ta = cast(ta, common)
            with self.builder.at(else_block):
                tb = cast(tb, common)
        if ta.type != tb.type:
            raise self.error(node, f"'{name}' is {ta.type} after the `if` branch but {tb.type} after the `else` "
                             "branch; convert one side (e.g. with .to()) so both agree")
        return ta, tb

    # ---- loops -------------------------------------------------------------------------------

    def _carried(self, body: Sequence[ast.stmt], exclude: str | None = None) -> list[str]:
        return [n for n in _assigned_names(body) if n != exclude and n in self.scope
                and (isinstance(self.scope[n], (tensor, block_ptr)) or _is_number(self.scope[n]))]

    def _trace_loop(self, node: ast.AST, names: list[str], build: Any
                    ) -> tuple[list[tensor], list[tensor], Any]:
        """Materialize the carried `names`, call `build(inits)` (which traces the regions and
        returns the yielded tensors and its result) and retrace when a weak init changes type.
        Each retrace makes one more init strong, so this ends after at most len(names) + 1 traces."""
        slots = [(n, v) for n in names for v in _flat(self.scope[n])]
        weak = [_is_number(v) for _, v in slots]
        inits = [to_tensor(v) for _, v in slots]
        while True:
            outs, result = build(inits)
            changed = False
            for i, ((n, _), init, out) in enumerate(zip(slots, inits, outs)):
                if out.type == init.type:
                    continue
                if not weak[i]:
                    raise self.error(node, f"'{n}' enters the loop as {init.type} but the body makes it {out.type}; "
                                     "give it that type before the loop (e.g. tl.zeros(..., dtype) or .to())")
                dtype = promote(init.dtype, out.dtype) if isinstance(out.dtype, _t.ScalarType) else out.dtype  # type: ignore[arg-type]
                inits[i] = broadcast_to(cast(init, dtype), out.shape)
                weak[i] = False
                changed = True
            if not changed:
                return inits, outs, result

    def _loop_outs(self, node: ast.For | ast.While, names: list[str], inits: list[tensor], block: Block,
                   after: dict[str, Any], induction: str | None = None) -> list[tensor]:
        """The tensors the body `block` yields for the carried `names`. A compile-time value (a tuple,
        a string) that the body changes cannot be carried: that is an error, not a lost update."""
        for n in _assigned_names(node.body):
            if n in self.scope and n not in names and n != induction and not _same_constexpr(self.scope[n], after[n]):
                raise self.error(node, f"'{n}' changes inside a run-time loop but only tensors and numbers can be "
                                 "carried from one iteration to the next; unpack tuples into separate variables")
        outs: list[tensor] = []
        with self.builder.at(block):
            for n in names:
                value, template = after[n], self.scope[n]
                if isinstance(template, block_ptr) or isinstance(value, block_ptr):
                    if not (isinstance(template, block_ptr) and template.same_frame(value)):
                        raise self.error(node, f"'{n}' becomes another block pointer inside a run-time loop; only "
                                         "tl.advance may change a block pointer there, make it with "
                                         "tl.make_block_ptr before the loop")
                    outs.extend(value.offsets)
                    continue
                init = inits[len(outs)]
                outs.append(value if isinstance(value, tensor) else to_tensor(value, init.dtype))  # type: ignore[arg-type]
        return outs

    def _bind_outs(self, names: list[str], outs: Sequence[Value]) -> None:
        self.scope.update(_rebuild(names, self.scope, [tensor(v) for v in outs]))

    def visit_For(self, node: ast.For) -> None:
        if node.orelse:
            raise self.error(node, "for-else is not supported in kernels; set a flag in the loop and test it after")
        if isinstance(node.iter, ast.Call) and self.visit(node.iter.func) is builtins.range:
            iterable: Any = tl.range(*[self.visit(a) for a in node.iter.args])
        else:
            iterable = self.visit(node.iter)
        if isinstance(iterable, tl.static_range):
            self._unroll(node, range(iterable.start, iterable.end, iterable.step))
            return
        if isinstance(iterable, (tuple, list)):
            self._unroll(node, iterable)
            return
        if not isinstance(iterable, tl.range):
            raise self.error(node.iter, "a kernel loop iterates over range(...), tl.range(...), tl.static_range(...) "
                             f"or a constexpr tuple, not {type(iterable).__name__}")
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "the loop variable must be a single name")
        self._dynamic_for(node, iterable)

    def _unroll(self, node: ast.For, values: Any) -> None:
        self.static_loop_depth += 1
        try:
            for value in values:
                self.assign(node.target, value)
                try:
                    self.visit_statements(node.body)
                except LoopExit as exit_:
                    if exit_.kind == "break":
                        break
                if self.returned:
                    break
        finally:
            self.static_loop_depth -= 1

    def _dynamic_for(self, node: ast.For, rng: tl.range) -> None:
        assert isinstance(node.target, ast.Name)
        bounds = [to_tensor(v) for v in (rng.start, rng.end, rng.step)]
        for b in bounds:
            if b.shape or not b.dtype.is_int():
                raise self.error(node.iter, f"loop bounds must be integer scalars, got {b.type}; convert a float with "
                                 ".to(tl.int32) and reduce a tile with tl.max or tl.sum")
        wide = any(b.dtype.primitive_bitwidth == 64 for b in bounds)
        ity = _t.int64 if wide else _t.int32
        bounds = [cast(b, ity) for b in bounds]
        names = self._carried(node.body, exclude=node.target.id)
        iv_name = node.target.id
        attrs: dict[str, Any] = {}
        if rng.num_stages is not None:
            attrs["num_stages"] = int(rng.num_stages)
        if rng.loop_unroll_factor is not None:
            attrs["loop_unroll_factor"] = int(rng.loop_unroll_factor)
        if rng.flatten:
            attrs["flatten"] = True
        if rng.warp_specialize:
            attrs["warp_specialize"] = True

        def build(inits: list[tensor]) -> tuple[list[tensor], Block]:
            block = Block([ity] + [t.type for t in inits], [iv_name] + _slot_names(names, self.scope))
            scope = dict(self.scope)
            scope[iv_name] = tensor(block.args[0])
            scope.update(_rebuild(names, self.scope, [tensor(a) for a in block.args[1:]]))
            self.dynamic_depth += 1
            try:
                after = self._trace_body(block, scope, node.body)
            finally:
                self.dynamic_depth -= 1
            return self._loop_outs(node, names, inits, block, after, iv_name), block

        inits, outs, block = self._trace_loop(node, names, build)
        self._yield(block, [o.handle for o in outs])
        op = self.builder.create("for", [b.handle for b in bounds] + [i.handle for i in inits], attrs, [block])
        self._bind_outs(names, op.results)

    def visit_While(self, node: ast.While) -> None:
        if node.orelse:
            raise self.error(node, "while-else is not supported in kernels; set a flag in the loop and test it after")
        names = self._carried(node.body)

        def build(inits: list[tensor]) -> tuple[list[tensor], tuple[Block, Block]]:
            types = [t.type for t in inits]
            slot_names = _slot_names(names, self.scope)
            before, after = Block(types, slot_names), Block(types, slot_names)
            scope = dict(self.scope)
            scope.update(_rebuild(names, self.scope, [tensor(a) for a in before.args]))
            saved_scope, saved_block = self.scope, self.builder.block
            self.scope, self.builder.block = scope, before
            try:
                cond = self.visit(node.test)
                if not isinstance(cond, tensor):
                    raise self.error(node.test, "a `while` condition must depend on run-time values; "
                                     "loops over constexprs belong in tl.static_range")
                if cond.shape:
                    raise self.error(node.test, f"a `while` condition must be a scalar, got {cond.type}; reduce the "
                                     "tile first (e.g. tl.max(x, 0) > 0 instead of x > 0)")
                self.builder.create("condition", [cast(cond, _t.int1).handle] + list(before.args))
            finally:
                self.scope, self.builder.block = saved_scope, saved_block
            body_scope = dict(self.scope)
            body_scope.update(_rebuild(names, self.scope, [tensor(a) for a in after.args]))
            self.dynamic_depth += 1
            try:
                result = self._trace_body(after, body_scope, node.body)
            finally:
                self.dynamic_depth -= 1
            return self._loop_outs(node, names, inits, after, result), (before, after)

        inits, outs, (before, after) = self._trace_loop(node, names, build)
        self._yield(after, [o.handle for o in outs])
        op = self.builder.create("while", [i.handle for i in inits], {}, [before, after])
        self._bind_outs(names, op.results)


def _returns(stmts: Sequence[ast.stmt]) -> bool:
    return bool(stmts) and isinstance(stmts[-1], ast.Return)

