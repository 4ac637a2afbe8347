"""Data-dependent indexing and what is built on it: gather, histogram, flip, sort, topk.

`gather` and `histogram` are ops of their own; `flip`, `sort`, `topk` and `bitonic_merge` are
composed here from `gather`: a bitonic sorting network whose compare-and-swap steps pair every
element with the one `2**j` positions away along the sorted dimension (`index ^ 2**j`), which
keeps the tile's shape (so any dimension can be sorted, Triton sorts only the last).
"""

from __future__ import annotations

from typing import Any

from despina.compiler.ir import types as _t

from . import arith
from .core import builder, builtin, tensor, unwrap
from .semantic import broadcast_shapes, broadcast_to, cast, to_tensor
from .shape import _int_const, _shape, arange, expand_dims


def _tile(x: Any, what: str) -> tensor:
    t = to_tensor(x)
    if not t.shape:
        raise ValueError(f"{what} needs a tile, got a scalar {t.type}")
    if not isinstance(t.dtype, _t.ScalarType):
        raise TypeError(f"{what} needs a tile of numbers, got {t.type}")
    return t


def _dim(dim: Any, rank: int, what: str) -> int:
    d = unwrap(dim)
    d = rank - 1 if d is None else _int_const(d, f"{what}'s dim")
    if not -rank <= d < rank:
        raise ValueError(f"{what}: dim {d} is out of range for a tile of rank {rank}; use -{rank} to {rank - 1}")
    return d % rank


@builtin
def gather(src: Any, index: Any, axis: Any) -> tensor:
    """`out[i][j] = src[index[i][j]][j]` for `axis=0` (and so on): elements of `src` picked along
    `axis` by the integer tile `index`, which has `src`'s shape except along `axis`."""
    s = _tile(src, "tl.gather")
    i = to_tensor(index)
    if not isinstance(i.dtype, _t.ScalarType) or not i.dtype.is_int():
        raise TypeError(f"tl.gather's index must be an integer tile, got {i.type}")
    if len(i.shape) != len(s.shape):
        raise ValueError(f"tl.gather: the index {i.type} must have the source's rank ({len(s.shape)}), got {len(i.shape)}")
    ax = _dim(axis, len(s.shape), "tl.gather")
    for d, (a, b) in enumerate(zip(s.shape, i.shape)):
        if d != ax and a != b:
            raise ValueError(f"tl.gather: the index shape {list(i.shape)} must match the source shape {list(s.shape)} "
                             f"in every dimension but axis {ax}")
    return tensor(builder().value("gather", [s.handle, i.handle], axis=ax))


@builtin
def histogram(input: Any, num_bins: Any, mask: Any = None) -> tensor:
    """The int32 counts of the values `0 .. num_bins - 1` in the 1-D integer tile `input` (values
    outside that range, and where `mask` is false, are not counted)."""
    x = to_tensor(input)
    if len(x.shape) != 1 or not isinstance(x.dtype, _t.ScalarType) or not x.dtype.is_int():
        raise TypeError(f"tl.histogram needs a 1-D integer tile, got {x.type}")
    (bins,) = _shape((_int_const(num_bins, "tl.histogram's num_bins"),), "tl.histogram's num_bins")
    operands = [x.handle]
    if unwrap(mask) is not None:
        m = cast(to_tensor(mask), _t.int1)
        if broadcast_shapes(x.shape, m.shape) != x.shape:
            raise ValueError(f"tl.histogram: the mask {m.type} does not broadcast to the input {x.type}")
        operands.append(broadcast_to(m, x.shape).handle)
    return tensor(builder().value("histogram", operands, num_bins=bins))


def _positions(x: tensor, dim: int) -> tensor:
    """Every element's index along `dim`, as an int32 tile of `x`'s shape."""
    idx = arange(0, x.shape[dim])
    for d in range(len(x.shape)):
        if d != dim:
            idx = expand_dims(idx, d)
    return broadcast_to(idx, x.shape)


def _log2(n: int, what: str) -> int:
    if n <= 0 or n & (n - 1):
        raise ValueError(f"{what} needs a power-of-two extent, got {n}")
    return n.bit_length() - 1


