"""Flash-attention-style forward pass: blocks of K/V stream past a block of Q with an online softmax.

    python examples/flash_attention.py
"""

from __future__ import annotations

import math

import numpy as np

import despina
import despina.language as tl

try:
    from examples._device import to_device, to_host, use_interpreter
except ImportError:
    from _device import to_device, to_host, use_interpreter


@despina.jit
def attention_fwd(Q, K, V, Out, sm_scale, stride_h, stride_m, N_CTX, HEAD_DIM: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    head = tl.program_id(1)
    base = head * stride_h
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + offs_m[:, None] * stride_m + offs_d[None, :], mask=offs_m[:, None] < N_CTX, other=0.0)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    hi = tl.minimum((start_m + 1) * BLOCK_M, N_CTX) if CAUSAL else N_CTX
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(K + base + cols[None, :] * stride_m + offs_d[:, None], mask=cols[None, :] < N_CTX, other=0.0)
        qk = tl.dot(q, k) * qk_scale
        valid = cols[None, :] < N_CTX
        if CAUSAL:
            valid = valid & (offs_m[:, None] >= cols[None, :])
        qk = tl.where(valid, qk, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp2(qk - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + base + cols[:, None] * stride_m + offs_d[None, :], mask=cols[:, None] < N_CTX, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(Out + base + offs_m[:, None] * stride_m + offs_d[None, :], acc.to(Out.dtype.element_ty),
             mask=offs_m[:, None] < N_CTX)


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool, block: int = 32) -> np.ndarray:
    heads, n_ctx, head_dim = q.shape
    q_dev, k_dev, v_dev, out = to_device(q), to_device(k), to_device(v), to_device(np.empty_like(q))
    grid = (despina.cdiv(n_ctx, block), heads)
    attention_fwd[grid](q_dev, k_dev, v_dev, out, 1.0 / math.sqrt(head_dim), q.strides[0] // q.itemsize,
                        q.strides[1] // q.itemsize, n_ctx, HEAD_DIM=head_dim, BLOCK_M=block, BLOCK_N=block,
                        CAUSAL=causal)
    return to_host(out)


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    q32, k32, v32 = (t.astype(np.float32) for t in (q, k, v))
    s = q32 @ k32.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[1]
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    return (s / s.sum(axis=-1, keepdims=True)) @ v32


def main() -> None:
    interpreted = use_interpreter()
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 100, 32)).astype(np.float16) for _ in range(3))
    for causal in (False, True):
        out = attention(q, k, v, causal)
        np.testing.assert_allclose(out.astype(np.float32), reference(q, k, v, causal), rtol=2e-2, atol=2e-2)
    print(f"flash_attention: {q.shape} fp16, causal and not, {'interpreted' if interpreted else 'on the GPU'}; "
          "result matches NumPy")


if __name__ == "__main__":
    main()
