"""Recycled result buffers for the large arrays of hot rules.

Every op makes new arrays, a batch's worth of elements each. Fresh NumPy allocations of that
size come straight from the kernel (glibc maps them, or trims and regrows its heap), and the
page faults of touching them cost as much as the arithmetic. The rules that dominate simple
kernels (loads, binary arithmetic, compares) write into buffers from here instead, which are
handed out again once nothing but this pool refers to them.
"""

from __future__ import annotations

import sys

import numpy as np

# Smaller arrays come from malloc's free lists anyway.
MIN_BYTES = 1 << 15
# Live buffers of one shape beyond this many are left to NumPy.
_MAX_PER_SHAPE = 64


class Scratch:
    """A pool of buffers by shape and dtype, each free when only the pool holds it."""

    def __init__(self) -> None:
        self._pool: dict[tuple[tuple[int, ...], np.dtype], list[np.ndarray]] = {}

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """An uninitialised array that no value of the kernel refers to."""
        size = dtype.itemsize
        for d in shape:
            size *= d
        if size < MIN_BYTES:
            return np.empty(shape, dtype)
        bucket = self._pool.setdefault((shape, dtype), [])
        for buf in bucket:
            # The bucket, this loop's variable and getrefcount's own argument: nobody else.
            if sys.getrefcount(buf) == 3:
                return buf
        buf = np.empty(shape, dtype)
        if len(bucket) < _MAX_PER_SHAPE:
            bucket.append(buf)
        return buf
