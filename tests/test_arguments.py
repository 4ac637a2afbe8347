"""`despina.arguments.element_type`: the scalar type of each library's dtype, the same on a second call
(it remembers dtypes it has seen), None for what has none, and unhashable dtype-likes still answered."""

from __future__ import annotations

import numpy as np
import pytest

import despina.language as tl
from despina.arguments import element_type


class _Unhashable:
    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        return "torch.bfloat16"


@pytest.mark.parametrize("dtype,want", [
    (np.dtype(np.float16), tl.float16), (np.float32, tl.float32), (np.dtype("int8"), tl.int8), (np.uint64, tl.uint64),
    ("torch.bfloat16", tl.bfloat16), ("torch.float8_e4m3fn", tl.float8e4nv), (tl.int32, tl.int32),
    (np.dtype("complex64"), None), (object, None), (_Unhashable(), tl.bfloat16),
])
def test_element_type(dtype: object, want: object) -> None:
    assert element_type(dtype) == want
    assert element_type(dtype) == want  # remembered (or, unhashable, worked out again)
