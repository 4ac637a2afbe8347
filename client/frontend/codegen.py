"""Python AST -> tile IR: one `visit_X` per supported node; control flow lives in `control_flow`.

Values in scope are either Python objects (constexprs: ints, floats, dtypes, tuples, functions)
or `tl.tensor`s wrapping IR values. Arithmetic on constexprs happens in Python at compile time;
anything touching a tensor appends IR through the `tl` builtins.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import operator
import types
from collections.abc import Sequence
from typing import Any

from despina import language as tl
from despina.compiler.ir import types as _t
from despina.compiler.ir.builder import Builder
from despina.compiler.ir.core import Block, Function, Loc, Module
from despina.language import arith
from despina.language.core import constexpr, is_builtin, tensor, tracing, unwrap
from despina.language.descriptors import DescriptorArg
from despina.language.semantic import to_tensor

from .callable import JitCallable
from .control_flow import ControlFlow, LoopExit
from .errors import CallSite, FrontendError
from .hints import LANGUAGE_REFERENCE, no_such_name, not_a_jit_function
from .source import Source, source_text

_BINOPS: dict[type, Any] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
    ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_, ast.BitXor: operator.xor,
}
_CMPOPS: dict[type, Any] = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
# Python builtins a kernel may call on constexprs (and, for some, on tensors).
_PY_BUILTINS = {
    "len", "isinstance", "int", "float", "bool", "abs", "tuple", "list", "zip", "enumerate", "getattr",
    "hasattr", "type", "str", "range", "min", "max", "print", "round", "divmod", "sorted", "reversed", "all", "any",
}
_GLOBAL_KINDS = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type, constexpr,
                 _t.ScalarType, _t.PointerType)


def is_constexpr_annotation(annotation: Any) -> bool:
    if annotation is constexpr:
        return True
    return isinstance(annotation, str) and annotation.split(".")[-1] == "constexpr"


class FunctionResult:
    """What generating one function produced."""

    def __init__(self, function: Function, returns: Any) -> None:
        self.function = function
        self.returns = returns


class CodeGenerator(ControlFlow, ast.NodeVisitor):
    def __init__(self, ctx: ModuleContext, jitfn: Any, source: Source, scope: dict[str, Any], builder: Builder,
                 is_kernel: bool = False) -> None:
        self.ctx = ctx
        self.jitfn = jitfn
        self.is_kernel = is_kernel
        self.source = source
        self.scope = scope
        self.builder = builder
        self.returned = False
        self.return_value: Any = None
        self.has_return_value = _has_return_value(source.tree)
        self.static_loop_depth = 0
        self.dynamic_depth = 0
        self.fn_globals: dict[str, Any] = getattr(jitfn.fn, "__globals__", {})
        closure = getattr(jitfn.fn, "__closure__", None) or ()
        self.closure = dict(zip(jitfn.fn.__code__.co_freevars, (c.cell_contents for c in closure)))

    # ---- errors and locations ----------------------------------------------------------------

    def error(self, node: ast.AST, message: str) -> FrontendError:
        line, col = self.source.position(node)
        err = FrontendError(self.ctx.kernel_name, self.source.file, line, col, message, self.source.line_text(line),
                               function=self.jitfn.__name__)
        err.origin = self
        return err

    def visit(self, node: ast.AST) -> Any:
        saved = self.builder.loc
        if hasattr(node, "lineno"):
            line, col = self.source.position(node)
            self.builder.loc = Loc(self.source.file, line, col)
        try:
            return super().visit(node)
        except (FrontendError, LoopExit):
            raise
        except RecursionError:
            raise self.error(node, "the kernel nests too deeply to compile; split deep expressions or chains of "
                             "helper calls") from None
        except Exception as exc:
            raise self.error(node, _describe(exc)) from exc
        finally:
            self.builder.loc = saved

    def generic_visit(self, node: ast.AST) -> Any:
        raise self.error(node, f"{type(node).__name__} is not supported in a kernel; see {LANGUAGE_REFERENCE} (the "
                         "language reference) for what is")

    # ---- statements --------------------------------------------------------------------------

    def visit_statements(self, stmts: Sequence[ast.stmt]) -> None:
        stmts = list(stmts)
        for i, stmt in enumerate(stmts):
            if self.returned:
                return
            if isinstance(stmt, ast.If) and _ends_with_return(stmt.body) and i + 1 < len(stmts):
                stmt = ast.If(test=stmt.test, body=stmt.body, orelse=list(stmt.orelse) + stmts[i + 1 :])
                ast.copy_location(stmt, stmts[i])
                self.visit(stmt)
                return
            self.visit(stmt)

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        self.visit(node.value)

    def visit_Pass(self, node: ast.Pass) -> None:
        return None

    def visit_Assign(self, node: ast.Assign) -> None:
        value = self.visit(node.value)
        for target in node.targets:
            self.assign(target, value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None:
            raise self.error(node, "a declaration without a value is not supported; assign a value")
        value = self.visit(node.value)
        annotation = self.visit(node.annotation)
        if annotation is constexpr and isinstance(value, tensor):
            raise self.error(node.value, "a value annotated tl.constexpr must be known at compile time; compute it "
                             "from literals and tl.constexpr parameters, or drop the annotation")
        self.assign(node.target, value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "only names can be targets of augmented assignment; assign to a name "
                             "(`v = t[0] + 1`)")
        current = self.lookup(node.target.id, node.target)
        self.assign(node.target, self.binop(node.op, current, self.visit(node.value), node))

    def assign(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            self.scope[target.id] = unwrap(value)
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, (tuple, list)):
                hint = "; use tl.split to take a tile apart" if isinstance(value, tensor) else ""
                raise self.error(target, f"cannot unpack {_kind_of(value)} into {len(target.elts)} names{hint}")
            if len(value) != len(target.elts):
                raise self.error(target, f"cannot unpack {len(value)} values into {len(target.elts)} names")
            for t, v in zip(target.elts, value):
                self.assign(t, v)
            return
        raise self.error(target, f"assignment to {type(target).__name__} is not supported; tiles are values, build a new "
                         "one (e.g. x = tl.where(offs == i, value, x))")

    def visit_Return(self, node: ast.Return) -> None:
        if self.dynamic_loop_depth():
            raise self.error(node, "return inside a loop is not supported; restructure the loop or use a mask")
        value = None if node.value is None else self.visit(node.value)
        if isinstance(value, tuple) and any(isinstance(v, (tuple, list)) for v in value):
            raise self.error(node, "nested tuples cannot be returned from a @jit function; return a flat tuple")
        self.return_value = value
        self.returned = True

    def visit_Assert(self, node: ast.Assert) -> None:
        cond = self.visit(node.test)
        msg = "" if node.msg is None else self.visit(node.msg)
        if isinstance(cond, tensor):
            tl.device_assert(cond, str(msg))
        elif not cond:
            raise self.error(node, f"assertion failed at compile time{': ' + str(msg) if msg else ''}")

    def visit_Break(self, node: ast.Break) -> None:
        self.loop_exit(node, "break")

    def visit_Continue(self, node: ast.Continue) -> None:
        self.loop_exit(node, "continue")

    # ---- expressions -------------------------------------------------------------------------

    def visit_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def visit_Name(self, node: ast.Name) -> Any:
        return self.lookup(node.id, node)

    def lookup(self, name: str, node: ast.AST) -> Any:
        if name in self.scope:
            return self.scope[name]
        for table in (self.closure, self.fn_globals):
            if name in table:
                value = table[name]
                if isinstance(value, _GLOBAL_KINDS) or callable(value) or value is None:
                    if isinstance(value, constexpr):
                        self.ctx.used_globals[name] = value.value
                    return unwrap(value)
                raise self.error(
                    node,
                    f"global '{name}' ({type(value).__name__}) is not a constexpr; kernels read only globals declared "
                    f"as `{name} = tl.constexpr(...)`, modules and functions (pass it as an argument instead)",
                )
        if name in _PY_BUILTINS:
            return getattr(builtins, name)
        raise self.error(node, f"name '{name}' is not defined; assign it before this line (a name first assigned "
                         "inside a run-time loop, or in only one branch of a run-time `if`, does not exist after it)")

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        value = self.visit(node.value)
        try:
            return unwrap(getattr(value, node.attr))
        except AttributeError:
            if isinstance(value, types.ModuleType):
                raise self.error(node, no_such_name(value, node.attr)) from None
            raise self.error(node, f"{_kind_of(value)} has no attribute '{node.attr}'") from None

    def visit_Tuple(self, node: ast.Tuple) -> tuple[Any, ...]:
        return tuple(self.visit(e) for e in node.elts)

    def visit_List(self, node: ast.List) -> list[Any]:
        return [self.visit(e) for e in node.elts]

    def visit_Slice(self, node: ast.Slice) -> slice:
        parts = [None if p is None else self.visit(p) for p in (node.lower, node.upper, node.step)]
        return slice(*parts)

    def visit_Subscript(self, node: ast.Subscript) -> Any:
        value = self.visit(node.value)
        index = self.visit(node.slice)
        if isinstance(value, tensor):
            return value[index]
        if isinstance(index, tensor):
            raise self.error(node.slice, "a tuple index must be a constexpr; index with a literal or a tl.constexpr "
                             "parameter")
        return value[index]

    def visit_JoinedStr(self, node: ast.JoinedStr) -> str:
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                value = self.visit(v.value)
                if isinstance(value, tensor):
                    raise self.error(node, "f-strings can only format constexprs; use tl.device_print for run-time values")
                spec = self.visit(v.format_spec) if v.format_spec is not None else ""
                parts.append(format(value, spec))
        return "".join(parts)

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        return self.binop(node.op, self.visit(node.left), self.visit(node.right), node)

    def binop(self, op: ast.operator, left: Any, right: Any, node: ast.AST) -> Any:
        fn = _BINOPS.get(type(op))
        if fn is None:
            raise self.error(node, f"operator {type(op).__name__} is not supported in kernels; use tl.dot for matrix products")
        return fn(left, right)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        operand = self.visit(node.operand)
        if isinstance(node.op, ast.Not):
            return arith.logical_not(operand) if isinstance(operand, tensor) else not operand
        if isinstance(node.op, ast.USub):
            return -operand
        if isinstance(node.op, ast.UAdd):
            return +operand
        return ~operand

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        is_and = isinstance(node.op, ast.And)
        result = self.visit(node.values[0])
        for value_node in node.values[1:]:
            if not isinstance(result, tensor):
                if bool(result) != is_and:
                    return result
                result = self.visit(value_node)
                continue
            rhs = self.visit(value_node)
            result = arith.logical_and(result, rhs) if is_and else arith.logical_or(result, rhs)
        return result

    def visit_Compare(self, node: ast.Compare) -> Any:
        left = self.visit(node.left)
        result: Any = None
        for op, right_node in zip(node.ops, node.comparators):
            right = self.visit(right_node)
            identity_with_none = isinstance(op, (ast.Is, ast.IsNot)) and (left is None or right is None)
            if isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) and not identity_with_none and (
                    isinstance(left, tensor) or isinstance(right, tensor)):
                raise self.error(node, f"'{type(op).__name__}' cannot compare tensors; use == or !=")
            value = _CMPOPS[type(op)](left, right)
            if result is None:
                result = value
            elif isinstance(result, tensor) or isinstance(value, tensor):
                result = arith.logical_and(result, value)
            else:
                result = result and value
            left = right
        return result

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        cond = self.visit(node.test)
        if isinstance(cond, tensor):
            return tl.where(cond, self.visit(node.body), self.visit(node.orelse))
        return self.visit(node.body) if cond else self.visit(node.orelse)

    def visit_Call(self, node: ast.Call) -> Any:
        fn = self.visit(node.func)
        args: list[Any] = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                args.extend(self.visit(a.value))
            else:
                args.append(self.visit(a))
        kwargs: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None:
                kwargs.update(self.visit(kw.value))
            else:
                kwargs[kw.arg] = self.visit(kw.value)
        try:
            return self.call(fn, args, kwargs, node)
        except FrontendError as exc:
            if exc.origin is not None and exc.origin is not self:  # raised inside a @jit function this line calls
                line, col = self.source.position(node)
                site = CallSite(self.jitfn.__name__, self.is_kernel, self.source.file, line, col, self.source.line_text(line))
                exc.called_from(site, self)
            raise

    def call(self, fn: Any, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Any:
        if isinstance(fn, JitCallable):
            return self.ctx.call_jit(self, fn, args, kwargs)
        if is_builtin(fn) or (inspect.ismethod(fn) and isinstance(fn.__self__, tensor)):
            return fn(*args, **kwargs)
        if fn is builtins.print:
            return _print(args)
        if fn in (builtins.min, builtins.max) and any(isinstance(a, tensor) for a in args):
            combine = tl.minimum if fn is builtins.min else tl.maximum
            result = args[0]
            for a in args[1:]:
                result = combine(result, a)
            return result
        if fn is builtins.range:
            raise self.error(node, "range() can only be the iterable of a `for` loop")
        if fn in (tl.range, tl.static_range):
            return fn(*args, **kwargs)
        if any(isinstance(a, tensor) for a in list(args) + list(kwargs.values())):
            name = getattr(fn, "__name__", repr(fn))
            if fn not in (builtins.len, builtins.isinstance, builtins.abs, builtins.getattr, builtins.hasattr):
                if getattr(builtins, name, None) is fn:
                    raise self.error(node, f"Python's {name}() cannot take a tensor, whose value is known only at run "
                                     "time; use the tl builtins (e.g. x.to(dtype) instead of int(x) or float(x))")
                written = ast.unparse(node.func) if isinstance(node, ast.Call) else name
                raise self.error(node, not_a_jit_function(fn, written))
        return fn(*[unwrap(a) for a in args], **{k: unwrap(v) for k, v in kwargs.items()})


def _print(args: list[Any]) -> None:
    if any(isinstance(a, tensor) for a in args):
        prefix = " ".join(str(a) for a in args if not isinstance(a, tensor))
        tl.device_print(prefix + (" " if prefix else ""), *[a for a in args if isinstance(a, tensor)])
    else:
        print(*args)


def _describe(exc: Exception) -> str:
    if isinstance(exc, (TypeError, ValueError, IndexError, AssertionError, NotImplementedError, KeyError, ZeroDivisionError)):
        return str(exc) if str(exc) else type(exc).__name__
    return f"{type(exc).__name__}: {exc}"


def _kind_of(value: Any) -> str:
    return f"tensor of type {value.type}" if isinstance(value, tensor) else f"{type(value).__name__} {value!r}"


def _ends_with_return(stmts: Sequence[ast.stmt]) -> bool:
    return bool(stmts) and isinstance(stmts[-1], ast.Return)


def _has_return_value(tree: ast.FunctionDef) -> bool:
    return any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(tree))


class ModuleContext:
    """State shared while generating one module: the kernel, its helpers, used globals."""

    def __init__(self, kernel_name: str, debug: bool) -> None:
        self.kernel_name = kernel_name
        self.debug = debug
        self.module = Module()
        self.helpers: dict[tuple[Any, ...], tuple[Function, bool]] = {}
        self.used_globals: dict[str, Any] = {}
        self.stack: list[Any] = []

    def generate(self, jitfn: Any, params: list[tuple[str, Any]], kernel: bool) -> FunctionResult:
        """Generate `jitfn` as a function. `params` pairs each parameter name with an IR type (a
        run-time argument) or a `constexpr` (a compile-time value)."""
        if jitfn in self.stack:
            raise TypeError(f"'{jitfn.fn.__name__}' calls itself; recursion is not supported in kernels, rewrite it as a loop")
        source = jitfn.source
        arg_names = [n for n, p in params if not isinstance(p, constexpr)]
        arg_types = [p for n, p in params if not isinstance(p, constexpr)]
        block = Block(arg_types, arg_names)
        builder = Builder(block)
        scope: dict[str, Any] = {}
        args = iter(block.args)
        for name, p in params:
            scope[name] = p.value if isinstance(p, constexpr) else tensor(next(args))
        line, col = source.position(source.tree)
        fn = Function(jitfn.fn.__name__, block, arg_names, kernel=kernel, loc=Loc(source.file, line, col))
        gen = CodeGenerator(self, jitfn, source, scope, builder, is_kernel=kernel)
        self.stack.append(jitfn)
        try:
            with tracing(builder, self.inline_jit, self.debug):
                _rebuild_descriptors(gen.scope, jitfn.fn.__name__)
                gen.visit_statements(source.tree.body)
                returns = gen.return_value
                values = _flatten_returns(returns)
                if kernel and values:
                    raise gen.error(source.tree, "a kernel cannot return a value; store results through a pointer")
                builder.loc = fn.loc
                builder.create("return", [v.handle for v in values])
        finally:
            self.stack.pop()
        fn.result_types = [v.type for v in values]
        return FunctionResult(fn, returns)

    def call_jit(self, gen: CodeGenerator, jitfn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        params = jitfn.bind_call(args, kwargs)
        key = (jitfn, tuple((n, p if isinstance(p, constexpr) else ("t", p.type)) for n, p in params))
        if key not in self.helpers:
            typed = [(n, p if isinstance(p, constexpr) else p.type) for n, p in params]
            result = self.generate(jitfn, typed, kernel=False)
            result.function.name = f"{result.function.name}_{len(self.helpers)}"
            self.helpers[key] = (result.function, isinstance(result.returns, tuple))
            self.module.functions.append(result.function)
        fn, returns_tuple = self.helpers[key]
        operands = [p.handle for n, p in params if not isinstance(p, constexpr)]
        op = gen.builder.create("call", operands, {"callee": fn.name, "results": list(fn.result_types)})
        outs = [tensor(r) for r in op.results]
        if returns_tuple:
            return tuple(outs)
        return outs[0] if outs else None

    def inline_jit(self, jitfn: Any, args: list[Any]) -> Any:
        """Trace `jitfn` with `args` straight into the current block (combine functions)."""
        from despina.language.core import builder as current_builder

        params = jitfn.bind_call(args, {})
        scope = {n: (p.value if isinstance(p, constexpr) else p) for n, p in params}
        _rebuild_descriptors(scope, jitfn.fn.__name__)
        gen = CodeGenerator(self, jitfn, jitfn.source, scope, current_builder())
        gen.visit_statements(jitfn.source.tree.body)
        return gen.return_value


def _rebuild_descriptors(scope: dict[str, Any], function: str) -> None:
    """Tensor descriptors among a function's parameters, from the parts they arrive as (`DescriptorArg`)."""
    for name, value in list(scope.items()):
        if isinstance(value, DescriptorArg):
            scope[name] = value.rebuild(name, scope, f"tensor descriptor '{name}' of '{function}'")


def _flatten_returns(value: Any) -> list[tensor]:
    if value is None:
        return []
    items = value if isinstance(value, tuple) else (value,)
    return [to_tensor(v) for v in items]


def generate_module(jitfn: Any, params: list[tuple[str, Any]], debug: bool, attrs: dict[str, Any] | None = None
                    ) -> tuple[Module, dict[str, Any]]:
    """The tile IR module of kernel `jitfn` specialized on `params`, and the globals it read."""
    ctx = ModuleContext(jitfn.fn.__name__, debug)
    result = ctx.generate(jitfn, params, kernel=True)
    ctx.module.functions.insert(0, result.function)
    ctx.module.attrs.update(attrs or {})
    ctx.module.source = source_text(jitfn.source, [key[0].source for key in ctx.helpers])
    return ctx.module, ctx.used_globals
