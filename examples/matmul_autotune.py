"""The matmul of examples/matmul.py under `despina.autotune` (Triton's tutorial 03): the first launch
for each (M, N, K) times every config and keeps the fastest; later launches of that shape reuse it.

    python examples/matmul_autotune.py
"""

from __future__ import annotations

import numpy as np

import despina

try:
    from examples._device import to_device, to_host, use_interpreter
    from examples.matmul import matmul_kernel
except ImportError:
    from _device import to_device, to_host, use_interpreter
    from matmul import matmul_kernel

# Tile shapes and launch options to try. On a GPU, larger tiles and more stages win for large
# matrices (Triton's tutorial lists 128x256x64 with 3 stages and 8 warps first); these small ones keep
# the interpreter quick.
CONFIGS = [
    despina.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_warps=warps, num_stages=stages)
    for bm, bn, bk, warps, stages in ((32, 32, 32, 4, 3), (64, 32, 32, 4, 3), (64, 64, 32, 4, 4))
]
matmul_tuned = despina.autotune(configs=CONFIGS, key=["M", "N", "K"])(matmul_kernel)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    M, K = a.shape
    _, N = b.shape
    c = np.empty((M, N), dtype=np.float16)
    a_dev, b_dev, c_dev = to_device(a), to_device(b), to_device(c)
    grid = lambda meta: (despina.cdiv(M, meta["BLOCK_M"]) * despina.cdiv(N, meta["BLOCK_N"]),)  # noqa: E731
    # The tile sizes come from the chosen config: the launch passes none of them.
    matmul_tuned[grid](a_dev, b_dev, c_dev, M, N, K, K, 1, N, 1, N, 1)
    return to_host(c_dev)


def main() -> None:
    interpreted = use_interpreter()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((130, 60)).astype(np.float16)
    b = rng.standard_normal((60, 90)).astype(np.float16)
    c = matmul(a, b)
    expected = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), expected, rtol=1e-2, atol=1e-2)
    print(f"matmul_autotune: {a.shape} @ {b.shape} {'interpreted' if interpreted else 'on the GPU'}, "
          f"best of {len(CONFIGS)} configs {matmul_tuned.best_config}; result matches NumPy")


if __name__ == "__main__":
    main()
