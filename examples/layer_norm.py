"""Layer-norm forward: one program per row, statistics accumulated over column blocks.

    python examples/layer_norm.py
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
def layer_norm_fwd(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        x_hat = (x - mean) * rstd
        y = x_hat * w + b
        tl.store(Y + cols, y, mask=mask)


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    M, N = x.shape
    x_dev, w_dev, b_dev, y = to_device(x), to_device(weight), to_device(bias), to_device(np.empty_like(x))
    mean, rstd = to_device(np.empty(M, dtype=np.float32)), to_device(np.empty(M, dtype=np.float32))
    block = min(1024, despina.next_power_of_2(N))
    layer_norm_fwd[(M,)](x_dev, y, w_dev, b_dev, mean, rstd, x.strides[0] // x.itemsize, N, eps, BLOCK_SIZE=block)
    return to_host(y)


def reference(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    x32 = x.astype(np.float32)
    mean = x32.mean(axis=1, keepdims=True)
    var = ((x32 - mean) ** 2).mean(axis=1, keepdims=True)
    return ((x32 - mean) / np.sqrt(var + eps) * weight.astype(np.float32) + bias.astype(np.float32)).astype(x.dtype)


def main() -> None:
    interpreted = use_interpreter()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 1500)).astype(np.float16)
    w = rng.standard_normal(1500).astype(np.float16)
    b = rng.standard_normal(1500).astype(np.float16)
    y = layer_norm(x, w, b)
    np.testing.assert_allclose(y.astype(np.float32), reference(x, w, b).astype(np.float32), rtol=1e-2, atol=1e-2)
    print(f"layer_norm: {x.shape} fp16 {'interpreted' if interpreted else 'on the GPU'}; result matches NumPy")


if __name__ == "__main__":
    main()
