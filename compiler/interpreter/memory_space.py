"""The interpreter's fake global address space: one buffer per pointer argument.

Argument `i` lives at address `(i + 1) << 40`, so an address names its buffer in its high
bits; a null pointer is address 0. The kernel reads and writes the caller's arrays in place
through byte views, reinterpreted as whatever element type a pointer says.

Every write is announced (`will_write`, or `wrote` after an atomic): `writes` counts them, so
that a while loop can tell whether an iteration changed memory, and while a batch that may
have to start over runs (see `schedule`), a journal keeps what each write replaced.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.types import PointerType

BUFFER_SHIFT = 40
# An address belongs to the buffer whose start is nearest, so that an access a little before
# a buffer (offset -1) is still reported against that buffer.
_HALF = 1 << (BUFFER_SHIFT - 1)


class Buffer:
    """One argument's memory: `nbytes` bytes at address `start`."""

    __slots__ = ("index", "name", "start", "nbytes", "data", "_views")

    def __init__(self, index: int, name: str, data: np.ndarray) -> None:
        self.index = index
        self.name = name
        self.start = (index + 1) << BUFFER_SHIFT
        self.data = data
        self.nbytes = data.size
        self._views: dict[np.dtype, np.ndarray] = {}

    def view(self, dtype: np.dtype) -> np.ndarray:
        """The buffer as a flat array of `dtype` (trailing bytes that do not fill one are cut)."""
        v = self._views.get(dtype)
        if v is None:
            usable = self.nbytes - self.nbytes % dtype.itemsize
            v = self._views[dtype] = self.data[:usable].view(dtype)
        return v


class Memory:
    """The buffers of one launch, found by address."""

    def __init__(self) -> None:
        self.buffers: dict[int, Buffer] = {}
        self.nulls: list[str] = []
        self.writes = 0
        # (view, index, what view[index] held before), oldest first; None: no journal is kept.
        self.journal: list[tuple[np.ndarray, Any, np.ndarray]] | None = None

    def add_buffer(self, index: int, name: str, array: Any, ty: PointerType) -> int:
        """Map `array` (argument `index`) into the address space; its address, 0 for None."""
        if array is None:
            self.nulls.append(name)
            return 0
        if not isinstance(array, np.ndarray):
            raise TypeError(f"argument '{name}' ({ty}) must be a numpy array or None, got {type(array).__name__}")
        if not array.flags.c_contiguous or not array.flags.writeable:
            raise TypeError(f"argument '{name}' ({ty}) must be a C-contiguous writable array")
        buf = Buffer(index, name, array.reshape(-1).view(np.uint8))
        self.buffers[index] = buf
        return buf.start

    def owner(self, address: int) -> Buffer | None:
        """The buffer `address` lies in or nearest to, None for null and wild addresses."""
        return self.buffers.get(((address + _HALF) >> BUFFER_SHIFT) - 1)

    def owners(self, addresses: np.ndarray) -> np.ndarray:
        """`owner` for each address, as the argument index (-1 and up: no buffer)."""
        return ((addresses + np.int64(_HALF)) >> np.int64(BUFFER_SHIFT)) - 1

    def will_write(self, view: np.ndarray, index: Any) -> None:
        """`view[index]` (a slice or an index array) is about to be written."""
        self.writes += 1
        if self.journal is not None:
            before = view[index]
            self.journal.append((view, index, before.copy() if isinstance(index, slice) else before))

    def wrote(self, view: np.ndarray, index: np.ndarray, before: np.ndarray) -> None:
        """`view[index]` was written over `before` (a copy): counted only if that changed a bit."""
        if self.journal is not None:
            self.journal.append((view, index, before))
        if not np.array_equal(view[index].view(np.uint8), before.view(np.uint8)):
            self.writes += 1

    def rollback(self) -> None:
        """Undo the journaled writes, newest first, and keep no journal from now on."""
        assert self.journal is not None
        for view, index, before in reversed(self.journal):
            view[index] = before
        self.journal = None
