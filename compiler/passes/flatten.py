"""Loop-nest flattening: `tl.range(..., flatten=True)` (the `for` op's `flatten`), Triton's FuseNestedLoops.

A persistent kernel's tile loop holds one inner loop (its K loop) between some index arithmetic and
an epilogue. Pipelined as written, the inner loop fills its ring in a prologue and drains it at the
end of every tile, so the copies of a tile's first K steps wait behind the previous tile's
epilogue. Flattened, one loop runs every (tile, K step) pair, and the software pipeline copies the
next tile's operands while the current tile's last products and epilogue run:

    for t in range(lo, hi, s) [flatten]:        n_k = max(cdiv(k_hi - k_lo, k_s), 0)
        pre(t)                                  if n_k > 0:
        c, p = for k in range(k_lo, k_hi, k_s)      for j in range(0, max(cdiv(hi - lo, s), 0) * n_k):
                (c0(t), p0(t)):          ->              t, k = lo + j // n_k * s, k_lo + j % n_k * k_s   (carried)
                body(t, k, c, p)                         c_in = c0(t) where j % n_k == 0 else c
        post(t, c)                                       c, p = body(t, k, c_in, p)
                                                         if j % n_k == n_k - 1: post(t, c); c = c0(t)
                                                         if j % n_k == n_k - 1: pre(t + s); p = p0(t + s)
                                                else:
                                                    the loop nest, its inner loop's results its
                                                    initial values (it runs no iteration)

`c` are the inner loop's values that `post` reads (its accumulators), `p` the others (pointers it steps).
The outer induction variable and the inner step's index are carried (not divided out of the flat index).
So are the values of `pre` that the inner loop reads (a tile's coordinates, from divisions in tutorial
09's grouped order, or a pointer kernel's row and column offsets) and the `p` values: an `if` computes them
for the next tile on a tile's last K step alone, which the pipeline evaluates S-1 iterations ahead with the
loads they feed, and the epilogue computes `pre` again for itself. Where `pre` or a start of `p` reads the
outer loop's carried values, `pre` runs every iteration instead, and each `p` starts again by a select. A
value of `pre` that is the same for every tile (a `tl.arange` written in the tile loop) is not carried: the fused
loop reads its copy made before it.

Measured on an H200 with tutorial 09's persistent kernel (benchmarks/gpu.py, persistent_matmul_TFLOPs):
with `pre` run every K step, its two integer divisions sat in the one thread that issues TMA's copies
(`lower/pipeline.py`), on the path to every iteration's copies and CTA barrier, and the kernel ran
0.75-0.82x Triton at 128x128x64 (0.96-0.99x at 128x256x64). On an H100, a persistent matmul through
pointers that steps them ran 0.66-0.69x Triton with `pre` and a select of 64-bit pointers every K step (and
a layout conversion through shared memory of its row offsets), 0.95-0.98x with them made once a tile.

`pre` (the ops before the inner loop) may hold only pure arithmetic: no loads, no nested regions; the inner loop's bounds come from outside the nest and its steps and the
outer one's are positive constants; neither loop is unrolled. The fused loop is pipelined over the
inner loop's `num_stages` when it gives one, else the outer's. A nest that does not fit stays as written, and its loop's
`flattened` attribute says why (the GPU IR shows it). This runs on the backend's copy of the kernel
(`gpuir.assign_layouts`): the tile IR and the interpreter keep the nest, which computes the same.
"""

from __future__ import annotations

from ..ir.core import Block, Function, Op, Value
from ..ir.ops import OPS
from ..ir.types import ScalarType, TileType
from .rewrite import Emitter, Subst, clone_op, constant_value, feeding, replace_results, rewrite_block

ATTR = "flatten"
RESULT = "flattened"
_READS = frozenset({"load", "descriptor_load", "atomic_rmw", "atomic_cas", "inline_asm", "call"})


def _trips(emit: Emitter, lo: Value, hi: Value, step: Value) -> Value:
    """max(cdiv(hi - lo, step), 0) for a positive step."""
    ty = lo.type
    span = emit.op("add", emit.op("sub", hi, lo), emit.op("sub", step, emit.const(1, ty)))
    return emit.op("maximum", emit.op("floordiv", span, step), emit.const(0, ty))


