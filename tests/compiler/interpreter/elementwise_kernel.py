"""Kernels that apply one op to whole tiles loaded from the arguments and store the result."""

from __future__ import annotations

from typing import Any

import numpy as np

from despina.compiler.ir.types import ScalarType, Type

from .kernel import K, ptr
from .reference import NUMPY, from_memory, to_memory


def apply(
    op: str, in_dtypes: list[str], out_dtype: str, inputs: list[np.ndarray], programs: int = 4, **attrs: Any
) -> np.ndarray:
    """Run `op` over `inputs` (values of `in_dtypes`) split across `programs` programs."""
    n = len(inputs[0])
    block = n // programs
    params: dict[str, Type] = {f"in{i}": ptr(d) for i, d in enumerate(in_dtypes)}
    k = K(f"apply_{op}", **params, out=ptr(out_dtype))
    offs = k.offsets(block)
    values = [k.op("load", k.at(k.arg[f"in{i}"], offs)) for i in range(len(in_dtypes))]
    if "to" in attrs and isinstance(attrs["to"], str):
        attrs["to"] = ScalarType(attrs["to"])
    k.void("store", k.at(k.arg["out"], offs), k.op(op, *values, **attrs))
    out = np.zeros(n, dtype=np.uint16 if out_dtype == "bf16" else NUMPY[out_dtype])
    k.run(programs, *[to_memory(x, d) for x, d in zip(inputs, in_dtypes)], out)
    return from_memory(out, out_dtype)
