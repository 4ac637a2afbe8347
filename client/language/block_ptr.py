"""Block pointers (`tl.make_block_ptr`, `tl.advance`): a block of a parent tensor in global memory.

A block pointer is a value of the language, not of the IR: `tl.load` and `tl.store` turn it into
the tile of pointers `base + sum((offsets[d] + arange(block_shape[d])) * strides[d])` and, for the
dimensions named in `boundary_check`, the mask `0 <= index < shape[d]`. So it compiles to the same
vectorized accesses as a tile of pointers (a constexpr or specialized stride of 1 makes a dimension
contiguous). In a loop only its offsets are carried (`tl.advance` changes nothing else); `order`,
Triton's hint of the memory order for TMA, is checked to be a permutation and needs no other use.

    a = tl.make_block_ptr(a_ptr, (M, K), (stride_am, stride_ak), (pid_m * BM, 0), (BM, BK), (1, 0))
    for k in range(0, K, BK):
        acc += tl.dot(tl.load(a, boundary_check=(0, 1), padding_option="zero"), ...)
        a = tl.advance(a, (0, BK))
"""

from __future__ import annotations

from typing import Any

from despina.compiler.ir import types as _t

from . import arith
from .core import builtin, tensor, unwrap
from .semantic import broadcast_to, cast, to_tensor
from .shape import _int_const, arange, expand_dims

PADDING_OPTIONS = ("", "zero", "nan")


def scalars(values: Any, rank: int | None, what: str, dtype: _t.ScalarType, fn: str = "tl.make_block_ptr"
            ) -> tuple[tensor, ...]:
    """`values` (one per dimension of a block of `rank` dimensions) as integer scalars of `dtype`."""
    items = unwrap(values)
    items = list(items) if isinstance(items, (tuple, list)) else [items]
    if rank is not None and len(items) != rank:
        raise ValueError(f"{fn}: {what} has {len(items)} entries, block_shape has {rank}; give one per dimension")
    out = []
    for v in items:
        t = to_tensor(unwrap(v), dtype if not isinstance(unwrap(v), tensor) else None)
        if t.shape or not isinstance(t.dtype, _t.ScalarType) or not t.dtype.is_int():
            raise TypeError(f"{fn}: every entry of {what} must be an integer scalar, got {t.type}")
        out.append(cast(t, dtype))
    return tuple(out)


def block_dims(block_shape: Any, fn: str) -> tuple[int, ...]:
    """`block_shape` as constexpr powers of two."""
    blocks = unwrap(block_shape)
    blocks = list(blocks) if isinstance(blocks, (tuple, list)) else [blocks]
    dims = tuple(_int_const(d, "every entry of block_shape") for d in blocks)
    for d in dims:
        if d <= 0 or d & (d - 1):
            raise ValueError(f"{fn}: block_shape {list(dims)} must hold powers of two")
    return dims


class block_ptr:
    """A pointer to a `block_shape` block at `offsets` of a parent tensor of `shape` and `strides`."""

    def __init__(self, base: tensor, shape: tuple[tensor, ...], strides: tuple[tensor, ...],
                 offsets: tuple[tensor, ...], block_shape: tuple[int, ...], order: tuple[int, ...]) -> None:
        self.base, self.shape, self.strides, self.offsets = base, shape, strides, offsets
        self.block_shape, self.order = block_shape, order

    @property
    def element_ty(self) -> _t.ElemType:
        dt = self.base.dtype
        assert isinstance(dt, _t.PointerType)
        return dt.element_ty

    @property
    def type(self) -> _t.PointerType:
        """Triton's type of a block pointer: a pointer to a block of elements."""
        return _t.PointerType(_t.TileType(self.block_shape, self.element_ty))  # type: ignore[arg-type]

    dtype = type

    def __repr__(self) -> str:
        return f"block_ptr({self.element_ty}, block_shape={list(self.block_shape)})"

    def with_offsets(self, offsets: list[tensor]) -> block_ptr:
        return block_ptr(self.base, self.shape, self.strides, tuple(offsets), self.block_shape, self.order)

    def same_frame(self, other: Any) -> bool:
        """Whether `other` is this block pointer at other offsets (what a loop or an `if` may change)."""
        def same(a: tuple[tensor, ...], b: tuple[tensor, ...]) -> bool:
            return len(a) == len(b) and all(x.handle is y.handle for x, y in zip(a, b))

        return (isinstance(other, block_ptr) and other.base.handle is self.base.handle and same(self.shape, other.shape)
                and same(self.strides, other.strides) and self.block_shape == other.block_shape
                and self.order == other.order)

    def advance(self, offsets: Any) -> block_ptr:
        return advance(self, offsets)