def defined_in(op: Op) -> set[Value]:
    """The values defined in `op`'s regions (a loop's body), at any depth."""
    found: set[Value] = set()

    def block(b: Block) -> None:
        found.update(b.args)
        for inner in b.ops:
            found.update(inner.results)
            for region in inner.regions:
                block(region)

    for region in op.regions:
        block(region)
    return found


def _int_constant(v: Value) -> int:
    value = constant_value(v)
    assert isinstance(value, int), v
    return value


def positive_constant(v: Value) -> bool:
    value = constant_value(v)
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def why_not(loop: Op) -> str | None:
    """Why `loop` (marked `flatten`) cannot be flattened, or None."""
    body = loop.regions[0]
    loops = [i for i, op in enumerate(body.ops) if op.regions]
    if len(loops) != 1 or body.ops[loops[0]].name != "for":
        return "its body must hold exactly one region op, an inner `for`"
    inner = body.ops[loops[0]]
    pre = body.ops[: loops[0]]
    if any((op.attrs.get("loop_unroll_factor") or 0) > 1 for op in (loop, inner)):
        return "a loop of the nest is unrolled (loop_unroll_factor)"
    for op in pre:
        opdef = OPS.get(op.name)
        if opdef is None or opdef.side_effects or op.name in _READS:
            return f"the ops before the inner loop run every iteration once flattened, and '{op.name}' may not"
    inside = defined_in(loop)
    if any(v in inside and constant_value(v) is None for v in inner.operands[:3]):
        return "the inner loop's bounds change from one outer iteration to the next"
    if not (positive_constant(loop.operands[2]) and positive_constant(inner.operands[2])):
        return "the loops' steps must be positive constants"
    if loop.operands[0].type != inner.operands[0].type:
        return "the two loops' induction variables have different types"
    return None


def _per_tile(loop: Op, pre: list[Op], inner: Op, fresh: list[int]) -> list[Value] | None:
    """The values of `pre` that the inner loop's body reads, to be carried from one tile to the next beside the
    inner loop's `fresh` values (those the epilogue does not read: pointers it steps), which start again from
    `pre` on a tile's first K step; or None where `pre` or a fresh start reads the outer loop's carried values
    (then `pre` runs every iteration)."""
    made = {r for op in pre for r in op.results}
    read: list[Value] = []
    for op in inner.regions[0].walk():
        read += [v for v in op.operands if v in made and v not in read]
    outer = set(loop.regions[0].args[1:])
    starts = [inner.operands[3 + i] for i in fresh]
    if any(v in outer for v in starts) or any(v in outer for op in feeding(pre, [*read, *starts]) for v in op.operands):
        return None
    return read


def _invariant(pre: list[Op], v: Value, inside: set[Value]) -> bool:
    """Whether `v`, a value of `pre`, is the same at every outer iteration: what computes it in `pre` reads nothing
    else the nest defines (not its induction variable, not what it carries)."""
    ops = feeding(pre, [v])
    made = {r for op in ops for r in op.results}
    return all(a not in inside or a in made for op in ops for a in op.operands)


def _around(pre: list[Op], inner: Op, results: list[Value], post: list[Op], mapping: Subst) -> list[Op]:
    """`pre` and `post` cloned through `mapping` (which gains their values), the inner loop's results taken as
    `results`, each looked up in `mapping` once `pre` is cloned."""
    ops = [clone_op(op, mapping) for op in pre]
    mapping.update(zip(inner.results, [mapping.get(v, v) for v in results]))
    return ops + [clone_op(op, mapping) for op in post]


