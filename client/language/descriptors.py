"""Tensor descriptors (`tl.make_tensor_descriptor`, `desc.load`, `desc.store`): Triton 3.4+'s tiles of a
tensor in global memory, by offsets.

A descriptor is a value of the language, not of the IR, like a block pointer (`block_ptr.py`).
`desc.load(offsets)` is one op, `descriptor_load`, and `desc.store(offsets, tile)` one op,
`descriptor_store`, which the NVPTX backend carries out with the tensor memory accelerator (TMA) where
it can, and otherwise expands to the load or store of the block pointer at `offsets` with every
dimension checked against `shape` (`passes/descriptors.py`): elements outside read as the padding, 0
by default, and are not written. The last stride is 1 (Triton requires it, for TMA), so the last
dimension is contiguous. A host `TensorDescriptor`
(`despina.tools.tensor_descriptor`) passed to a kernel arrives as its base pointer, shape and strides
(`DescriptorArg` names them) and is rebuilt here as the same object.

    desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    a = desc.load([pid_m * BM, k])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from despina.compiler.ir import types as _t
from despina.compiler.ir.ops_memory import CACHE_MODIFIERS, EVICTION_POLICIES

from . import memory
from .block_ptr import PADDING_OPTIONS, block_dims, scalars
from .core import builder, builtin, tensor, unwrap
from .semantic import cast, to_tensor
from .shape import MAX_TILE_NUMEL

MAX_RANK = 3
"""The largest rank despina's descriptors take (Triton's take 5)."""

MIN_ROW_BYTES = 16
"""The fewest bytes of a block's last dimension (TMA moves 16-byte units)."""


class tensor_descriptor:
    """A `block_shape` window onto a tensor of `shape` and `strides` (in elements) at `base`: what
    `tl.make_tensor_descriptor` returns, and what a host `TensorDescriptor` argument is in the kernel."""

    def __init__(self, base: tensor, shape: tuple[tensor, ...], strides: tuple[tensor, ...],
                 block_shape: tuple[int, ...], padding: str) -> None:
        self.base, self.shape, self.strides = base, shape, strides
        self.block_shape, self.padding = block_shape, padding

    @property
    def dtype(self) -> _t.ElemType:
        """The type of the tensor's elements."""
        dt = self.base.dtype
        assert isinstance(dt, _t.PointerType)
        return dt.element_ty

    @property
    def block_type(self) -> _t.TileType:
        """The type of the tiles `load` returns."""
        return _t.TileType(self.block_shape, self.dtype)

    def __repr__(self) -> str:
        return f"tensor_descriptor({self.dtype}, block_shape={list(self.block_shape)})"

    def _offsets(self, offsets: Any, fn: str) -> tuple[tensor, ...]:
        items = unwrap(offsets)
        items = list(items) if isinstance(items, (tuple, list)) else [items]
        rank = len(self.block_shape)
        if len(items) != rank:
            raise ValueError(f"{fn}: expected {rank} offsets, one per dimension of block_shape {list(self.block_shape)}, "
                             f"got {len(items)}")
        return scalars(items, rank, "offsets", _t.int32, fn)

    @builtin
    def load(self, offsets: Any, cache_modifier: Any = "", eviction_policy: Any = "") -> tensor:
        """The `block_shape` tile at `offsets` (one per dimension); elements outside `shape` read as the
        descriptor's padding (0, or NaN with padding_option="nan")."""
        operands = [self.base, *self.shape, *self.strides[:-1], *self._offsets(offsets, "desc.load")]
        attrs = {"shape": list(self.block_shape), "padding": self.padding,
                 "cache": memory.check_option(cache_modifier, CACHE_MODIFIERS, "cache_modifier"),
                 "evict": memory.check_option(eviction_policy, EVICTION_POLICIES, "eviction_policy")}
        return tensor(builder().create("descriptor_load", [o.handle for o in operands], attrs).result)

    @builtin
    def store(self, offsets: Any, value: Any) -> None:
        """Write `value`, a tile of `block_shape` (cast to the element type), at `offsets`; elements that
        fall outside `shape` are not written."""
        v = unwrap(value)
        shape = v.shape if isinstance(v, tensor) else ()
        if shape != self.block_shape:
            raise ValueError(f"desc.store: the value's shape {list(shape)} is not the descriptor's block_shape "
                             f"{list(self.block_shape)}; store a tile of exactly that shape")
        operands = [self.base, *self.shape, *self.strides[:-1], *self._offsets(offsets, "desc.store"),
                    cast(v, self.dtype)]
        builder().create("descriptor_store", [o.handle for o in operands], {})


@builtin
def make_tensor_descriptor(base: Any, shape: Any, strides: Any, block_shape: Any, padding_option: Any = "zero"
                           ) -> tensor_descriptor:
    """A descriptor of the tensor at `base` with `shape` and `strides` (in elements; the last stride
    must be the constant 1), whose `load` and `store` move `block_shape` tiles (powers of two, at least
    16 bytes along the last dimension). Elements outside `shape` read as `padding_option` ("zero" or
    "nan") and are not written.

        desc = tl.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BM, BN])
        desc.store([pid_m * BM, pid_n * BN], acc.to(tl.float16))
    """
    fn = "tl.make_tensor_descriptor"
    p = unwrap(base)
    if not isinstance(p, tensor) or p.shape or not isinstance(p.dtype, _t.PointerType):
        raise TypeError(f"{fn}'s base must be a pointer, got {p!r}")
    dims = check_block_shape(block_shape, p.dtype.element_ty, fn)
    rank = len(dims)
    items = unwrap(strides)
    items = list(items) if isinstance(items, (tuple, list)) else [items]
    if len(items) != rank:
        raise ValueError(f"{fn}: strides has {len(items)} entries, block_shape has {rank}; give one per dimension")
    last = unwrap(items[-1])
    if isinstance(last, tensor) or last != 1:
        got = f"a run-time {last.type} value" if isinstance(last, tensor) else repr(last)
        raise ValueError(f"{fn}: the last stride must be the constant 1 (the last dimension contiguous), got {got}; "
                         "pass 1, or permute the tensor so that its contiguous dimension comes last")
    return tensor_descriptor(p, scalars(shape, rank, "shape", _t.int64, fn),
                             scalars(items, rank, "strides", _t.int64, fn), dims,
                             check_padding(padding_option, p.dtype.element_ty, fn))