@builtin
def flip(x: Any, dim: Any = None) -> tensor:
    """`x` reversed along `dim` (the last dimension by default)."""
    t = _tile(x, "tl.flip")
    d = _dim(dim, len(t.shape), "tl.flip")
    return gather(t, arith.sub(t.shape[d] - 1, _positions(t, d)), d)


def _compare_and_swap(x: tensor, pos: tensor, dim: int, step: int, descending: Any) -> tensor:
    """One column of the network: each element and the one `step` away keep their minimum on the
    side `descending` (a bool, or a tile of them) says, the maximum on the other."""
    partner = gather(x, arith.xor_(pos, step), dim)
    is_right = arith.compare("ne", arith.and_(pos, step), 0)
    flip_side = arith.xor_(to_tensor(descending, _t.int1), is_right)
    return arith.where(arith.compare("ne", arith.compare("gt", x, partner), flip_side), partner, x)


def _merge(x: tensor, pos: tensor, dim: int, stage: int, descending: Any) -> tensor:
    for j in reversed(range(stage)):
        x = _compare_and_swap(x, pos, dim, 1 << j, descending)
    return x


def _sorted(x: Any, dim: Any, descending: Any, what: str) -> tuple[tensor, int]:
    t = _tile(x, what)
    d = _dim(dim, len(t.shape), what)
    log_n = _log2(t.shape[d], what)
    pos = _positions(t, d)
    down = bool(unwrap(descending))
    for stage in range(1, log_n + 1):
        # Below the last stage, blocks of 2**stage elements alternate direction (bit `stage` of the
        # position), making bitonic sequences for the next stage to merge.
        direction: Any = down if stage == log_n else arith.compare("ne", arith.and_(pos, 1 << stage), 0)
        t = _merge(t, pos, d, stage, direction)
    return t, d


@builtin
def sort(x: Any, dim: Any = None, descending: Any = False) -> tensor:
    """`x` sorted along `dim` (the last dimension by default), ascending unless `descending`."""
    return _sorted(x, dim, descending, "tl.sort")[0]


@builtin
def topk(x: Any, k: Any, dim: Any = None) -> tensor:
    """The `k` largest elements of `x` along `dim` (the last by default), largest first."""
    t, d = _sorted(x, dim, True, "tl.topk")
    count = _int_const(k, "tl.topk's k")
    _log2(count, "tl.topk's k")
    if count > t.shape[d]:
        raise ValueError(f"tl.topk: k={count} is larger than the extent {t.shape[d]} of dim {d}")
    if count == t.shape[d]:
        return t
    shape = t.shape[:d] + (count,) + t.shape[d + 1 :]
    first = arange(0, count)
    for axis in range(len(shape)):
        if axis != d:
            first = expand_dims(first, axis)
    return gather(t, broadcast_to(first, shape), d)


@builtin
def bitonic_merge(x: Any, dim: Any = None, descending: Any = False) -> tensor:
    """Sort a bitonic sequence along `dim` (the last by default): one merge stage of a bitonic sort."""
    t = _tile(x, "tl.bitonic_merge")
    d = _dim(dim, len(t.shape), "tl.bitonic_merge")
    return _merge(t, _positions(t, d), d, _log2(t.shape[d], "tl.bitonic_merge"), bool(unwrap(descending)))


@builtin
def swizzle2d(i: Any, j: Any, size_i: Any, size_j: Any, size_g: Any) -> tuple[tensor, tensor]:
    """Row-major indices `(i, j)` of a `size_i x size_j` grid renumbered column-major within each
    group of `size_g` rows (grouped program ordering for L2 reuse, as in Triton's matmul tutorial)."""
    ij = arith.add(arith.mul(i, size_j), j)
    size_gj = arith.mul(size_g, size_j)
    off_i = arith.mul(arith.floordiv(ij, size_gj), size_g)
    rows = arith.minimum(arith.sub(size_i, off_i), size_g)
    ij = arith.mod(ij, size_gj)
    return arith.add(off_i, arith.mod(ij, rows)), arith.floordiv(ij, rows)
