"""`TensorDescriptor`: a tensor described on the host for a kernel's `desc.load` / `desc.store`, as in
Triton 3.4+ (`from triton.tools.tensor_descriptor import TensorDescriptor`).

    desc = TensorDescriptor.from_tensor(a, block_shape=[BM, BK])
    kernel[grid](desc, ...)          # in the kernel: desc.load([off_m, off_k])

A launch passes it as its base pointer, shape and strides (`expand`); its block shape and padding are
compile-time values, part of the kernel's specialization.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from despina import arguments
from despina.language.core import unwrap
from despina.language.descriptors import MAX_RANK, MIN_ROW_BYTES, DescriptorArg

__all__ = ["TensorDescriptor"]


@dataclass
class TensorDescriptor:
    """The tensor at `base` (an array: torch, NumPy, CuPy, ...) seen through `shape` and `strides` (in
    elements; the last stride 1) in tiles of `block_shape` (powers of two, at least 16 bytes along the last
    dimension). Elements outside `shape` read as `padding` ("zero" or "nan") and are not written."""

    base: Any
    shape: list[int]
    strides: list[int]
    block_shape: list[int]
    padding: str = "zero"

    def __post_init__(self) -> None:
        self.shape, self.strides = [int(s) for s in self.shape], [int(s) for s in self.strides]
        self.block_shape = [int(unwrap(b)) for b in self.block_shape]
        rank = len(self.shape)
        if not 1 <= rank <= MAX_RANK:
            raise ValueError(f"TensorDescriptor: shape {self.shape} has rank {rank}; despina's tensor descriptors have "
                             f"rank 1 to {MAX_RANK}")
        if len(self.strides) != rank or len(self.block_shape) != rank:
            raise ValueError(f"TensorDescriptor: shape {self.shape}, strides {self.strides} and block_shape "
                             f"{self.block_shape} must have one entry per dimension each")
        if not arguments.is_array(self.base):
            raise TypeError(f"TensorDescriptor: base must be an array (a torch tensor, NumPy or CuPy array), got "
                            f"{type(self.base).__name__}")
        elem = arguments.element_type(self.base.dtype)
        if elem is None or elem.name == "int1":
            raise TypeError(f"TensorDescriptor: base has dtype {self.base.dtype}, which tensor descriptors do not take")
        if arguments.data_ptr(self.base) % 16:
            raise ValueError("TensorDescriptor: base must be 16-byte aligned (its first element's address), as TMA "
                             "requires; pass a tensor that starts on a 16-byte boundary")
        if self.strides[-1] != 1:
            raise ValueError(f"TensorDescriptor: the last stride must be 1 (the last dimension contiguous), got strides "
                             f"{self.strides}; pass a tensor whose last dimension is contiguous (.contiguous())")
        if any(s * elem.itemsize % 16 for s in self.strides[:-1]):
            raise ValueError(f"TensorDescriptor: strides {self.strides} of {elem} elements must be multiples of 16 bytes "
                             "but the last; pad the rows of the tensor")
        if any(b <= 0 or b & (b - 1) for b in self.block_shape):
            raise ValueError(f"TensorDescriptor: block_shape {self.block_shape} must hold powers of two")
        if self.block_shape[-1] * elem.itemsize < MIN_ROW_BYTES:
            raise ValueError(f"TensorDescriptor: block_shape {self.block_shape} has "
                             f"{self.block_shape[-1] * elem.itemsize} bytes along its last dimension; it needs at "
                             f"least {MIN_ROW_BYTES}")
        if self.padding not in ("zero", "nan"):
            raise ValueError(f"TensorDescriptor: padding must be 'zero' or 'nan', got {self.padding!r}")

    @staticmethod
    def from_tensor(tensor: Any, block_shape: list[int], padding: str = "zero") -> TensorDescriptor:
        """The descriptor of all of `tensor`, with its own shape and strides."""
        if hasattr(tensor, "stride") and callable(tensor.stride):
            strides = list(tensor.stride())
        else:  # NumPy and CuPy: strides in bytes
            strides = [s // tensor.dtype.itemsize for s in tensor.strides]
        return TensorDescriptor(tensor, list(tensor.shape), strides, block_shape, padding)


def expand(bound: dict[str, Any]) -> dict[str, Any]:
    """A launch's arguments by name with each `TensorDescriptor` as a launch passes it: its DescriptorArg (a
    compile-time value) under its own name, then its base array, shape and strides (`DescriptorArg.names`)."""
    if not any(isinstance(unwrap(v), TensorDescriptor) for v in bound.values()):
        return bound
    out: dict[str, Any] = {}
    for name, value in bound.items():
        d = unwrap(value)
        if isinstance(d, TensorDescriptor):
            arg = DescriptorArg(tuple(d.block_shape), d.padding)
            out[name] = arg
            out.update(zip(arg.names(name), arg.values(d.base, d.shape, d.strides)))
        else:
            out[name] = value
    return out