def check_block_shape(block_shape: Any, elem: _t.ElemType, fn: str) -> tuple[int, ...]:
    """`block_shape` as a descriptor of `elem`s takes it (powers of two, rank 1 to MAX_RANK, at most
    MAX_TILE_NUMEL elements, MIN_ROW_BYTES along the last dimension); a ValueError or TypeError that
    starts with `fn` otherwise. The same rules for `tl.make_tensor_descriptor`, a host TensorDescriptor
    rebuilt in a kernel and a `tensordesc<...>` signature entry (`despina.signature`)."""
    if not isinstance(elem, _t.ScalarType) or elem == _t.int1:
        raise TypeError(f"{fn}: tensor descriptors take tensors of numbers of 8 bits or more, not of {elem}")
    dims = block_dims(block_shape, fn)
    if not 1 <= len(dims) <= MAX_RANK:
        raise ValueError(f"{fn}: block_shape {list(dims)} has rank {len(dims)}; despina's tensor descriptors have "
                         f"rank 1 to {MAX_RANK} (reshape the tensor, or use pointer tiles)")
    numel = 1
    for d in dims:
        numel *= d
    if numel > MAX_TILE_NUMEL:
        raise ValueError(f"{fn}: block_shape {list(dims)} has {numel} elements, more than {MAX_TILE_NUMEL}")
    if dims[-1] * elem.itemsize < MIN_ROW_BYTES:
        raise ValueError(f"{fn}: block_shape {list(dims)} has {dims[-1] * elem.itemsize} bytes along its last "
                         f"dimension ({dims[-1]} x {elem}); it needs at least {MIN_ROW_BYTES}")
    return dims


def check_padding(option: Any, elem: _t.ElemType, fn: str) -> str:
    """`option`, "zero" or "nan" ("nan" for floating-point `elem`s only); a ValueError that starts with `fn` otherwise."""
    option = unwrap(option)
    if option not in PADDING_OPTIONS[1:]:
        raise ValueError(f"{fn}: padding_option must be 'zero' or 'nan', got {option!r}")
    if option == "nan" and not (isinstance(elem, _t.ScalarType) and elem.is_floating()):
        raise ValueError(f"{fn}: padding_option='nan' needs a floating-point block, got {elem}; use 'zero'")
    return str(option)


@builtin
def load_tensor_descriptor(desc: Any, offsets: Any) -> tensor:
    """`desc.load(offsets)`."""
    return _descriptor(desc, "tl.load_tensor_descriptor").load(offsets)


@builtin
def store_tensor_descriptor(desc: Any, offsets: Any, value: Any) -> None:
    """`desc.store(offsets, value)`."""
    _descriptor(desc, "tl.store_tensor_descriptor").store(offsets, value)


def _descriptor(desc: Any, fn: str) -> tensor_descriptor:
    d = unwrap(desc)
    if not isinstance(d, tensor_descriptor):
        raise TypeError(f"{fn} needs a tensor descriptor (tl.make_tensor_descriptor), got {d!r}")
    return d


@dataclass(frozen=True)
class DescriptorArg:
    """The compile-time part of a tensor descriptor passed to a function (a host `TensorDescriptor` at a
    launch, or a descriptor passed to a @jit helper): its block shape and padding. Its run-time part
    travels as parameters named after the descriptor's: `NAME.base`, `NAME.shape0`..., and
    `NAME.stride0`... up to the one before last (the last stride is 1)."""

    block_shape: tuple[int, ...]
    padding: str

    def names(self, name: str) -> list[str]:
        rank = len(self.block_shape)
        return [f"{name}.base", *(f"{name}.shape{i}" for i in range(rank)),
                *(f"{name}.stride{i}" for i in range(rank - 1))]

    def values(self, base: Any, shape: Any, strides: Any) -> list[Any]:
        """The run-time values, in the order of `names`."""
        return [base, *shape, *list(strides)[:-1]]

    def rebuild(self, name: str, scope: dict[str, Any], fn: str) -> tensor_descriptor:
        """The descriptor whose run-time parts `scope` holds under `names(name)` (taken out of it)."""
        parts = [scope.pop(n) for n in self.names(name)]
        rank = len(self.block_shape)
        base = parts[0]
        dims = check_block_shape(self.block_shape, base.dtype.element_ty, fn)
        shape = tuple(cast(s, _t.int64) for s in parts[1:1 + rank])
        strides = tuple(cast(s, _t.int64) for s in parts[1 + rank:]) + (to_tensor(1, _t.int64),)
        return tensor_descriptor(base, shape, strides, dims, check_padding(self.padding, base.dtype.element_ty, fn))


def flatten(name: str, value: Any) -> list[tuple[str, Any]] | None:
    """A descriptor passed to a @jit helper as parameter `name`: (name, DescriptorArg), then its run-time
    parts; None for any other value."""
    if not isinstance(value, tensor_descriptor):
        return None
    arg = DescriptorArg(value.block_shape, value.padding)
    return [(name, arg), *zip(arg.names(name), arg.values(value.base, value.shape, value.strides))]

