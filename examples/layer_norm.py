"""Layer norm, forward and backward, as in Triton's tutorial 05.

Forward: one program per row, statistics accumulated over column blocks. Backward: one program
per row computes its row of dX and adds its row's share of dW and dB into one of GROUP_SIZE_M
partial sums, taking that partial sum's spin lock (`tl.atomic_cas`) to do so; a second kernel
sums the partial sums by columns. Programs wait on each other for the locks: the interpreter
runs them one at a time once it sees them waiting.

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


@despina.jit
def layer_norm_bwd_dx_fused(DX, DY, DW, DB, X, W, Mean, Rstd, Lock, stride, N,
                            GROUP_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE_N)
    mask = cols < N
    X += row * stride
    DY += row * stride
    DX += row * stride
    # Row r adds into partial sum r % GROUP_SIZE_M of dW and dB, behind lock r % GROUP_SIZE_M;
    # the count after the locks says whether that partial sum holds a row yet.
    lock_id = row % GROUP_SIZE_M
    Lock += lock_id
    Count = Lock + GROUP_SIZE_M
    DW = DW + lock_id * N + cols
    DB = DB + lock_id * N + cols
    x = tl.load(X + cols, mask=mask, other=0).to(tl.float32)
    dy = tl.load(DY + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    mean = tl.load(Mean + row)
    rstd = tl.load(Rstd + row)
    xhat = (x - mean) * rstd
    wdy = w * dy
    xhat = tl.where(mask, xhat, 0.)
    wdy = tl.where(mask, wdy, 0.)
    c1 = tl.sum(xhat * wdy, axis=0) / N
    c2 = tl.sum(wdy, axis=0) / N
    dx = (wdy - (xhat * c1 + c2)) * rstd
    tl.store(DX + cols, dx, mask=mask)
    partial_dw = (dy * xhat).to(w.dtype)
    partial_db = dy.to(w.dtype)
    while tl.atomic_cas(Lock, 0, 1) == 1:
        pass
    count = tl.load(Count)
    # The first row of a group stores its share; the others add theirs.
    if count == 0:
        tl.atomic_xchg(Count, 1)
    else:
        partial_dw += tl.load(DW, mask=mask)
        partial_db += tl.load(DB, mask=mask)
    tl.store(DW, partial_dw, mask=mask)
    tl.store(DB, partial_db, mask=mask)
    # Every thread of the program has stored before the lock is released.
    tl.debug_barrier()
    tl.atomic_xchg(Lock, 0)


@despina.jit
def layer_norm_bwd_dwdb(DW, DB, FINAL_DW, FINAL_DB, M, N, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = pid * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    dw = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    db = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for i in range(0, M, BLOCK_SIZE_M):
        rows = i + tl.arange(0, BLOCK_SIZE_M)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        offs = rows[:, None] * N + cols[None, :]
        dw += tl.load(DW + offs, mask=mask, other=0.)
        db += tl.load(DB + offs, mask=mask, other=0.)
    sum_dw = tl.sum(dw, axis=0)
    sum_db = tl.sum(db, axis=0)
    tl.store(FINAL_DW + cols, sum_dw, mask=cols < N)
    tl.store(FINAL_DB + cols, sum_db, mask=cols < N)


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    return layer_norm_with_stats(x, weight, bias, eps)[0]


def layer_norm_with_stats(x: np.ndarray, weight: np.ndarray, bias: np.ndarray,
                          eps: float = 1e-5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The forward pass's output and the per-row mean and 1/std the backward pass needs."""
    M, N = x.shape
    x_dev, w_dev, b_dev, y = to_device(x), to_device(weight), to_device(bias), to_device(np.empty_like(x))
    mean, rstd = to_device(np.empty(M, dtype=np.float32)), to_device(np.empty(M, dtype=np.float32))
    block = min(1024, despina.next_power_of_2(N))
    layer_norm_fwd[(M,)](x_dev, y, w_dev, b_dev, mean, rstd, x.strides[0] // x.itemsize, N, eps, BLOCK_SIZE=block)
    return to_host(y), to_host(mean), to_host(rstd)


def layer_norm_backward(dy: np.ndarray, x: np.ndarray, weight: np.ndarray, mean: np.ndarray,
                        rstd: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dX, dW and dB of the layer norm of `x` (rows that fit one block) for the output gradient `dy`."""
    M, N = x.shape
    block = despina.next_power_of_2(N)
    group = 64 if N > 8192 else 96 if N > 4096 else 128 if N > 1024 else 256
    locks = to_device(np.zeros(2 * group, dtype=np.int32))
    partial_dw = to_device(np.zeros((group, N), dtype=x.dtype))
    partial_db = to_device(np.zeros((group, N), dtype=x.dtype))
    dx, dw, db = (to_device(np.empty_like(a)) for a in (dy, weight, weight))
    layer_norm_bwd_dx_fused[(M,)](dx, to_device(dy), partial_dw, partial_db, to_device(x), to_device(weight),
                                  to_device(mean), to_device(rstd), locks, x.strides[0] // x.itemsize, N,
                                  GROUP_SIZE_M=group, BLOCK_SIZE_N=block)
    layer_norm_bwd_dwdb[(despina.cdiv(N, 128),)](partial_dw, partial_db, dw, db, min(group, M), N,
                                                 BLOCK_SIZE_M=32, BLOCK_SIZE_N=128)
    return to_host(dx), to_host(dw), to_host(db)


def reference(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    x32 = x.astype(np.float32)
    mean = x32.mean(axis=1, keepdims=True)
    var = ((x32 - mean) ** 2).mean(axis=1, keepdims=True)
    return ((x32 - mean) / np.sqrt(var + eps) * weight.astype(np.float32) + bias.astype(np.float32)).astype(x.dtype)


def reference_backward(dy: np.ndarray, x: np.ndarray, weight: np.ndarray,
                       eps: float = 1e-5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dX, dW and dB in float32."""
    x32, dy32 = x.astype(np.float32), dy.astype(np.float32)
    mean = x32.mean(axis=1, keepdims=True)
    rstd = 1 / np.sqrt(((x32 - mean) ** 2).mean(axis=1, keepdims=True) + eps)
    xhat = (x32 - mean) * rstd
    wdy = weight.astype(np.float32) * dy32
    c1 = (xhat * wdy).mean(axis=1, keepdims=True)
    c2 = wdy.mean(axis=1, keepdims=True)
    return (wdy - (xhat * c1 + c2)) * rstd, (dy32 * xhat).sum(axis=0), dy32.sum(axis=0)


def check_backward(M: int, N: int, seed: int = 0) -> None:
    """Run the backward pass on random fp16 data of shape (M, N) and compare it with NumPy."""
    rng = np.random.default_rng(seed)
    x, dy = (rng.standard_normal((M, N)).astype(np.float16) for _ in range(2))
    w, b = (rng.standard_normal(N).astype(np.float16) for _ in range(2))
    _, mean, rstd = layer_norm_with_stats(x, w, b)
    got = layer_norm_backward(dy, x, w, mean, rstd)
    for name, g, want in zip(("dx", "dw", "db"), got, reference_backward(dy, x, w)):
        # The partial sums are fp16, as in the tutorial: their rounding grows with the rows per group.
        np.testing.assert_allclose(g.astype(np.float32), want, rtol=1e-2, atol=2e-3 * np.abs(want).max(), err_msg=name)


def main() -> None:
    interpreted = use_interpreter()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 1500)).astype(np.float16)
    w = rng.standard_normal(1500).astype(np.float16)
    b = rng.standard_normal(1500).astype(np.float16)
    y = layer_norm(x, w, b)
    np.testing.assert_allclose(y.astype(np.float32), reference(x, w, b).astype(np.float32), rtol=1e-2, atol=1e-2)
    # 512 rows share 256 locks: in the interpreter, programs of one batch wait for each other.
    check_backward(512, 200)
    where = "interpreted" if interpreted else "on the GPU"
    print(f"layer_norm: forward {x.shape} and backward (512, 200), fp16, {where}; each result matches NumPy")


if __name__ == "__main__":
    main()
