"""Inlining: every `call` becomes a copy of its callee's body; then only kernels remain.

    %r = call(%a) {callee = "helper", results = [type(fp32)]} : fp32
    ->  the ops of `helper` with its arguments replaced by %a, and %r replaced by the operand
        of its `return`

Callees are looked up by name in the module and copied, never changed, so a helper called
twice is inlined twice. Calls nested in helpers, and calls inside regions, are inlined too;
a recursive call is an error (a kernel has no call stack).
"""

from __future__ import annotations

from ..ir.core import Block, IRError, Module, Op
from .rewrite import Subst, clone_block, replace_results, rewrite_block


def inline(module: Module) -> Module:
    """Inline every call in the kernel functions and drop every other function."""
    kernels = [fn for fn in module.functions if fn.kernel]
    for fn in kernels:
        _inline_block(fn.body, module, (fn.name,), {})
    module.functions = kernels
    return module


def _inline_block(block: Block, module: Module, stack: tuple[str, ...], subst: Subst) -> None:
    def visit(op: Op, subst: Subst) -> list[Op] | None:
        return _inline_call(op, module, stack, subst) if op.name == "call" else None

    rewrite_block(block, visit, subst)


def _inline_call(call: Op, module: Module, stack: tuple[str, ...], subst: Subst) -> list[Op]:
    name = call.attrs["callee"]
    if name in stack:
        raise IRError(f"recursive call to '{name}' (call chain {' -> '.join(stack + (name,))}); kernels cannot recurse")
    callee = module.get(name)
    arg_types = [a.type for a in callee.args]
    if [v.type for v in call.operands] != arg_types:
        raise IRError(
            f"call to '{name}' passes ({', '.join(str(v.type) for v in call.operands)}), "
            f"the function takes ({', '.join(map(str, arg_types))})"
        )
    body = clone_block(callee.body, {})
    term = body.terminator
    if term is None or term.name != "return":
        raise IRError(f"function '{name}' does not end with 'return'")
    if [v.type for v in term.operands] != [r.type for r in call.results]:
        raise IRError(
            f"call to '{name}' expects results ({', '.join(str(r.type) for r in call.results)}), "
            f"the function returns ({', '.join(str(v.type) for v in term.operands)})"
        )
    inner: Subst = dict(zip(body.args, call.operands))
    _inline_block(body, module, stack + (name,), inner)
    term = body.ops[-1]
    replace_results(subst, call, list(term.operands))
    return body.ops[:-1]