def _flatten(loop: Op) -> tuple[list[Op], list[Value]]:
    body = loop.regions[0]
    at = next(i for i, op in enumerate(body.ops) if op.regions)
    inner, pre, post = body.ops[at], body.ops[:at], body.ops[at + 1 : -1]
    yields = body.ops[-1]
    ibody = inner.regions[0]
    iyields = ibody.ops[-1]
    lo, hi, step = loop.operands[:3]
    n_outer, n_inner = len(loop.operands) - 3, len(inner.operands) - 3
    out: list[Op] = []
    emit = Emitter(out, loop.loc)
    ty = lo.type
    assert isinstance(ty, ScalarType)
    inside = defined_in(loop)
    klo, khi, kstep = (emit.const(_int_constant(v), ty) if v in inside else v for v in inner.operands[:3])
    n_k = _trips(emit, klo, khi, kstep)
    total = emit.op("mul", _trips(emit, lo, hi, step), n_k)
    # The inner loop's initial values for the first tile: `pre` once for iv = lo (pure: harmless if no
    # iteration runs), so that the flattened loop's carried values start with values of their types.
    first: Subst = {body.args[0]: lo, **dict(zip(body.args[1:], loop.operands[3:]))}
    out += [clone_op(op, first) for op in pre]
    inits = [*loop.operands[3:], *(first.get(v, v) for v in inner.operands[3:])]
    zero = emit.const(0, ty)
    read = {v for op in post for o in op.walk() for v in o.operands}
    through = [i for i, r in enumerate(inner.results) if r in read]
    fresh = [i for i in range(n_inner) if i not in through]
    carry = _per_tile(loop, pre, inner, fresh)
    if carry is None:
        fresh = []
    # What the inner loop reads of `pre` but is the same for every tile (a `tl.arange` written in the tile loop) is
    # not carried: the fused loop reads its copy before the loop, where `pre` ran for the first tile.
    invariant = [v for v in carry or [] if _invariant(pre, v, inside)]
    carry = None if carry is None else [v for v in carry if v not in invariant]

    # The outer induction variable t and the inner step's index ki are carried (ki wraps at n_k, when t
    # steps), not divided out of the flattened index every iteration; so is a tile's part of `pre`.
    flat = Block([ty, *(v.type for v in inits), *(v.type for v in carry or []), ty, ty],
                 ["j", *(a.hint for a in body.args[1:]), *(a.hint for a in ibody.args[1:]),
                  *(v.hint for v in carry or []), "t", "ki"])
    e = Emitter(flat.ops, loop.loc)
    outer_args, inner_args = flat.args[1 : 1 + n_outer], flat.args[1 + n_outer : 1 + n_outer + n_inner]
    tile_args = flat.args[1 + n_outer + n_inner : -2]
    t, ki = flat.args[-2:]
    k = e.op("add", klo, e.op("mul", ki, kstep))
    mapping: Subst = {body.args[0]: t, **dict(zip(body.args[1:], outer_args))}
    flat.ops += [clone_op(op, mapping) for op in (pre if carry is None else feeding(
        pre, [inner.operands[3 + i] for i in through]))]
    mapping.update(zip(carry or [], tile_args))
    mapping.update((v, first[v]) for v in invariant)
    starts = e.op("cmp", ki, e.const(0, ty), pred="eq")
    entering = []
    for i, (init, arg) in enumerate(zip(inner.operands[3:], inner_args)):
        start = mapping.get(init, init)
        cond = e.op("splat", starts, shape=list(arg.type.shape)) if isinstance(arg.type, TileType) else starts
        entering.append(arg if i in fresh else e.op("select", cond, start, arg))
    imap: Subst = {**mapping, ibody.args[0]: k, **dict(zip(ibody.args[1:], entering))}
    flat.ops += [clone_op(op, imap) for op in ibody.ops[:-1]]
    done = [imap.get(v, v) for v in iyields.operands]
    ends = e.op("cmp", ki, e.op("sub", n_k, e.const(1, ty)), pred="eq")
    # The inner loop's values that the epilogue reads (its accumulators) pass through the epilogue's `if`: its
    # branch gives their initial values (the next iteration starts a tile, which takes them again), so that a
    # tile's accumulator is dead once the epilogue has read it and its registers are free for the epilogue's own
    # values. Passed on as it was, the accumulator stayed live into the next tile's first product (whose scale-d
    # ignores it): tutorial 09's kernel at 128x256x64 took 204 registers (158 now), and warp-specialized, where a
    # block of 9 warps gets at most 168, spilled 100 bytes. Both branches' values meet in one place, so that a
    # wgmma accumulator the epilogue waits for (lowering) leaves it as waited. The other values (pointers the
    # inner loop steps) go beside the epilogue, through the `if` that starts the next tile: through the
    # epilogue's, the loads they address could not be pipelined (their ahead slice would hold the epilogue).
    # The epilogue computes `pre` again for itself: the iteration's own copy then feeds only the loads, which
    # the pipeline evaluates for the iteration S-1 ahead, and is not computed a second time every iteration.
    then = Block()
    tmap: Subst = {body.args[0]: t, **dict(zip(body.args[1:], outer_args))}
    then.ops += _around(pre, inner, done, post, tmap)
    starts_again = [tmap.get(inner.operands[3 + i], inner.operands[3 + i]) for i in through]
    then.ops.append(Op("yield", [*(tmap.get(v, v) for v in yields.operands), *starts_again], [], {}, (), yields.loc))
    other = Block()
    other.ops.append(Op("yield", [*outer_args, *(done[i] for i in through)], [], {}, (), yields.loc))
    epilogue = Op("if", [ends], [*(a.type for a in outer_args), *(inner_args[i].type for i in through)], {},
                  (then, other), loop.loc)
    flat.ops.append(epilogue)
    stepped = e.op("add", t, step)
    next_t = e.op("select", ends, stepped, t)
    next_ki = e.op("select", ends, zero, e.op("add", ki, e.const(1, ty)))
    next_tile: list[Value] = []
    restarted: list[Value] = []
    if carry or fresh:  # on a tile's last K step alone: the next tile's values of `pre` and its fresh starts
        ahead = Block()
        amap: Subst = {body.args[0]: stepped}
        starts_next = [inner.operands[3 + i] for i in fresh]
        ahead.ops += [clone_op(op, amap) for op in feeding(pre, [*(carry or []), *starts_next])]
        ahead.ops.append(Op("yield", [amap.get(v, v) for v in [*(carry or []), *starts_next]], [], {}, (), loop.loc))
        stay = Block()
        stay.ops.append(Op("yield", [*tile_args, *(done[i] for i in fresh)], [], {}, (), loop.loc))
        advance = Op("if", [ends], [*(v.type for v in carry or []), *(inner_args[i].type for i in fresh)], {},
                     (ahead, stay), loop.loc)
        flat.ops.append(advance)
        next_tile, restarted = list(advance.results[: len(tile_args)]), list(advance.results[len(tile_args) :])
    passed = [epilogue.results[n_outer + through.index(i)] if i in through
              else restarted[fresh.index(i)] if i in fresh else done[i] for i in range(n_inner)]
    flat.ops.append(Op("yield", [*epilogue.results[:n_outer], *passed, *next_tile, next_t, next_ki], [], {}, (),
                       yields.loc))
    attrs = {k: v for k, v in loop.attrs.items() if k not in (ATTR, RESULT)}
    if inner.attrs.get("num_stages") is not None:  # the pipeline the inner loop asked for is the fused loop's
        attrs["num_stages"] = inner.attrs["num_stages"]
    tiles = [first[v] for v in carry or []]
    fused = Op("for", [zero, total, emit.const(1, ty), *inits, *tiles, lo, zero],
               [*(v.type for v in inits), *(v.type for v in tiles), ty, ty],
               {**attrs, RESULT: f"yes: {n_inner} values of the inner loop carried, its bounds outside the nest"},
               [flat], loop.loc)
    # The nest's copy runs where the inner loop runs no iteration: its results are its initial values.
    empty = Block([a.type for a in body.args], [a.hint for a in body.args])
    emap: Subst = dict(zip(body.args, empty.args))
    empty.ops += _around(pre, inner, inner.operands[3:], [*post, yields], emap)
    nest = Op("for", list(loop.operands), [r.type for r in loop.results], {**attrs, RESULT: "no: its inner loop runs no "
              "iteration (this copy runs then, without it)"}, [empty], loop.loc)
    guard = Op("if", [emit.op("cmp", n_k, emit.const(0, ty), pred="gt")], [r.type for r in loop.results], {},
               (Block(), Block()), loop.loc)
    guard.regions[0].ops += [fused, Op("yield", fused.results[:n_outer], [], {}, (), loop.loc)]
    guard.regions[1].ops += [nest, Op("yield", nest.results, [], {}, (), loop.loc)]
    return [*out, guard], guard.results


def flatten_loops(fn: Function) -> Function:
    """Flatten every loop nest of `fn` whose outer loop asks for it, in place; returns `fn`."""

    def visit(op: Op, subst: Subst) -> list[Op] | None:
        if op.name != "for" or not op.attrs.get(ATTR):
            return None
        reason = why_not(op)
        if reason is not None:
            op.attrs.pop(ATTR)
            op.attrs[RESULT] = f"no: {reason}"
            return None
        ops, results = _flatten(op)
        replace_results(subst, op, results)
        return ops

    rewrite_block(fn.body, visit, {})
    return fn
