"""A chain's second product deferred to the next iteration (sm_90a): FlashAttention-3's overlap of a
warpgroup's softmax with its own matrix products.

An attention loop multiplies S = Q K_j^T, computes P from S (the softmax) and multiplies P V_j into the
accumulator. On wgmma, waited for where it is issued, each product leaves the warpgroup idle until it
completes, and the softmax overlaps only the other warpgroup's products. Deferred, an iteration issues its
S, then the previous iteration's P V, and works on S while P V runs:

    for j in range(lo, hi, s) (acc = a0):        for j in range(lo, hi, s) (c = a0, P' = 0):
        S = dot(Q, K(j))                             S = dot(Q, K(j))                    waited at its first use
        P, c = f(S, acc)                 ->          acc = dot(P', V(max(j - s, lo)), c)    waited at its first use
        acc = dot(P, V(j), c)                        P, c = f(S, acc)
                                                     yield c, P
                                                 acc = dot(P', V(last j), c) if lo < hi else c

The lowering waits for a marked product (`wait = "at use"`) at the first op that reads its result
(`wgmma.wait_group` of the groups issued after it: 1 for S, which P V follows, then 0 for P V before the
softmax rescales the accumulator), so no group outlives its iteration. The first iteration multiplies
P' = 0 by a tile of V the loop reads anyway, which adds exact zeros (a V holding an infinity gives NaN rows
there, where the loop as written gives an infinity or NaN too). After the loop, the last P V runs; a
descriptor load of its V is marked (`deferred`), and a producer warp copies it into the ring after the
loop's last iteration (`specialize.py`), where it would otherwise be copied only once the loop is over.

Measured on an H200 (benchmarks/gpu.py, attention_tma_TFLOPs, 128x64 blocks, 8 warps, 3 stages), the deferred
loop runs faster warp-specialized, where a producer warp issues the copies and the warpgroups meet at no
barrier: (4,32,4096,128) causal 1.05 -> 1.09x Triton, (4,32,2048,64) 0.86-0.95 -> 0.91-0.96x, the others
within 1%. Pipelined with a CTA barrier at every iteration's top, every group then retired before it, it ran
0.92-0.97x where the loop as written ran 0.97-1.05x: only warp-specialized loops are deferred. Two variants
did not pay: rescaling the accumulator between the two products, as FlashAttention-3 does, makes ptxas
serialize the wgmmas (C7517: a non-wgmma instruction writes an accumulator between two wgmmas of a stage),
and making the two warpgroups take turns at issuing their products (named barriers) ran 0-3% slower; measured
again with 128x128 blocks and setmaxnreg (H200, two alternations), (4,32,4096,128) full ran 2.7% slower,
(4,32,2048,64) causal 2.4% faster, the others within 1%.

A loop is deferred when it is a warp-specialized `for` (`tl.range(..., warp_specialize=True)`) of positive
constant step, not flattened or unrolled, whose body holds a first dot S, reached before any other op reads
the accumulator, and a later dot whose A derives from S, whose result only the next iteration receives, and
whose B comes from pure ops and loads of the induction variable and values from before the loop. Such a loop's
`deferred` attribute says yes or why not (the GPU IR shows it). This runs on the backend's copy of the
kernel (`gpuir.assign_layouts`), for sm_90a: the tile IR and the interpreter keep the loop as written.
"""

from __future__ import annotations

from ...ir.core import Block, Function, Module, Op, Value
from ...ir.ops import OPS
from ...ir.types import ScalarType, TileType
from ...passes.dce import dce
from ...passes.flatten import defined_in, positive_constant
from ...passes.rewrite import Emitter, Subst, clone_op, constant_op, feeding, replace_results, rewrite_block

RESULT = "deferred"
WAIT = "wait"  # on a dot: "at use", where the lowering waits for its group
TAIL = "deferred"  # on a descriptor load after the loop: the second product's B for its last iteration


def _derived(ops: list[Op], root: Value) -> set[Value]:
    """The values of `ops` computed from `root` (itself included)."""
    seen = {root}
    for op in ops:
        if any(v in seen for v in op.operands):
            seen.update(op.results)
    return seen


def _chain(body: Block) -> tuple[Op, Op] | None:
    """The first dot of `body` whose result reaches a later dot's A operand, and that later dot; or None."""
    dots = [op for op in body.ops if op.name == "dot"]
    for i, first in enumerate(dots):
        derived = _derived(body.ops, first.result)
        second = next((d for d in dots[i + 1 :] if d.operands[0] in derived), None)
        if second is not None:
            return first, second
    return None


def _carried_at(body: Block, v: Value) -> int | None:
    """The position at which `body`'s yield alone passes `v` to the next iteration, or None."""
    yields = body.terminator
    assert yields is not None
    at = [j for j, w in enumerate(yields.operands) if w is v]
    readers = [o for o in body.walk() if any(w is v for w in o.operands)]
    return at[0] if len(at) == 1 and readers == [yields] else None


