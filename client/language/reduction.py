"""Reductions, scans and `dot`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from despina.compiler.ir import types as _t
from despina.compiler.ir.core import Block
from despina.compiler.ir.ops import DOT_PRECISIONS

from . import arith
from .core import builder, builtin, current, tensor, unwrap
from .semantic import broadcast_to, cast, constant, promote, to_tensor
from .shape import arange, expand_dims, reshape

Combine = Callable[[list[tensor], list[tensor]], Sequence[tensor]]


def _region(scalars: list[_t.ElemType], combine: Combine) -> Block:
    block = Block(scalars + scalars)
    b = builder()
    n = len(scalars)
    with b.at(block):
        args = [tensor(v) for v in block.args]
        outs = [cast(to_tensor(o), s) for o, s in zip(combine(args[:n], args[n:]), scalars)]
        if len(outs) != n:
            raise ValueError(f"the combine function must return {n} value(s), got {len(outs)}")
        b.create("yield", [o.handle for o in outs])
    return block


def _jit_combine(fn: Any) -> Combine:
    def combine(lhs: list[tensor], rhs: list[tensor]) -> Sequence[tensor]:
        out = current().inline_jit(fn, lhs + rhs)
        return list(out) if isinstance(out, tuple) else [out]

    return combine


def _normalize_axis(axis: Any, rank: int) -> int:
    axis = unwrap(axis)
    if not isinstance(axis, int) or not -rank <= axis < rank:
        raise ValueError(f"axis {axis!r} is out of range for a tile of rank {rank}")
    return axis % rank


def _combine_op(name: str, inputs: list[tensor], axis: Any, combine: Combine, keep_dims: bool, what: str = "",
                **attrs: Any) -> list[tensor]:
    """A `reduce` or `scan` op over `inputs`; `what` names the builtin the user called, for errors."""
    if not inputs or any(not x.shape for x in inputs):
        raise ValueError(f"{what or name} needs tiles, got {', '.join(str(x.type) for x in inputs)}")
    rank = len(inputs[0].shape)
    flat = unwrap(axis) is None
    if flat:
        inputs = [reshape(x, (x.numel,)) for x in inputs]
        axis = 0
    ax = _normalize_axis(axis, len(inputs[0].shape))
    region = _region([x.dtype for x in inputs], combine)
    op = builder().create(name, [x.handle for x in inputs], {"axis": ax, **attrs}, [region])
    results = [tensor(r) for r in op.results]
    if name == "reduce" and unwrap(keep_dims):
        results = _kept(results, None if flat else ax, rank)
    return results


def _kept(results: list[tensor], axis: int | None, rank: int) -> list[tensor]:
    """Reduced `results` with the reduced dimension put back with size 1 (every dimension, as in
    Triton, when the reduction was over all of them: `axis` None)."""
    return [reshape(r, (1,) * rank) if axis is None else expand_dims(r, axis) for r in results]


def _unpack(results: list[tensor]) -> Any:
    return results[0] if len(results) == 1 else tuple(results)


@builtin
def reduce(input: Any, axis: Any, combine_fn: Any, keep_dims: bool = False) -> Any:
    """Reduce `input` (a tile or a tuple of tiles) along `axis` with the `@jit` function `combine_fn`."""
    inputs = [to_tensor(x) for x in (input if isinstance(input, tuple) else (input,))]
    return _unpack(_combine_op("reduce", inputs, axis, _jit_combine(combine_fn), keep_dims))


@builtin
def associative_scan(input: Any, axis: Any, combine_fn: Any, reverse: bool = False) -> Any:
    """Inclusive scan of `input` along `axis` with the associative `@jit` function `combine_fn`."""
    inputs = [to_tensor(x) for x in (input if isinstance(input, tuple) else (input,))]
    return _unpack(_combine_op("scan", inputs, axis, _jit_combine(combine_fn), False, reverse=bool(unwrap(reverse))))


def _widen_for_sum(x: tensor, dtype: Any) -> tensor:
    dtype = unwrap(dtype)
    if dtype is not None:
        return cast(x, dtype)
    dt = x.dtype
    if dt.is_int() and dt.primitive_bitwidth < 32:
        return cast(x, _t.uint32 if dt.is_int_unsigned() else _t.int32)
    return x


def _simple(name: str, x: Any, axis: Any, keep_dims: Any, op: Callable[[tensor, tensor], tensor], scan: bool = False,
            reverse: Any = False) -> tensor:
    t = to_tensor(x)

    def combine(lhs: list[tensor], rhs: list[tensor]) -> list[tensor]:
        return [op(lhs[0], rhs[0])]

    if scan:
        return _combine_op("scan", [t], axis, combine, False, what=name, reverse=bool(unwrap(reverse)))[0]
    return _combine_op("reduce", [t], axis, combine, bool(unwrap(keep_dims)), what=name)[0]


@builtin
def sum(input: Any, axis: Any = None, keep_dims: bool = False, dtype: Any = None) -> tensor:
    """Sum along `axis` (all elements when None); small ints accumulate in 32 bits."""
    return _simple("sum", _widen_for_sum(to_tensor(input), dtype), axis, keep_dims, arith.add)


@builtin
def xor_sum(input: Any, axis: Any = None, keep_dims: bool = False) -> tensor:
    """The bitwise XOR of an integer tile along `axis` (every axis when None)."""
    t = to_tensor(input)
    if not t.dtype.is_int():
        raise TypeError(f"xor_sum needs an integer tile, got {t.type}")
    return _simple("xor_sum", t, axis, keep_dims, arith.xor_)


@builtin
def reduce_or(input: Any, axis: Any, keep_dims: bool = False) -> tensor:
    """Bitwise or of the integer tile `input` along `axis`."""
    t = to_tensor(input)
    if not t.dtype.is_int():
        raise TypeError(f"reduce_or needs an integer tile, got {t.type}")
    return _simple("reduce_or", t, axis, keep_dims, arith.or_)


def _arg_combine(is_max: bool, tie_break_left: bool) -> Combine:
    def combine(lhs: list[tensor], rhs: list[tensor]) -> list[tensor]:
        (av, ai), (bv, bi) = lhs, rhs
        better = arith.compare("gt" if is_max else "lt", av, bv)
        tie = arith.compare("eq", av, bv)
        if tie_break_left:
            tie = arith.and_(tie, arith.compare("lt", ai, bi))
        take_a = arith.or_(better, tie)
        return [arith.where(take_a, av, bv), arith.where(take_a, ai, bi)]

    return combine


def _arg_reduce(x: Any, axis: Any, is_max: bool, tie_break_left: bool, keep_dims: Any) -> tuple[tensor, tensor]:
    t = to_tensor(x)
    rank = len(t.shape)
    flat = unwrap(axis) is None
    if flat:
        t = reshape(t, (t.numel,))
        axis = 0
    ax = _normalize_axis(axis, len(t.shape))
    idx = arange(0, t.shape[ax])
    for d in range(len(t.shape)):
        if d != ax:
            idx = expand_dims(idx, d)
    idx = broadcast_to(idx, t.shape)
    results = _combine_op("reduce", [t, idx], ax, _arg_combine(is_max, tie_break_left), False)
    if unwrap(keep_dims):
        results = _kept(results, None if flat else ax, rank)
    return results[0], results[1]


@builtin
def max(input: Any, axis: Any = None, return_indices: bool = False, return_indices_tie_break_left: bool = True,
        keep_dims: bool = False) -> Any:
    """The maximum along `axis` (every axis when None); with `return_indices=True`, also where it is (the first
    occurrence unless `return_indices_tie_break_left=False`). `keep_dims` keeps the reduced axis as 1."""
    if unwrap(return_indices):
        return _arg_reduce(input, axis, True, bool(unwrap(return_indices_tie_break_left)), keep_dims)
    return _simple("max", input, axis, keep_dims, arith.maximum)


@builtin
def min(input: Any, axis: Any = None, return_indices: bool = False, return_indices_tie_break_left: bool = True,
        keep_dims: bool = False) -> Any:
    """The minimum along `axis` (every axis when None); with `return_indices=True`, also where it is (the first
    occurrence unless `return_indices_tie_break_left=False`). `keep_dims` keeps the reduced axis as 1."""
    if unwrap(return_indices):
        return _arg_reduce(input, axis, False, bool(unwrap(return_indices_tie_break_left)), keep_dims)
    return _simple("min", input, axis, keep_dims, arith.minimum)


@builtin
def argmax(input: Any, axis: Any, tie_break_left: bool = True, keep_dims: bool = False) -> tensor:
    """Index of the largest element along `axis` (the first one on ties)."""
    return _arg_reduce(input, axis, True, bool(unwrap(tie_break_left)), keep_dims)[1]


@builtin
def argmin(input: Any, axis: Any, tie_break_left: bool = True, keep_dims: bool = False) -> tensor:
    """Index of the smallest element along `axis` (the first one on ties)."""
    return _arg_reduce(input, axis, False, bool(unwrap(tie_break_left)), keep_dims)[1]


@builtin
def cumsum(input: Any, axis: Any = 0, reverse: bool = False, dtype: Any = None) -> tensor:
    """The running sum along `axis` (from the end with `reverse=True`); same shape as `input`. Integers
    narrower than 32 bits sum as 32-bit integers, as in Triton; `dtype` picks another accumulator type."""
    return _simple("cumsum", _widen_for_sum(to_tensor(input), dtype), axis, False, arith.add, scan=True, reverse=reverse)


@builtin
def cumprod(input: Any, axis: Any = 0, reverse: bool = False) -> tensor:
    """The running product along `axis` (from the end with `reverse=True`); same shape as `input`."""
    return _simple("cumprod", input, axis, False, arith.mul, scan=True, reverse=reverse)


@builtin
def softmax(x: Any, dim: Any = None, keep_dims: bool = False, ieee_rounding: bool = False) -> tensor:
    """`exp(x - max) / sum(exp(x - max))` along `dim` (0 by default)."""
    d = 0 if unwrap(dim) is None else dim
    z = arith.sub(x, max(x, d, keep_dims=keep_dims))
    num = arith.exp(z)
    return arith.fdiv(num, sum(num, d, keep_dims=keep_dims), ieee_rounding)


@builtin
def dot(input: Any, other: Any, acc: Any = None, input_precision: Any = None, allow_tf32: Any = None,
        max_num_imprecise_acc: Any = None, out_dtype: Any = _t.float32) -> tensor:
    """Matrix product of 2-D tiles (or batched 3-D), accumulated into `acc` when given."""
    a, b = to_tensor(input), to_tensor(other)
    if len(a.shape) not in (2, 3) or len(a.shape) != len(b.shape):
        raise ValueError(f"dot needs two 2-D (or two 3-D batched) tiles, got {a.type} and {b.type}")
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"dot: the inner dimensions differ: {list(a.shape)} @ {list(b.shape)}; the first operand's "
                         "last dimension must equal the second's next-to-last (tl.trans one of them?)")
    elem, other_elem = a.dtype, b.dtype
    if not isinstance(elem, _t.ScalarType) or not isinstance(other_elem, _t.ScalarType):
        raise TypeError(f"dot needs tiles of numbers, got {a.type} and {b.type}; load the values through the pointers first")
    if elem != other_elem:
        elem = promote(elem, other_elem)
        a, b = cast(a, elem), cast(b, elem)
    precision = unwrap(input_precision)
    if precision is None:
        precision = "ieee" if unwrap(allow_tf32) is False else "tf32"
    if precision not in DOT_PRECISIONS:
        raise ValueError(f"input_precision must be one of {DOT_PRECISIONS}, got {precision!r}")
    if not elem.is_fp32():
        precision = "ieee"
    out = _t.int32 if elem.is_int() else unwrap(out_dtype)
    shape = a.shape[:-1] + b.shape[-1:]
    acc = unwrap(acc)
    if acc is None:
        c = constant(0, _t.TileType(shape, out))
    else:
        c = to_tensor(acc)
        if c.shape != shape:
            raise ValueError(f"dot: acc has shape {list(c.shape)} but the product of {list(a.shape)} and {list(b.shape)} "
                             f"has {list(shape)}; pass an accumulator of the product's shape")
    if elem.is_fp8() and c.dtype != _t.float32:
        raise TypeError(f"dot of {elem} tiles accumulates in fp32, not {c.dtype}: pass an fp32 acc (the default "
                        "out_dtype) and convert the result with .to() afterwards")
    attrs: dict[str, Any] = {"input_precision": precision}
    if unwrap(max_num_imprecise_acc) is not None:
        attrs["max_num_imprecise_acc"] = int(unwrap(max_num_imprecise_acc))
        k = a.shape[-1]
        if elem.is_fp8() and attrs["max_num_imprecise_acc"] != k:
            raise ValueError(f"max_num_imprecise_acc={attrs['max_num_imprecise_acc']} for an fp8 dot with K={k}: only "
                             f"K ({k}) is supported, the tensor cores accumulating the whole K of each dot in their "
                             "own precision (Triton's default on sm_90); leave it out, or split the dot along K and "
                             "add the products in fp32")
    return tensor(builder().create("dot", [a.handle, b.handle, c.handle], attrs).result)
