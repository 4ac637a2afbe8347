"""How wide one memory access of a tile of pointers can be: what a global load or store, and an
asynchronous copy into shared memory, move per instruction."""

from __future__ import annotations

from ...ir.core import Value
from ...ir.types import PointerType, elem_of
from .assign import GpuFunction


def _pow2_floor(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


def _pow2_part(n: int) -> int:
    return n & -n if n > 0 else 1


def access_dim(gpu: GpuFunction, ptr: Value) -> int:
    """The dimension along which `ptr`'s addresses are most contiguous (the last on ties)."""
    info = gpu.axis.info(ptr)
    return max(reversed(range(gpu.layout(ptr).rank)), key=lambda d: info.contig[d])


def access_width(gpu: GpuFunction, ptr: Value, mask: Value | None) -> int:
    """How many consecutive registers of `ptr`'s layout one access covers (1 when nothing is
    known): consecutive and aligned in memory by axis analysis, one mask value, at most 16 bytes."""
    ll = gpu.layout(ptr)
    if ll.rank == 0:
        return 1
    info = gpu.axis.info(ptr)
    dim = access_dim(gpu, ptr)
    pointee = elem_of(ptr.type)
    assert isinstance(pointee, PointerType)
    nbytes = pointee.element_ty.itemsize
    vec = min(
        _pow2_part(info.contig[dim]), max(info.div[dim] // nbytes, 1), ll.contiguous_regs(dim), max(16 // nbytes, 1)
    )
    if mask is not None:
        vec = min(vec, _pow2_part(gpu.axis.info(mask).const[dim]))
    return _pow2_floor(vec)