def why_not(loop: Op, first: Op, second: Op) -> str | None:
    """Why `second`, the later dot of a chain in `loop`'s body, cannot be deferred, or None."""
    if not loop.attrs.get("warp_specialize"):
        return "the loop is not warp-specialized (with a CTA barrier every iteration, deferring is slower)"
    if loop.attrs.get("flattened", "").startswith("yes"):
        return "the loop is flattened"
    if (loop.attrs.get("loop_unroll_factor") or 0) > 1:
        return "the loop is unrolled (loop_unroll_factor)"
    if not positive_constant(loop.operands[2]):
        return "the loop's step must be a positive constant"
    body = loop.regions[0]
    at = _carried_at(body, second.result)
    if at is None:
        return "the second product's result is read in the loop (only the next iteration may receive it)"
    acc = body.args[at + 1]
    if any(v is acc for op in body.ops[: body.ops.index(first)] for o in op.walk() for v in o.operands):
        return "an op before the first product reads the accumulator"
    inside = defined_in(loop)
    ops = feeding(body.ops, [second.operands[1]])
    made = {r for op in ops for r in op.results}
    for op in ops:
        opdef = OPS.get(op.name)
        if op.regions or opdef is None or opdef.side_effects or op.name in ("inline_asm", "call") \
                or (op.name == "load" and op.attrs.get("volatile")):
            return f"the second product's B needs '{op.name}', which may not run an iteration late"
        if any(v in inside and v not in made and v is not body.args[0] for v in op.operands):
            return "the second product's B reads a value the loop carries"
    return None


def _operand_b(emit: Emitter, ops: list[Op], iv: Value, at: Value) -> Subst:
    """The ops computing the second product's B, cloned for the iteration whose induction variable is `at`."""
    mapping: Subst = {iv: at}
    emit.ops += [clone_op(op, mapping) for op in ops]
    return mapping


def _late(dot: Op, operands: list[Value]) -> Op:
    new = Op("dot", operands, [r.type for r in dot.results], {**dot.attrs, WAIT: "at use"}, (), dot.loc)
    new.results[0].hint = dot.result.hint
    return new


def _defer(loop: Op, first: Op, second: Op) -> tuple[list[Op], list[Value]]:
    body = loop.regions[0]
    iv = body.args[0]
    lo, hi, step = loop.operands[:3]
    at = _carried_at(body, second.result)
    assert at is not None
    b_ops = feeding(body.ops, [second.operands[1]])
    p_type = second.operands[0].type
    out: list[Op] = []
    zero = 0.0 if isinstance(p_type, TileType) and isinstance(p_type.element_ty, ScalarType) \
        and p_type.element_ty.is_floating() else 0
    out.append(constant_op(zero, p_type, loop.loc))
    inits = [*loop.operands[3:], out[-1].result]
    deferred = Block([a.type for a in body.args] + [p_type], [a.hint for a in body.args] + ["P"])
    emit = Emitter(deferred.ops, loop.loc)
    mapping: Subst = dict(zip(body.args, deferred.args))
    for op in body.ops[:-1]:
        if op is second:
            continue
        new = clone_op(op, mapping)
        if op is not first:
            deferred.ops.append(new)
            continue
        deferred.ops.append(_late(new, new.operands))
        mapping[first.result] = deferred.ops[-1].result
        before = emit.op("maximum", emit.op("sub", deferred.args[0], step), lo)
        b_map = _operand_b(emit, b_ops, iv, before)
        deferred.ops.append(_late(second, [deferred.args[-1], b_map.get(second.operands[1], second.operands[1]),
                                           deferred.args[at + 1]]))
        mapping[body.args[at + 1]] = deferred.ops[-1].result
    yields = body.terminator
    assert yields is not None
    passed = [mapping.get(v, v) for v in yields.operands]
    passed[at] = mapping.get(second.operands[2], second.operands[2])
    deferred.ops.append(Op("yield", [*passed, mapping.get(second.operands[0], second.operands[0])], [], {}, (),
                           yields.loc))
    new = Op("for", [lo, hi, step, *inits], [*(r.type for r in loop.results), p_type],
             {**loop.attrs, RESULT: "yes: its second product runs in the next iteration, beside the first"},
             [deferred], loop.loc)
    out.append(new)
    ran = Emitter(out, loop.loc).op("cmp", lo, hi, pred="lt")
    then = Block()
    e = Emitter(then.ops, loop.loc)
    one = e.const(1, lo.type)
    last = e.op("add", lo, e.op("mul", e.op("floordiv", e.op("sub", e.op("sub", hi, lo), one), step), step))
    b_map = _operand_b(e, b_ops, iv, last)
    for op in then.ops:
        if op.name == "descriptor_load":
            op.attrs[TAIL] = "the last iteration's, after the loop"
    then.ops.append(Op("dot", [new.results[-1], b_map.get(second.operands[1], second.operands[1]), new.results[at]],
                       [second.result.type], dict(second.attrs), (), second.loc))
    then.ops.append(Op("yield", [then.ops[-1].result], [], {}, (), loop.loc))
    other = Block()
    other.ops.append(Op("yield", [new.results[at]], [], {}, (), loop.loc))
    tail = Op("if", [ran], [second.result.type], {}, (then, other), loop.loc)
    out.append(tail)
    results = list(new.results[:-1])
    results[at] = tail.result
    return out, results


def defer_dots(fn: Function) -> Function:
    """Defer the second product of a chain to the next iteration in every loop that allows it (in place)."""
    changed = False

    def visit(op: Op, subst: Subst) -> list[Op] | None:
        nonlocal changed
        chain = _chain(op.regions[0]) if op.name == "for" else None
        if chain is None:
            return None
        reason = why_not(op, *chain)
        if reason is not None:
            op.attrs[RESULT] = f"no: {reason}"
            return None
        ops, results = _defer(op, *chain)
        replace_results(subst, op, results)
        changed = True
        return ops

    rewrite_block(fn.body, visit, {})
    if changed:  # the body's own copy of the second product's B, which only that product read
        dce(Module([fn], {}))
    return fn
