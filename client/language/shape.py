"""Tile creation and shape builtins."""

from __future__ import annotations

from typing import Any

from despina.compiler.ir import types as _t

from .core import builder, builtin, tensor, unwrap
from .semantic import binary_operands, broadcast_shapes, cast, constant, to_tensor
from .semantic import broadcast_to as _broadcast_to

MAX_TILE_NUMEL = 1 << 20


def _int_const(value: Any, what: str) -> int:
    value = unwrap(value)
    if isinstance(value, tensor):
        raise TypeError(f"{what} must be a constexpr integer, got a run-time {value.type} value; pass it as a "
                        "tl.constexpr parameter (`N: tl.constexpr`)")
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what} must be a constexpr integer, got {value!r}")
    return value


def _shape(shape: Any, what: str = "shape") -> tuple[int, ...]:
    shape = unwrap(shape)
    if isinstance(shape, int):
        shape = (shape,)
    dims = tuple(_int_const(d, f"every dimension of {what}") for d in shape)
    numel = 1
    for d in dims:
        if d <= 0 or d & (d - 1):
            raise ValueError(f"{what} dimensions must be powers of two, got {list(dims)}; round up with "
                             "despina.next_power_of_2 and mask the extra elements")
        numel *= d
    if numel > MAX_TILE_NUMEL:
        raise ValueError(f"{what} {list(dims)} has {numel} elements; a tile holds at most {MAX_TILE_NUMEL}, "
                         "split the work over more programs or loop over smaller tiles")
    return dims


@builtin
def arange(start: Any, end: Any) -> tensor:
    """The int32 tile `[start, start + 1, ..., end - 1]`; its length must be a power of two."""
    lo, hi = _int_const(start, "arange's start"), _int_const(end, "arange's end")
    if hi <= lo:
        raise ValueError(f"arange's end ({hi}) must be greater than its start ({lo})")
    _shape((hi - lo,), "arange's length")
    return tensor(builder().value("arange", start=lo, end=hi))


@builtin
def full(shape: Any, value: Any, dtype: Any) -> tensor:
    """A tile of `shape` filled with `value` as `dtype`."""
    dims = _shape(shape)
    dtype = unwrap(dtype)
    value = unwrap(value)
    if isinstance(value, tensor):
        return _broadcast_to(cast(value, dtype), dims) if dims else cast(value, dtype)
    return constant(value, _t.with_shape(dtype, dims))


@builtin
def zeros(shape: Any, dtype: Any) -> tensor:
    """A tile of `shape` (a tuple of powers of two) and `dtype`, every element 0."""
    return full(shape, 0, dtype)


@builtin
def zeros_like(input: tensor) -> tensor:
    """A tile of `input`'s shape and dtype, every element 0."""
    return full(input.shape, 0, input.dtype)


@builtin
def full_like(input: tensor, value: Any) -> tensor:
    """A tile of `input`'s shape and dtype, every element `value`."""
    return full(input.shape, value, input.dtype)


@builtin
def broadcast_to(input: Any, *shape: Any) -> tensor:
    """`input` broadcast to `shape` (NumPy's rules: dimensions of 1 stretch)."""
    if len(shape) == 1 and isinstance(unwrap(shape[0]), (tuple, list)):
        shape = tuple(unwrap(shape[0]))
    dims = _shape(shape)
    x = to_tensor(input)
    if broadcast_shapes(x.shape, dims) != dims:
        raise ValueError(f"cannot broadcast shape {list(x.shape)} to {list(dims)}; each dimension must match or be 1")
    return _broadcast_to(x, dims)


@builtin
def broadcast(input: Any, other: Any) -> tuple[tensor, tensor]:
    """`input` and `other` broadcast to their common shape (NumPy's rules), as a pair."""
    a, b = to_tensor(input), to_tensor(other)
    shape = broadcast_shapes(a.shape, b.shape)
    return _broadcast_to(a, shape), _broadcast_to(b, shape)


@builtin
def expand_dims(input: Any, axis: Any) -> tensor:
    """Insert size-1 dimensions at `axis` (an int or a sequence of ints)."""
    x = to_tensor(input)
    axes = unwrap(axis)
    axes = list(axes) if isinstance(axes, (list, tuple)) else [axes]
    rank = len(x.shape) + len(axes)
    given = [_int_const(a, "expand_dims' axis") for a in axes]
    if any(not -rank <= a < rank for a in given):
        raise ValueError(f"expand_dims axes {given} are out of range for a result of rank {rank}; use -{rank} to {rank - 1}")
    for a in sorted(a % rank for a in given):
        if not x.shape:
            x = tensor(builder().value("splat", [x.handle], shape=[1]))
            continue
        x = tensor(builder().value("expand_dims", [x.handle], axis=a))
    return x


