"""What benchmarks/tutorial_figures.py measures: for each tutorial, the sizes, the arguments, how a
flavor's kernel is launched (`launch(kernels)` returns the output), PyTorch's operation, the check, and
the work per run (bytes moved or floating-point operations) that turns a time into GB/s or TFLOP/s.

Arrays come from a backend: CUDA tensors of PyTorch on a GPU host, NumPy arrays in a dry run (the
interpreter), so the same cases check the plumbing anywhere.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

UNITS = {"GB/s": 1e9, "TFLOP/s": 1e12}
DROPOUT_P = 0.5


class Backend(ABC):
    """Where the arrays live; `torch` is the torch module on a GPU host, None in a dry run."""

    torch: Any = None

    @abstractmethod
    def randn(self, shape: tuple[int, ...], dtype: str) -> Any: ...

    @abstractmethod
    def empty(self, shape: tuple[int, ...], dtype: str) -> Any: ...

    @abstractmethod
    def zeros(self, shape: tuple[int, ...], dtype: str) -> Any: ...

    @abstractmethod
    def host(self, x: Any) -> np.ndarray:
        """`x` as a NumPy array (copied from the GPU)."""

    @abstractmethod
    def programs(self) -> int:
        """Programs of a persistent kernel: the GPU's SM count."""

    def stride(self, x: Any, dim: int) -> int:
        return int(x.stride(dim)) if self.torch is not None else x.strides[dim] // x.itemsize

    def close(self, got: Any, want: Any, tol: float) -> None:
        np.testing.assert_allclose(self.host(got).astype(np.float32), self.host(want).astype(np.float32),
                                   rtol=tol, atol=tol)


class NumpyBackend(Backend):
    def __init__(self) -> None:
        self.rng = np.random.default_rng(0)

    def randn(self, shape: tuple[int, ...], dtype: str) -> np.ndarray:
        return self.rng.standard_normal(shape).astype(dtype)

    def empty(self, shape: tuple[int, ...], dtype: str) -> np.ndarray:
        return np.empty(shape, dtype)

    def zeros(self, shape: tuple[int, ...], dtype: str) -> np.ndarray:
        return np.zeros(shape, dtype)

    def host(self, x: Any) -> np.ndarray:
        return np.asarray(x)

    def programs(self) -> int:
        return 4


class TorchBackend(Backend):
    def __init__(self) -> None:
        import torch

        self.torch = torch
        torch.manual_seed(0)

    def randn(self, shape: tuple[int, ...], dtype: str) -> Any:
        return self.torch.randn(shape, device="cuda", dtype=getattr(self.torch, dtype))

    def empty(self, shape: tuple[int, ...], dtype: str) -> Any:
        return self.torch.empty(shape, device="cuda", dtype=getattr(self.torch, dtype))

    def zeros(self, shape: tuple[int, ...], dtype: str) -> Any:
        return self.torch.zeros(shape, device="cuda", dtype=getattr(self.torch, dtype))

    def host(self, x: Any) -> np.ndarray:
        return x if isinstance(x, np.ndarray) else x.float().cpu().numpy()

    def programs(self) -> int:
        return int(self.torch.cuda.get_device_properties(0).multi_processor_count)


@dataclass
class Case:
    launch: Callable[[Any], Any]
    check: Callable[[Any], None]
    work: float
    torch: Callable[[], Any] | None = None


@dataclass
class Tutorial:
    name: str
    title: str
    x_label: str
    unit: str
    examples: list[str]
    kernels: Callable[[dict[str, ModuleType], str, Backend], Any]
    case: Callable[[Backend, int], Case]
    sizes: list[int] = field(default_factory=list)
    dry_sizes: list[int] = field(default_factory=list)


def _warps(block: int) -> int:
    return 4 if block <= 2048 else 8 if block <= 8192 else 16