@builtin
def make_block_ptr(base: Any, shape: Any, strides: Any, offsets: Any, block_shape: Any, order: Any) -> block_ptr:
    """A pointer to the `block_shape` block at `offsets` of the tensor at `base` with `shape` and
    `strides` (in elements); `order` lists the dimensions from fastest- to slowest-varying in memory."""
    p = unwrap(base)
    if not isinstance(p, tensor) or p.shape or not isinstance(p.dtype, _t.PointerType):
        raise TypeError(f"tl.make_block_ptr's base must be a pointer, got {p!r}")
    if p.dtype.element_ty == _t.int1:
        p = cast(p, _t.PointerType(_t.int8))
    dims = block_dims(block_shape, "tl.make_block_ptr")
    orders = unwrap(order)
    orders = list(orders) if isinstance(orders, (tuple, list)) else [orders]
    perm = tuple(_int_const(o, "every entry of order") for o in orders)
    if sorted(perm) != list(range(len(dims))):
        raise ValueError(f"tl.make_block_ptr: order {list(perm)} must be a permutation of 0..{len(dims) - 1}")
    rank = len(dims)
    return block_ptr(p, scalars(shape, rank, "shape", _t.int64), scalars(strides, rank, "strides", _t.int64),
                     scalars(offsets, rank, "offsets", _t.int32), dims, perm)


@builtin
def advance(base: Any, offsets: Any) -> block_ptr:
    """The block pointer `base` moved by `offsets` (one per dimension); `base` itself is unchanged."""
    bp = unwrap(base)
    if not isinstance(bp, block_ptr):
        raise TypeError(f"tl.advance needs a block pointer from tl.make_block_ptr, got {bp!r}")
    steps = scalars(offsets, len(bp.block_shape), "tl.advance's offsets", _t.int32)
    return bp.with_offsets([arith.add(o, s) for o, s in zip(bp.offsets, steps)])


def boundary_dims(bp: block_ptr, boundary_check: Any) -> list[int]:
    dims = unwrap(boundary_check)
    dims = [] if dims is None else list(dims) if isinstance(dims, (tuple, list)) else [dims]
    rank = len(bp.block_shape)
    out = []
    for d in dims:
        d = _int_const(d, "every entry of boundary_check")
        if not 0 <= d < rank:
            raise ValueError(f"boundary_check dimension {d} is out of range for a block pointer of rank {rank}")
        out.append(d)
    return out


def _along(x: tensor, d: int, rank: int) -> tensor:
    for axis in range(rank):
        if axis != d:
            x = expand_dims(x, axis)
    return x


def pointers(bp: block_ptr, boundary_check: Any) -> tuple[tensor, tensor | None]:
    """The tile of pointers `bp` addresses and the mask of its `boundary_check` dimensions."""
    rank = len(bp.block_shape)
    checked = boundary_dims(bp, boundary_check)
    ptr = bp.base
    mask: tensor | None = None
    for d in range(rank):
        index = _along(arith.add(bp.offsets[d], arange(0, bp.block_shape[d])), d, rank)
        ptr = arith.add(ptr, arith.mul(cast(index, _t.int64), bp.strides[d]))
        if d in checked:
            inside = arith.logical_and(arith.compare("ge", index, 0), arith.compare("lt", cast(index, _t.int64), bp.shape[d]))
            mask = inside if mask is None else arith.logical_and(mask, inside)
    ptr = broadcast_to(ptr, bp.block_shape)
    return ptr, None if mask is None else broadcast_to(mask, bp.block_shape)


def padding(bp: block_ptr, padding_option: Any) -> float | int | None:
    """The value masked-off elements of a block-pointer load take (None: undefined)."""
    option = unwrap(padding_option) or ""
    if option not in PADDING_OPTIONS:
        raise ValueError(f"padding_option must be one of {', '.join(repr(o) for o in PADDING_OPTIONS)}, got {option!r}")
    elem = bp.element_ty
    if option == "nan":
        if not (isinstance(elem, _t.ScalarType) and elem.is_floating()):
            raise ValueError(f"padding_option='nan' needs a floating-point block, got {elem}; use 'zero'")
        return float("nan")
    return 0 if option == "zero" else None