@builtin
def reshape(input: tensor, *shape: Any, can_reorder: bool = False) -> tensor:
    """`input` with a new shape of the same number of elements (`reshape(x, 4, 8)` or `reshape(x, (4, 8))`), in
    row-major order; `can_reorder=True` lets the compiler pick the order."""
    if len(shape) == 1 and isinstance(unwrap(shape[0]), (tuple, list)):
        shape = tuple(unwrap(shape[0]))
    dims = _shape(shape)
    x = to_tensor(input)
    if x.shape == dims:
        return x
    if x.numel != _t.TileType(dims, x.dtype).numel:
        raise ValueError(f"cannot reshape {x.type} ({x.numel} elements) to {list(dims)}; the number of elements must "
                         "stay the same")
    if not x.shape:
        return tensor(builder().value("splat", [x.handle], shape=list(dims)))
    return tensor(builder().value("reshape", [x.handle], shape=list(dims), can_reorder=bool(unwrap(can_reorder))))


@builtin
def view(input: tensor, *shape: Any) -> tensor:
    """Like `reshape` with `can_reorder=True` (Triton's deprecated `view`)."""
    return reshape(input, *shape, can_reorder=True)


@builtin
def ravel(x: tensor) -> tensor:
    """`x` as a 1-D tile, in row-major order."""
    return reshape(x, (x.numel,))


@builtin
def permute(input: tensor, *dims: Any) -> tensor:
    """`input` with its dimensions reordered: `permute(x, 2, 0, 1)` or `permute(x, (2, 0, 1))`."""
    if len(dims) == 1 and isinstance(unwrap(dims[0]), (tuple, list)):
        dims = tuple(unwrap(dims[0]))
    perm = [_int_const(d, "a permutation entry") for d in dims]
    x = to_tensor(input)
    if sorted(perm) != list(range(len(x.shape))):
        raise ValueError(f"{perm} is not a permutation of the {len(x.shape)} dimensions of {x.type}")
    if perm == sorted(perm):
        return x
    return tensor(builder().value("trans", [x.handle], perm=perm))


@builtin
def trans(input: tensor, *dims: Any) -> tensor:
    """Transpose: swap the two dimensions of a 2-D tile, or permute by `dims`."""
    x = to_tensor(input)
    if not dims:
        if len(x.shape) != 2:
            raise ValueError(f"trans without dims needs a 2-D tile, got {x.type}; pass the permutation")
        dims = (1, 0)
    return permute(x, *dims)


@builtin
def cat(input: tensor, other: tensor, can_reorder: bool = False) -> tensor:
    """Concatenate two tiles of one shape along the first dimension."""
    a, b = binary_operands(input, other)
    if not a.shape:
        raise ValueError("cat needs tiles, got scalars")
    return tensor(builder().value("cat", [a.handle, b.handle]))


@builtin
def join(a: Any, b: Any) -> tensor:
    """Stack two tiles along a new last dimension of size 2."""
    x, y = binary_operands(a, b)
    return tensor(builder().value("join", [x.handle, y.handle]))


@builtin
def split(a: tensor) -> tuple[tensor, tensor]:
    """Split a tile whose last dimension is 2 into two tiles."""
    x = to_tensor(a)
    if not x.shape or x.shape[-1] != 2:
        raise ValueError(f"split needs a last dimension of size 2, got {x.type}; tl.reshape it to end in 2 first")
    op = builder().create("split", [x.handle])
    return tensor(op.results[0]), tensor(op.results[1])


@builtin
def interleave(a: Any, b: Any) -> tensor:
    """The elements of `a` and `b` alternating along the last dimension: `tl.join(a, b)` reshaped to
    twice `a`'s last extent (two scalars give a tile of 2)."""
    c = join(a, b)
    if len(c.shape) == 1:
        return c
    return reshape(c, c.shape[:-2] + (2 * c.shape[-2],))


def getitem(x: tensor, index: Any) -> tensor:
    """`x[None, :]`-style indexing: `None` inserts a dimension, `:` keeps one."""
    items = list(index) if isinstance(index, tuple) else [index]
    if sum(1 for i in items if i is not None) > len(x.shape):
        raise IndexError(f"too many indices for a tile of shape {list(x.shape)}")
    axis = 0
    result = x
    for item in items:
        item = unwrap(item)
        if item is None:
            result = expand_dims(result, axis)
            axis += 1
        elif isinstance(item, slice) and item == slice(None):
            axis += 1
        else:
            raise IndexError(
                f"tiles support only `None` and `:` in an index, got {item!r}; use tl.split, tl.reshape or a mask"
            )
    return result