def _elementwise(kernel: str, ref: Callable[[Backend, Any], Any]) -> Callable[[Backend, int], Case]:
    """A kernel (x_ptr, out_ptr, n, BLOCK_SIZE) over fp32 vectors of `n` elements in [-1, 1]: read one,
    write one; `ref(backend, x)` is the reference, and PyTorch's operation on a GPU."""
    def case(b: Backend, n: int) -> Case:
        x = b.randn((n,), "float32").clamp(-1, 1) if b.torch is not None else np.clip(b.randn((n,), "float32"), -1, 1)
        out = b.empty((n,), "float32")

        def launch(k: dict[str, Any]) -> Any:
            k[kernel][(math.ceil(n / 1024),)](x, out, n, BLOCK_SIZE=1024)
            return out
        return Case(launch, lambda got: b.close(got, ref(b, x), 1e-5), 2 * n * 4,
                    (lambda: ref(b, x)) if b.torch is not None else None)
    return case


def vector_add(b: Backend, n: int) -> Case:
    x, y, out = b.randn((n,), "float32"), b.randn((n,), "float32"), b.empty((n,), "float32")

    def launch(k: dict[str, Any]) -> Any:
        k["add_kernel"][(math.ceil(n / 1024),)](x, y, out, n, BLOCK_SIZE=1024)
        return out
    return Case(launch, lambda got: b.close(got, x + y, 0), 3 * n * 4, (lambda: x + y) if b.torch is not None else None)


def softmax(b: Backend, n_cols: int) -> Case:
    rows = 4096 if b.torch is not None else 8
    x, out = b.randn((rows, n_cols), "float32"), b.empty((rows, n_cols), "float32")
    block = 1 << (n_cols - 1).bit_length()

    def launch(k: dict[str, Any]) -> Any:
        k["softmax_kernel"][(rows,)](out, x, b.stride(x, 0), b.stride(out, 0), rows, n_cols, BLOCK_SIZE=block,
                                     num_warps=_warps(block))
        return out

    def reference() -> Any:
        if b.torch is not None:
            return b.torch.softmax(x, dim=1)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    return Case(launch, lambda got: b.close(got, reference(), 1e-5), 2 * rows * n_cols * 4,
                (lambda: b.torch.softmax(x, dim=1)) if b.torch is not None else None)


def matmul_configs(flavor_module: ModuleType, dry_run: bool) -> list[Any]:
    shapes = [(32, 32, 32, 4, 3)] if dry_run else [(128, 256, 64, 8, 3), (128, 128, 64, 8, 3), (128, 128, 32, 4, 4),
                                                  (64, 128, 32, 4, 4)]
    return [flavor_module.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8}, num_warps=w, num_stages=s)
            for m, n, k, w, s in shapes]


def matmul_kernels(modules: dict[str, ModuleType], flavor: str, b: Backend) -> dict[str, Any]:
    """The tutorial's kernel under its flavor's autotuner, with the same configs for both."""
    package = __import__("despina" if flavor == "despina" else "triton")
    kernel = modules["matmul"].matmul_kernel
    return {"matmul": package.autotune(configs=matmul_configs(package, b.torch is None), key=["M", "N", "K"])(kernel)}


def matmul(b: Backend, size: int) -> Case:
    a, w, c = b.randn((size, size), "float16"), b.randn((size, size), "float16"), b.empty((size, size), "float16")

    def launch(k: dict[str, Any]) -> Any:
        grid = lambda meta: (math.ceil(size / meta["BLOCK_M"]) * math.ceil(size / meta["BLOCK_N"]),)
        k["matmul"][grid](a, w, c, size, size, size, b.stride(a, 0), b.stride(a, 1), b.stride(w, 0), b.stride(w, 1),
                          b.stride(c, 0), b.stride(c, 1))
        return c
    want = (lambda: b.torch.matmul(a, w)) if b.torch is not None else (lambda: a.astype(np.float32) @ w.astype(np.float32))
    return Case(launch, lambda got: b.close(got, want(), 2e-2 if b.torch is None else 0.25), 2 * size**3,
                (lambda: b.torch.matmul(a, w)) if b.torch is not None else None)


