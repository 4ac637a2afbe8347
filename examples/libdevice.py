"""Calling NVIDIA's libdevice from a kernel (Triton's tutorial 07): `libdevice.asin` is `__nv_asinf` on
fp32 and `__nv_asin` on fp64, picked by the argument's type.

    python examples/libdevice.py
"""

from __future__ import annotations

import numpy as np

import despina
import despina.language as tl
from despina.language.extra import libdevice

try:
    from examples._device import to_device, to_host, use_interpreter
except ImportError:
    from _device import to_device, to_host, use_interpreter


@despina.jit
def asin_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    x = libdevice.asin(x)
    tl.store(y_ptr + offsets, x, mask=mask)


def asin(x: np.ndarray) -> np.ndarray:
    n = x.size
    x_dev, out = to_device(x), to_device(np.empty_like(x))
    asin_kernel[(despina.cdiv(n, 1024),)](x_dev, out, n, BLOCK_SIZE=1024)
    return to_host(out)


def main() -> None:
    interpreted = use_interpreter()
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        x = rng.uniform(-1, 1, 98432).astype(dtype)
        np.testing.assert_allclose(asin(x), np.arcsin(x), rtol=1e-6 if dtype == np.float32 else 1e-14, atol=0)
    print(f"libdevice: asin of {x.size} fp32 and fp64 elements {'interpreted' if interpreted else 'on the GPU'}; "
          "result matches NumPy")


if __name__ == "__main__":
    main()
