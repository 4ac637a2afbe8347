"""Data-dependent indexing: `gather` along an axis and `histogram`.

As on the GPU, both work on whole tiles of one program. An index outside the source of a
`gather` is undefined in Triton; here it is reported (on the GPU it wraps around the power-of-two
extent), so that a kernel's bug shows up in the interpreter rather than as silent garbage.
"""

from __future__ import annotations

import numpy as np

from ..ir.core import Op
from ..ir.types import shape_of
from .core import State, rule
from .values import Val, along_programs, full


@rule("gather")
def gather(st: State, op: Op) -> list[Val]:
    src_v, index_v = op.operands
    src, index = full(st.get(src_v), src_v.type), full(st.get(index_v), index_v.type)
    rows = max(src.shape[0], index.shape[0])
    src = np.broadcast_to(src, (rows,) + src.shape[1:])
    index = np.broadcast_to(index, (rows,) + index.shape[1:])
    axis = op.attrs["axis"]
    extent = shape_of(src_v.type)[axis]
    bad = (index < 0) | (index >= extent)
    if st.active is not None and rows > 1:
        bad &= along_programs(st.active, bad.ndim)
    if bad.any():
        where = np.argwhere(bad)[0]
        raise st.error(op, f"tl.gather index {index[tuple(where)]} is out of range for axis {axis} of extent {extent} "
                           f"(at index {tuple(int(i) for i in where[1:])} of program {st.program(int(where[0]))}); "
                           "gather indices must lie in [0, extent)")
    safe = np.clip(index, 0, extent - 1).astype(np.int64)
    return [np.take_along_axis(src, safe, axis=axis + 1)]


@rule("histogram")
def histogram(st: State, op: Op) -> list[Val]:
    x = full(st.get(op.operands[0]), op.operands[0].type)
    bins = op.attrs["num_bins"]
    keep = (x >= 0) & (x < bins)
    if len(op.operands) == 2:
        keep = keep & full(st.get(op.operands[1]), op.operands[1].type)
    rows = keep.shape[0]
    x = np.broadcast_to(x, keep.shape)
    flat = np.where(keep, x, 0).astype(np.int64) + np.arange(rows, dtype=np.int64)[:, None] * bins
    counts = np.bincount(flat[keep], minlength=rows * bins)
    return [counts.reshape(rows, bins).astype(np.int32)]