def dropout(b: Backend, n: int) -> Case:
    x, out = b.randn((n,), "float32"), b.empty((n,), "float32")

    def launch(k: dict[str, Any]) -> Any:
        k["seeded_dropout_kernel"][(math.ceil(n / 1024),)](x, out, n, DROPOUT_P, 123, BLOCK_SIZE=1024)
        return out

    def check(got: Any) -> None:
        kept = b.host(got) != 0
        assert abs(kept.mean() - (1 - DROPOUT_P)) < 0.05, f"keep rate {kept.mean():.3f}"
        np.testing.assert_allclose(b.host(got)[kept], b.host(x)[kept] / (1 - DROPOUT_P), rtol=1e-6)
    return Case(launch, check, 2 * n * 4,
                (lambda: b.torch.nn.functional.dropout(x, DROPOUT_P, training=True)) if b.torch is not None else None)


def layer_norm(b: Backend, n: int) -> Case:
    rows = 4096 if b.torch is not None else 8
    x, w, bias = b.randn((rows, n), "float16"), b.randn((n,), "float16"), b.randn((n,), "float16")
    y, mean, rstd = b.empty((rows, n), "float16"), b.empty((rows,), "float32"), b.empty((rows,), "float32")
    block = min(65536 // 2, 1 << (n - 1).bit_length())

    def launch(k: dict[str, Any]) -> Any:
        k["layer_norm_fwd"][(rows,)](x, y, w, bias, mean, rstd, b.stride(x, 0), n, 1e-5, BLOCK_SIZE=block,
                                     num_warps=min(max(block // 256, 1), 8))
        return y

    def reference() -> Any:
        if b.torch is not None:
            return b.torch.nn.functional.layer_norm(x, (n,), w, bias, 1e-5)
        x32 = x.astype(np.float32)
        norm = (x32 - x32.mean(axis=1, keepdims=True)) / np.sqrt(x32.var(axis=1, keepdims=True) + 1e-5)
        return norm * w.astype(np.float32) + bias.astype(np.float32)
    return Case(launch, lambda got: b.close(got, reference(), 2e-2), (2 * rows * n + 2 * n) * 2,
                (lambda: b.torch.nn.functional.layer_norm(x, (n,), w, bias, 1e-5)) if b.torch is not None else None)


def attention(b: Backend, n_ctx: int) -> Case:
    heads, dim = (64, 64) if b.torch is not None else (2, 32)
    block_m, block_n = (128, 64) if b.torch is not None else (32, 32)
    q, k_, v = (b.randn((heads, n_ctx, dim), "float16") for _ in range(3))
    out = b.empty((heads, n_ctx, dim), "float16")
    scale = 1 / math.sqrt(dim)

    def launch(k: dict[str, Any]) -> Any:
        k["attention_fwd"][(math.ceil(n_ctx / block_m), heads)](q, k_, v, out, scale, b.stride(q, 0), b.stride(q, 1),
                                                                 n_ctx, HEAD_DIM=dim, BLOCK_M=block_m,
                                                                 BLOCK_N=block_n, CAUSAL=True)
        return out

    def sdpa() -> Any:  # as (batch 1, heads, n_ctx, dim), which PyTorch's flash-attention backend takes
        return b.torch.nn.functional.scaled_dot_product_attention(q[None], k_[None], v[None], is_causal=True)[0]

    def reference() -> Any:
        if b.torch is not None:
            return sdpa()
        s = q.astype(np.float32) @ k_.astype(np.float32).transpose(0, 2, 1) * scale
        s = np.where(np.tril(np.ones((n_ctx, n_ctx), dtype=bool)), s, -np.inf)
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        return (p / p.sum(axis=-1, keepdims=True)) @ v.astype(np.float32)
    flops = 4 * heads * n_ctx * n_ctx * dim * 0.5  # two products, half of them under the causal mask
    return Case(launch, lambda got: b.close(got, reference(), 2e-2), flops,
                sdpa if b.torch is not None else None)


def asin_reference(b: Backend, x: Any) -> Any:
    return b.torch.asin(x) if b.torch is not None else np.arcsin(x)


def grouped_gemm(b: Backend, size: int) -> Case:
    group = 4
    As = [b.randn((size, size), "float16") for _ in range(group)]
    Bs = [b.randn((size, size), "float16") for _ in range(group)]
    mnk = np.array([(size, size, size)] * group, dtype=np.int32)
    offsets = np.repeat((np.arange(group, dtype=np.int64) * size * size)[:, None], 3, axis=1)
    if b.torch is not None:
        t = b.torch
        a_all, b_all = t.cat([a.reshape(-1) for a in As]), t.cat([w.reshape(-1) for w in Bs])
        mnk_d, offsets_d = t.from_numpy(mnk).cuda(), t.from_numpy(np.ascontiguousarray(offsets)).cuda()
    else:
        a_all, b_all = np.concatenate([a.ravel() for a in As]), np.concatenate([w.ravel() for w in Bs])
        mnk_d, offsets_d = mnk, np.ascontiguousarray(offsets)
    c_all = b.zeros((group * size * size,), "float16")
    block = (128, 128, 32) if b.torch is not None else (32, 32, 32)
    programs = b.programs()

    def launch(k: dict[str, Any]) -> Any:
        k["grouped_matmul_kernel"][(programs,)](a_all, b_all, c_all, mnk_d, offsets_d, group, NUM_PROGRAMS=programs,
                                                BLOCK_M=block[0], BLOCK_N=block[1], BLOCK_K=block[2])
        return c_all

    def check(got: Any) -> None:
        for i, (a, w) in enumerate(zip(As, Bs)):
            want = b.torch.matmul(a, w) if b.torch is not None else a.astype(np.float32) @ w.astype(np.float32)
            b.close(b.host(got)[i * size * size:(i + 1) * size * size].reshape(size, size), want,
                    2e-2 if b.torch is None else 0.25)
    return Case(launch, check, group * 2 * size**3,
                (lambda: [b.torch.matmul(a, w) for a, w in zip(As, Bs)]) if b.torch is not None else None)


def _plain(module: str, *names: str) -> Callable[[dict[str, ModuleType], str, Backend], dict[str, Any]]:
    return lambda modules, flavor, b: {n: getattr(modules[module], n) for n in names}


POW2 = [1 << e for e in range(12, 29, 2)]
TUTORIALS = [
    Tutorial("01-vector-add", "Vector addition, fp32", "elements", "GB/s", ["vector_add"],
             _plain("vector_add", "add_kernel"), vector_add, POW2, [1000, 4096]),
    Tutorial("02-fused-softmax", "Softmax of 4096 rows, fp32", "columns", "GB/s", ["fused_softmax"],
             _plain("fused_softmax", "softmax_kernel"), softmax, [256 * 2**i for i in range(7)], [100, 256]),
    Tutorial("03-matrix-multiplication", "Matrix multiplication, fp16, autotuned", "M = N = K", "TFLOP/s", ["matmul"],
             matmul_kernels, matmul, [256 * 2**i for i in range(6)], [64, 96]),
    Tutorial("04-low-memory-dropout", "Seeded dropout, fp32", "elements", "GB/s", ["dropout"],
             _plain("dropout", "seeded_dropout_kernel"), dropout, POW2, [4096]),
    Tutorial("05-layer-norm", "Layer norm forward, 4096 rows, fp16", "columns", "GB/s", ["layer_norm"],
             _plain("layer_norm", "layer_norm_fwd"), layer_norm, [1024 * 2**i for i in range(5)], [100, 256]),
    Tutorial("06-fused-attention", "Causal attention forward, fp16, 64 heads of 64", "sequence length", "TFLOP/s",
             ["flash_attention"], _plain("flash_attention", "attention_fwd"), attention,
             [1024 * 2**i for i in range(5)], [64]),
    Tutorial("07-libdevice", "asin with libdevice, fp32", "elements", "GB/s", ["libdevice"],
             _plain("libdevice", "asin_kernel"),
             _elementwise("asin_kernel", asin_reference), POW2, [4096]),
    Tutorial("08-grouped-gemm", "Grouped GEMM: 4 square fp16 products", "M = N = K of each", "TFLOP/s",
             ["grouped_gemm"], _plain("grouped_gemm", "grouped_matmul_kernel"), grouped_gemm,
             [128 * 2**i for i in range(4)], [40, 64]),
]
