"""Low-memory dropout: the keep mask is regenerated from a seed instead of being stored.

    python examples/dropout.py
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
def seeded_dropout_kernel(x_ptr, output_ptr, n_elements, p, seed, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    random = tl.rand(seed, offsets)
    x_keep = random > p
    output = tl.where(x_keep, x / (1 - p), 0.0)
    tl.store(output_ptr + offsets, output, mask=mask)


def seeded_dropout(x: np.ndarray, p: float, seed: int) -> np.ndarray:
    n = x.size
    x_dev, out = to_device(x), to_device(np.empty_like(x))
    seeded_dropout_kernel[(despina.cdiv(n, 1024),)](x_dev, out, n, p, seed, BLOCK_SIZE=1024)
    return to_host(out)


def main() -> None:
    interpreted = use_interpreter()
    x = np.random.default_rng(0).standard_normal(10_000, dtype=np.float32)
    a = seeded_dropout(x, p=0.5, seed=123)
    b = seeded_dropout(x, p=0.5, seed=123)
    c = seeded_dropout(x, p=0.5, seed=512)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c), "different seeds must give different masks"
    kept = a != 0
    assert 0.45 < kept.mean() < 0.55, f"keep rate {kept.mean():.3f} is far from 0.5"
    np.testing.assert_allclose(a[kept], x[kept] * 2.0, rtol=1e-6)
    print(f"dropout: {x.size} elements {'interpreted' if interpreted else 'on the GPU'}; "
          f"same seed -> same mask, keep rate {kept.mean():.3f}")


if __name__ == "__main__":
    main()
