"""`reduce` and `scan` with their combine regions, and `dot`.

A combine region is run vectorised over every pair it has to combine at one step: a
reduction halves the axis by combining neighbours (left operand first, so an associative
combine need not commute), a scan takes log2(n) Hillis-Steele steps. A region that is a
single add, mul, max, min, and, or or xor of its two arguments runs as the NumPy ufunc.
"""

from __future__ import annotations

import numpy as np

from ..ir.core import Block, Op
from ..ir.types import ScalarType, elem_of
from .core import State, rule, run_block
from .values import Ptr, Val, finish, full, np_dtype

_UFUNCS: dict[str, np.ufunc] = {
    "add": np.add,
    "mul": np.multiply,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
}


def _ufunc(op: Op) -> np.ufunc | None:
    """The ufunc a single-operand combine region amounts to, when it is that simple."""
    block = op.regions[0]
    ty = elem_of(op.operands[0].type)
    if len(op.operands) != 1 or len(block.ops) != 2 or not isinstance(ty, ScalarType) or ty.is_bf16():
        return None
    inner, term = block.ops
    if (
        term.name != "yield"
        or term.operands != inner.results
        or {id(v) for v in inner.operands} != {id(v) for v in block.args}
    ):
        return None
    if ty.is_bool() and inner.name in ("add", "mul"):
        return None
    if ty.is_floating() and inner.name in ("maximum", "minimum") and inner.attrs.get("propagate_nan", "none") != "all":
        return np.fmax if inner.name == "maximum" else np.fmin
    return _UFUNCS.get(inner.name)


def _along(x: np.ndarray, axis: int, part: slice) -> np.ndarray:
    index: list[slice] = [slice(None)] * x.ndim
    index[axis] = part
    return x[tuple(index)]


def _combine(st: State, block: Block, left: list[np.ndarray], right: list[np.ndarray]) -> list[np.ndarray]:
    """Run the combine region on every pair `(left, right)` at once."""
    shape = np.broadcast_shapes(*(x.shape for x in left + right))
    size = int(np.prod(shape))
    flat = [np.broadcast_to(x, shape).reshape(-1) for x in left + right]
    saved_env, saved_active = st.env, st.active
    # The region's scalars become one row per pair, all of them active.
    st.env, st.active = {}, None
    try:
        out = run_block(st, block, flat)
    finally:
        st.env, st.active = saved_env, saved_active
    return [np.broadcast_to(o.address() if isinstance(o, Ptr) else o, (size,)).reshape(shape) for o in out]


def _operands(st: State, op: Op) -> list[np.ndarray]:
    xs = [full(st.get(v), v.type) for v in op.operands]
    rows = max(x.shape[0] for x in xs)
    return [np.broadcast_to(x, (rows,) + x.shape[1:]) for x in xs]


@rule("reduce")
def reduce(st: State, op: Op) -> list[Val]:
    axis = op.attrs["axis"] + 1
    xs = _operands(st, op)
    ufunc = _ufunc(op)
    if ufunc is not None:
        return [ufunc.reduce(xs[0], axis=axis, dtype=xs[0].dtype)]
    n = xs[0].shape[axis]
    while n > 1:
        pairs = 2 * (n // 2)
        out = _combine(
            st,
            op.regions[0],
            [_along(x, axis, slice(0, pairs, 2)) for x in xs],
            [_along(x, axis, slice(1, pairs, 2)) for x in xs],
        )
        if n % 2:
            out = [np.concatenate([o, _along(x, axis, slice(n - 1, n))], axis) for o, x in zip(out, xs)]
        xs, n = out, out[0].shape[axis]
    return [np.squeeze(x, axis) for x in xs]


@rule("scan")
def scan(st: State, op: Op) -> list[Val]:
    axis = op.attrs["axis"] + 1
    reverse = bool(op.attrs.get("reverse", False))
    xs = _operands(st, op)
    if reverse:
        xs = [np.flip(x, axis) for x in xs]
    ufunc = _ufunc(op)
    if ufunc is not None:
        xs = [ufunc.accumulate(xs[0], axis=axis, dtype=xs[0].dtype)]
    else:
        n, d = xs[0].shape[axis], 1
        while d < n:
            out = _combine(
                st,
                op.regions[0],
                [_along(x, axis, slice(0, n - d)) for x in xs],
                [_along(x, axis, slice(d, n)) for x in xs],
            )
            xs = [np.concatenate([_along(x, axis, slice(0, d)), o], axis) for x, o in zip(xs, out)]
            d *= 2
    if reverse:
        xs = [np.flip(x, axis) for x in xs]
    return list(xs)


def _tf32(x: np.ndarray) -> np.ndarray:
    """fp32 rounded to tf32's 10-bit mantissa, to nearest with ties away (`cvt.rna.tf32`)."""
    bits = (x.view(np.uint32) + np.uint32(0x1000)) & np.uint32(0xFFFFE000)
    return np.where(np.isfinite(x), bits.view(np.float32), x)


@rule("dot")
def dot(st: State, op: Op) -> list[Val]:
    a, b, c = (full(st.get(v), v.type) for v in op.operands)
    ta, tc = elem_of(op.operands[0].type), elem_of(op.operands[2].type)
    assert isinstance(ta, ScalarType)
    if not ta.is_floating():
        product = np.matmul(a.astype(np.int64), b.astype(np.int64)) + c.astype(np.int64)
        return [product.astype(np_dtype(tc))]
    if ta.is_fp32() and op.attrs.get("input_precision") == "tf32":
        a, b = _tf32(a), _tf32(b)
    # Products of inputs up to fp32 are exact in float64 and the sum is far more precise than
    # an fp32 accumulator: one rounding at the end.
    return [finish(np.matmul(a.astype(np.float64), b.astype(np.float64)) + c.astype(np.float64), tc)]
