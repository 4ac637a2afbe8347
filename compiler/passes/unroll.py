"""Loop unrolling: `tl.range(..., loop_unroll_factor=U)` (the `for` op's `loop_unroll_factor`).

    for iv in range(lo, hi, step):      for iv in range(lo, lo + (hi - lo) // (U * step) * (U * step), U * step):
        body(iv)                   ->       body(iv); body(iv + step); ...; body(iv + (U - 1) * step)
                                        for iv in range(<where the first stopped>, hi, step):
                                            body(iv)

The first loop runs the body U times an iteration, each copy taking the values the previous one
yields; the second runs what is left (fewer than U iterations), so any trip count gives the same
results. Integer division truncates toward zero, so a loop that runs no iteration (hi <= lo) still
runs none. Both loops keep the loop's other attributes (`num_stages`); a factor below 2 leaves the
loop as it is. This is Triton's loop unroller on its tile IR; here the backend runs it on its copy
of the kernel (`gpuir.assign_layouts`), so the tile IR and the interpreter keep the loop as written.
"""

from __future__ import annotations

from ..ir.core import Block, Function, Op, Value
from .rewrite import Emitter, Subst, clone_op, replace_results, rewrite_block

ATTR = "loop_unroll_factor"


def _unroll(loop: Op, factor: int) -> tuple[list[Op], list[Value]]:
    """The ops that replace `loop` (the bounds' arithmetic, the unrolled loop and the remainder loop)
    and the values that replace its results."""
    lo, hi, step = loop.operands[:3]
    body = loop.regions[0]
    attrs = {k: v for k, v in loop.attrs.items() if k != ATTR}
    out: list[Op] = []
    emit = Emitter(out, loop.loc)
    span = emit.op("mul", step, emit.const(factor, step.type))
    main_hi = emit.op("add", lo, emit.op("mul", emit.op("floordiv", emit.op("sub", hi, lo), span), span))

    unrolled = Block([a.type for a in body.args], [a.hint for a in body.args])
    inner = Emitter(unrolled.ops, loop.loc)
    carried: list[Value] = unrolled.args[1:]
    yields = body.ops[-1]
    for j in range(factor):
        iv = unrolled.args[0] if j == 0 else inner.op("add", unrolled.args[0], inner.op("mul", step, inner.const(j, step.type)))
        mapping: Subst = {body.args[0]: iv, **dict(zip(body.args[1:], carried))}
        unrolled.ops += [clone_op(op, mapping) for op in body.ops[:-1]]
        carried = [mapping.get(v, v) for v in yields.operands]
    unrolled.ops.append(Op(yields.name, carried, [], dict(yields.attrs), (), yields.loc))
    types = [r.type for r in loop.results]
    main = Op("for", [lo, main_hi, span, *loop.operands[3:]], types, dict(attrs), [unrolled], loop.loc)
    rest = Op("for", [main_hi, hi, step, *main.results], types, dict(attrs), [body], loop.loc)
    return [*out, main, rest], rest.results


def unroll_loops(fn: Function) -> Function:
    """Unroll every `for` of `fn` that asks for it, in place (inner loops first); returns `fn`."""

    def visit(op: Op, subst: Subst) -> list[Op] | None:
        factor = op.attrs.get(ATTR) if op.name == "for" else None
        if not isinstance(factor, int) or factor < 2:
            return None
        ops, results = _unroll(op, factor)
        replace_results(subst, op, results)
        return ops

    rewrite_block(fn.body, visit, {})
    return fn
