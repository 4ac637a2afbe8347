"""Row-wise softmax in one pass over each row (Triton's fused-softmax tutorial).

    python examples/fused_softmax.py
"""

from __future__ import annotations

import numpy as np

import despina
import despina.language as tl

try:
    from examples._device import to_device, to_host, use_interpreter
except ImportError:
    from _device import to_device, to_host, use_interpreter


@despina.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols, BLOCK_SIZE: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row in tl.range(row_start, n_rows, row_step):
        cols = tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        row_values = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
        shifted = row_values - tl.max(row_values, axis=0)
        numerator = tl.exp(shifted)
        denominator = tl.sum(numerator, axis=0)
        tl.store(out_ptr + row * out_row_stride + cols, numerator / denominator, mask=mask)


def softmax(x: np.ndarray, programs: int = 64) -> np.ndarray:
    n_rows, n_cols = x.shape
    row_stride = x.strides[0] // x.itemsize  # the output is laid out as the input
    x_dev, out = to_device(x), to_device(np.empty_like(x))
    block = despina.next_power_of_2(n_cols)
    softmax_kernel[(min(programs, n_rows),)](out, x_dev, row_stride, row_stride, n_rows, n_cols, BLOCK_SIZE=block)
    return to_host(out)


def reference(x: np.ndarray) -> np.ndarray:
    z = x - x.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def main() -> None:
    interpreted = use_interpreter()
    x = np.random.default_rng(0).standard_normal((123, 781), dtype=np.float32)
    np.testing.assert_allclose(softmax(x), reference(x), rtol=1e-5, atol=1e-6)
    print(f"fused_softmax: {x.shape} {'interpreted' if interpreted else 'on the GPU'}; result matches NumPy")


if __name__ == "__main__":
    main()
