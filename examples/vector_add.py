"""Vector addition: the smallest complete Despina kernel.

    python examples/vector_add.py
"""

from __future__ import annotations

import numpy as np

import despina
import despina.language as tl

try:
    from examples._device import use_interpreter
except ImportError:
    from _device import use_interpreter


@despina.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def add(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    n = x.size
    grid = lambda meta: (despina.cdiv(n, meta["BLOCK_SIZE"]),)  # noqa: E731
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024)
    return out


def main() -> None:
    interpreted = use_interpreter()
    rng = np.random.default_rng(0)
    x = rng.standard_normal(98432, dtype=np.float32)
    y = rng.standard_normal(98432, dtype=np.float32)
    out = add(x, y)
    np.testing.assert_array_equal(out, x + y)
    where = "in the interpreter (no CUDA GPU found)" if interpreted else "on the GPU"
    print(f"vector_add: {x.size} elements ran {where}; result matches NumPy")


if __name__ == "__main__":
    main()
