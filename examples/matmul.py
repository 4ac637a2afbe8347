"""Blocked matrix multiplication with grouped program ordering and K masking.

    python examples/matmul.py
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
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = accumulator.to(tl.float16)

    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


def matmul(a: np.ndarray, b: np.ndarray, block_m: int = 32, block_n: int = 32, block_k: int = 32) -> np.ndarray:
    M, K = a.shape
    K2, N = b.shape
    assert K == K2, "inner dimensions differ"
    c = np.empty((M, N), dtype=np.float16)
    a_dev, b_dev, c_dev = to_device(a), to_device(b), to_device(c)
    grid = lambda meta: (despina.cdiv(M, meta["BLOCK_M"]) * despina.cdiv(N, meta["BLOCK_N"]),)  # noqa: E731
    s = a.itemsize
    matmul_kernel[grid](a_dev, b_dev, c_dev, M, N, K, a.strides[0] // s, a.strides[1] // s, b.strides[0] // s,
                        b.strides[1] // s, c.strides[0] // 2, c.strides[1] // 2, BLOCK_M=block_m, BLOCK_N=block_n,
                        BLOCK_K=block_k, GROUP_M=4)
    return to_host(c_dev)


def main() -> None:
    interpreted = use_interpreter()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((150, 70)).astype(np.float16)
    b = rng.standard_normal((70, 90)).astype(np.float16)
    c = matmul(a, b)
    expected = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
    np.testing.assert_allclose(c.astype(np.float32), expected.astype(np.float32), rtol=1e-2, atol=1e-2)
    print(f"matmul: {a.shape} @ {b.shape} {'interpreted' if interpreted else 'on the GPU'}; result matches NumPy")


if __name__ == "__main__":
    main()
