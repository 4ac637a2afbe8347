"""The tensor-core tables of benchmarks/gpu.py: the tutorial matmul on fp16, bf16, tf32 (fp32 operands,
Triton's default `input_precision`), int8 (int32 accumulation) and fp8 e4m3 (fp32 accumulation, B
K-major as fp8 wgmma reads it), and the tutorial-06 attention
forward pass (examples/flash_attention.py, as benchmarks/tutorial_figures.py runs it), each compiled by
Despina and by Triton from the same source, beside PyTorch's own operation.

Every row ends with the registers per thread and the spill stores of each compiler's cubin: Despina's
read from `despina.compile` for this GPU's target, Triton's from the kernel its launch returns.
"""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path
from types import ModuleType
from typing import Any

from timing import ROUNDS, Cell, failure, side_by_side

HERE = Path(__file__).resolve().parent

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages); --quick runs the first two of each.
MATMUL_CONFIGS = [(128, 128, 64, 8, 3), (128, 256, 64, 8, 3), (128, 128, 64, 8, 4), (128, 256, 64, 8, 4)]
TF32_CONFIGS = [(128, 128, 32, 8, 3), (128, 256, 32, 8, 3)]
INT8_CONFIGS = [(128, 128, 64, 8, 3), (128, 256, 64, 8, 3)]
# fp8 rows of 128 elements are 128 bytes: BLOCK_K 128 fills the 128-byte swizzle, as Triton's fp8 configs do.
FP8_CONFIGS = [(128, 256, 128, 8, 3), (128, 256, 64, 8, 3), (128, 128, 64, 8, 3)]
# (batch, heads, sequence, head dim) and (BLOCK_M, BLOCK_N, num_warps, num_stages)
# (batch, heads, n_ctx, head_dim), (BLOCK_M, BLOCK_N, warps, stages): each shape at 128x64 blocks (Triton's fastest
# on an H100 at both head dims) and at 128x128 (Despina's: with 3 stages at d64; at d128 with 2, which fit, and where
# the consumers of a specialized loop take 232 registers through setmaxnreg).
ATTENTION_CASES = [((4, 32, 2048, 64), (128, 64, 8, 3)), ((4, 32, 2048, 64), (128, 128, 8, 3)),
                   ((4, 32, 4096, 128), (128, 64, 8, 3)), ((4, 32, 4096, 128), (128, 128, 8, 2))]
RESOURCES = ["regs", "spills", "ptxas"]  # Despina's kernel: see `resources`
MATMUL_HEADER = ["config", "despina", "triton", "torch", *RESOURCES, "triton regs", "triton spills"]
# M, N, K, then the strides: A and C row-major, B row-major (N-major) or column-major (K-major)
STRIDES = ",i32:16+,i32:16+,i32:16+,i32:16+,i32:1,i32:16+,i32:1,i32:16+,i32:1"  # as a launch of 4096 or 8192 specializes
K_MAJOR_B_STRIDES = ",i32:16+,i32:16+,i32:16+,i32:16+,i32:1,i32:1,i32:16+,i32:16+,i32:1"
SHORT = {"float16": "fp16", "bfloat16": "bf16"}  # torch's dtype names as the rows and signatures spell them


def resources(metadata: dict[str, Any]) -> list[Any]:
    """Registers a thread, spill stores and ptxas' numbered findings (`C7511`: wgmma serialized, and the like;
    "none") of a Despina kernel. A warp-specialized kernel whose producer gives its registers to the consumers
    (setmaxnreg) shows the registers a thread starts with and, in brackets, the consumers'."""
    regs: Any = metadata["registers"]
    if consumers := re.search(r"^yes: .* consumers at (\d+)", str(metadata.get("setmaxnreg", ""))):
        regs = f"{regs} ({consumers.group(1)})"
    codes = sorted({re.sub(r"^\((C\d+)\).*", r"\1", w) for w in metadata.get("ptxas_warnings", [])})
    return [regs, metadata["spill_stores"], " ".join(codes) or "none"]


def despina_resources(kernel: Any, signature: str, constexprs: dict[str, Any], warps: int,
                      stages: int) -> list[Any]:
    """`resources` of Despina's cubin for this GPU (the launch's target)."""
    import torch

    import despina
    from despina.runtime.driver import target_for

    try:
        compiled = despina.compile(kernel, signature, constexprs, num_warps=warps, num_stages=stages,
                                   target=target_for(torch.cuda.get_device_capability()))
    except Exception as exc:
        return [failure(exc)] * len(RESOURCES)
    return resources(compiled.metadata)


def launch_resources(kernel: Any, args: tuple[Any, ...], constexprs: dict[str, Any], warps: int,
                     stages: int) -> list[Any]:
    """`resources` of Despina's cubin for this GPU as a launch on `args` specializes it (the cache has it from
    the launch): for kernels whose arguments a signature does not spell (host TensorDescriptors)."""
    import torch

    from despina.runtime import kernels
    from despina.runtime.driver import target_for

    try:
        options = kernel.options({"num_warps": warps, "num_stages": stages}, interpret=False)
        spec = kernel.specialize(kernel.bind(args, constexprs), options)
        binary, _ = kernels.local(kernel.ir(spec, options), options, target_for(torch.cuda.get_device_capability()))
    except Exception as exc:
        return [failure(exc)] * len(RESOURCES)
    return resources(binary.metadata)


def triton_resources(cells: list[Cell]) -> list[Any]:
    """Registers and spills of Triton's kernel (the second cell; its launch returns the compiled kernel)."""
    try:
        kernel = cells[1][0]()
    except Exception as exc:
        return [failure(exc)] * 2
    return [getattr(kernel, "n_regs", "?"), getattr(kernel, "n_spills", "?")]


def matmul_row(kernels: dict[str, ModuleType], kernel: str, label: str, inputs: tuple[Any, Any, Any],
               signature: str, config: tuple[int, int, int, int, int], check: Any, reference: Any,
               rounds: int, grid: tuple[int, ...] | None = None, **consts: Any) -> list[Any]:
    """One row of the matmul table: `kernel` of benchmarks/kernels.py on `inputs` (a [M, K], b [K, N], and a
    tensor like the output, row-major), checked by `check(out)`, beside `reference()` (PyTorch's); a program per
    output tile unless `grid` says otherwise, `consts` the kernel's other constexprs."""
    import torch

    a, b, like = inputs
    (m, k), n = a.shape, b.shape[1]
    k_major = b.stride(0) == 1
    bm, bn, bk, warps, stages = config
    grid = grid or (math.ceil(m / bm), math.ceil(n / bn))
    constexprs = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, **consts}
    cells: list[Cell] = []
    for name in ("despina", "triton"):
        out = torch.empty_like(like)
        kern = getattr(kernels[name], kernel)
        cells.append((lambda kern=kern, out=out: kern[grid](a, b, out, m, n, k, *a.stride(), *b.stride(), *out.stride(),
                                                           num_warps=warps, num_stages=stages, **constexprs),
                      lambda out=out: check(out)))
    cells.append((reference, None))
    times = side_by_side(cells, lambda ms: 2 * m * n * k / ms * 1e-9, rounds)
    shape = f"{m}^3" if m == n == k else f"{m}x{n}x{k}"
    return [f"{label} {shape} {bm}x{bn}x{bk} w{warps} s{stages}", *times,
            *despina_resources(getattr(kernels["despina"], kernel), signature + (K_MAJOR_B_STRIDES if k_major else STRIDES),
                               constexprs, warps, stages),
            *triton_resources(cells)]


def matmul(kernels: dict[str, ModuleType], quick: bool) -> list[list[Any]]:
    """The tutorial matmul, TFLOP/s (TOP/s for int8); for fp16 and bf16 also tutorial 03 as Triton ships it
    ("grouped": grouped ordering, rows that wrap with `% M`). Triton's tensor-core path is mma.sync when
    DISABLE_MMA_V3=1 is set (the sm_80 comparison), wgmma otherwise. fp16 and bf16 store fp16; tf32
    (fp32 operands, the kernel unchanged: tf32 is the default precision of both) stores fp16 beside
    torch.matmul with TF32 allowed; int8 accumulates and stores int32, beside torch._int_mm; fp8 e4m3
    (8192^3) stores fp16 beside torch._scaled_mm with unit scales (cuBLASLt's fp8 GEMM)."""
    import torch

    rounds = 1 if quick else ROUNDS
    rows = []
    for dtype in ("float16", "bfloat16"):
        for size in (4096,) if quick else (4096, 8192):
            for config in MATMUL_CONFIGS[:2] if quick else MATMUL_CONFIGS:
                a, b = (torch.randn((size, size), device="cuda", dtype=getattr(torch, dtype)) for _ in range(2))
                ref = torch.matmul(a, b).to(torch.float16)
                close = lambda c, ref=ref: torch.testing.assert_close(c, ref, rtol=2e-2, atol=0.25)  # noqa: E731
                ty = SHORT[dtype]
                rows.append(matmul_row(kernels, "matmul_kernel", ty, (a, b, ref), f"*{ty}:16,*{ty}:16,*fp16:16",
                                       config, close, lambda a=a, b=b: torch.matmul(a, b), rounds))
                grid = (math.ceil(size / config[0]) * math.ceil(size / config[1]),)
                rows.append(matmul_row(kernels, "matmul_grouped_kernel", f"{ty} grouped", (a, b, ref),
                                       f"*{ty}:16,*{ty}:16,*fp16:16", config, close, lambda a=a, b=b: torch.matmul(a, b),
                                       rounds, grid, GROUP_M=8))
    size = 4096
    a, b = (torch.randn((size, size), device="cuda") for _ in range(2))
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        ref = torch.matmul(a, b).to(torch.float16)
        for config in TF32_CONFIGS:
            close = lambda c: torch.testing.assert_close(c, ref, rtol=2e-2, atol=0.25)  # noqa: E731
            rows.append(matmul_row(kernels, "matmul_kernel", "tf32", (a, b, ref), "*fp32:16,*fp32:16,*fp16:16",
                                   config, close, lambda: torch.matmul(a, b), rounds))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    a8, b8 = (torch.randint(-128, 128, (size, size), device="cuda", dtype=torch.int8) for _ in range(2))
    ref8 = (a8.double() @ b8.double()).to(torch.int32)  # exact: every sum is below 2**53
    for config in INT8_CONFIGS:
        exact = lambda c: torch.testing.assert_close(c, ref8, rtol=0, atol=0)  # noqa: E731
        rows.append(matmul_row(kernels, "matmul_int8_kernel", "int8", (a8, b8, ref8), "*i8:16,*i8:16,*i32:16",
                               config, exact, lambda: torch._int_mm(a8, b8), rounds))
    rows += fp8_matmul(kernels, 4096 if quick else 8192, rounds)
    return rows


def descriptor_cells(kernels: dict[str, ModuleType], kernel: str, a: Any, b: Any, config: tuple[int, ...],
                     grid: tuple[int, ...], constexprs: dict[str, Any]) -> tuple[list[Cell], tuple[Any, ...]]:
    """The cells of `kernel` of each compiler (A, B^T and C through host TensorDescriptors, `constexprs` all of
    its constexprs), each checked against torch.matmul(a, b.T), and of torch.matmul(a, b.T) itself; and the
    arguments of Despina's launch."""
    import torch

    size = a.shape[0]
    bm, bn, bk, warps, stages = config
    ref = torch.matmul(a, b.T).to(torch.float16)
    cells: list[Cell] = []
    launched: dict[str, tuple[Any, ...]] = {}
    for name in ("despina", "triton"):
        desc = kernels[name].TensorDescriptor
        out = torch.empty_like(ref)
        args = launched[name] = (desc.from_tensor(a, [bm, bk]), desc.from_tensor(b, [bn, bk]),
                                 desc.from_tensor(out, [bm, bn]), size, size, size)
        k = getattr(kernels[name], kernel)
        cells.append((lambda k=k, args=args: k[grid](*args, num_warps=warps, num_stages=stages, **constexprs),
                      lambda out=out: torch.testing.assert_close(out, ref, rtol=2e-2, atol=0.25)))
    cells.append((lambda: torch.matmul(a, b.T), None))
    return cells, launched["despina"]


def _descriptor_matmul_row(kernels: dict[str, ModuleType], kernel: str, a: Any, b: Any, config: tuple[int, ...],
                           grid: tuple[int, ...], rounds: int, **consts: Any) -> list[Any]:
    """The TFLOP/s of `descriptor_cells`, then the `resources` of Despina's kernel and Triton's."""
    size = a.shape[0]
    bm, bn, bk, warps, stages = config
    constexprs = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, **consts}
    cells, launched = descriptor_cells(kernels, kernel, a, b, config, grid, constexprs)
    return [*side_by_side(cells, lambda ms: 2 * size**3 / ms * 1e-9, rounds),
            *launch_resources(getattr(kernels["despina"], kernel), launched, constexprs, warps, stages),
            *triton_resources(cells)]


def tma_matmul(kernels: dict[str, ModuleType], quick: bool) -> list[list[Any]]:
    """Tutorial 09's descriptor matmul (`matmul_tma_kernel`: A, B^T and C through host TensorDescriptors),
    fp16 and bf16, TFLOP/s, beside torch.matmul. Both compilers copy the tiles and store C with TMA."""
    import torch

    rows = []
    for dtype in ("float16", "bfloat16"):
        for size in (4096,) if quick else (4096, 8192):
            a, b = (torch.randn((size, size), device="cuda", dtype=getattr(torch, dtype)) for _ in range(2))
            for config in MATMUL_CONFIGS[:2] if quick else MATMUL_CONFIGS:
                bm, bn, bk, warps, stages = config
                grid = (math.ceil(size / bm), math.ceil(size / bn))
                ty = SHORT[dtype]
                rows.append([f"{ty} {size}^3 {bm}x{bn}x{bk} w{warps} s{stages}",
                             *_descriptor_matmul_row(kernels, "matmul_tma_kernel", a, b, config, grid,
                                                     1 if quick else ROUNDS)])
    return rows


def persistent_matmul(kernels: dict[str, ModuleType], quick: bool) -> list[list[Any]]:
    """Tutorial 09's persistent descriptor matmul (`matmul_tma_persistent_kernel`, its loop nest flattened by
    both compilers), fp16 and bf16 (fp16 alone with --quick), TFLOP/s, beside torch.matmul: a grid of one program
    per SM, GROUP_SIZE_M 8; each config as written and warp-specialized (`ws`: WARP_SPECIALIZE, both compilers).
    128x256x64 with 4 stages and its epilogue's tile is out of shared memory for both (262,176 bytes of 232,448 on
    an H200): not run."""
    import torch

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for dtype, size in itertools.product(("float16",) if quick else ("float16", "bfloat16"),
                                         (4096,) if quick else (4096, 8192)):
        a, b = (torch.randn((size, size), device="cuda", dtype=getattr(torch, dtype)) for _ in range(2))
        for config in MATMUL_CONFIGS[:2] if quick else MATMUL_CONFIGS[:3]:
            bm, bn, bk, warps, stages = config
            grid = (min(sms, math.ceil(size / bm) * math.ceil(size / bn)),)
            for ws in (False, True):
                ty = SHORT[dtype]
                rows.append([f"{ty} {size}^3 {bm}x{bn}x{bk} w{warps} s{stages}{' ws' if ws else ''}",
                             *_descriptor_matmul_row(kernels, "matmul_tma_persistent_kernel", a, b, config, grid,
                                                     1 if quick else ROUNDS, GROUP_SIZE_M=8, NUM_SMS=sms,
                                                     WARP_SPECIALIZE=ws)])
    return rows


def pointer_persistent_matmul(kernels: dict[str, ModuleType], quick: bool) -> list[list[Any]]:
    """Tutorial 09's persistent matmul through pointers (`matmul_persistent_kernel`, its loop nest flattened
    by both compilers), fp16, TFLOP/s, beside torch.matmul: a grid of one program per SM, GROUP_SIZE_M 8; each
    config as written and warp-specialized (`ws`: WARP_SPECIALIZE, both compilers); 128x256x64 with 4 stages is
    out of shared memory for both compilers."""
    import torch

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for size in (4096,) if quick else (4096, 8192):
        a, b = (torch.randn((size, size), device="cuda", dtype=torch.float16) for _ in range(2))
        ref = torch.matmul(a, b)
        close = lambda c, ref=ref: torch.testing.assert_close(c, ref, rtol=2e-2, atol=0.25)  # noqa: E731
        for config in MATMUL_CONFIGS[:2] if quick else MATMUL_CONFIGS[:3]:
            bm, bn = config[:2]
            grid = (min(sms, math.ceil(size / bm) * math.ceil(size / bn)),)
            for ws in (False, True):
                rows.append(matmul_row(kernels, "matmul_persistent_kernel", f"fp16{' ws' if ws else ''}", (a, b, ref),
                                       "*fp16:16,*fp16:16,*fp16:16", config, close, lambda a=a, b=b: torch.matmul(a, b),
                                       1 if quick else ROUNDS, grid, GROUP_SIZE_M=8, NUM_SMS=sms, WARP_SPECIALIZE=ws))
    return rows


RAGGED_SHAPES = [(8000, 8192, 8192), (8192, 8000, 8192), (8000, 8000, 8000)]  # M, N, both not multiples of 128


def ragged_matmul(kernels: dict[str, ModuleType], quick: bool) -> list[list[Any]]:
    """Tutorial 03 as Triton ships it (`grouped`: rows and columns that wrap, `% M`) and tutorial 09's persistent
    pointer kernel (`tl.where(offs < M, offs, 0)`), fp16, TFLOP/s, beside torch.matmul, on shapes whose last row
    or column of tiles lies partly past the matrix; Despina's TMA version takes those tiles too where only masked
    stores read their rows past the edge (gpuir/masked_rows.py)."""
    import torch

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for m, n, k in RAGGED_SHAPES[:1] if quick else RAGGED_SHAPES:
        a = torch.randn((m, k), device="cuda", dtype=torch.float16)
        b = torch.randn((k, n), device="cuda", dtype=torch.float16)
        ref = torch.matmul(a, b)
        close = lambda c, ref=ref: torch.testing.assert_close(c, ref, rtol=2e-2, atol=0.25)  # noqa: E731
        for config in MATMUL_CONFIGS[1:3]:
            tiles = math.ceil(m / config[0]) * math.ceil(n / config[1])
            for kernel, label, grid, consts in (
                    ("matmul_grouped_kernel", "fp16 grouped", (tiles,), {"GROUP_M": 8}),
                    ("matmul_persistent_kernel", "fp16 persistent", (min(sms, tiles),),
                     {"GROUP_SIZE_M": 8, "NUM_SMS": sms, "WARP_SPECIALIZE": False})):
                rows.append(matmul_row(kernels, kernel, label, (a, b, ref), "*fp16:16,*fp16:16,*fp16:16", config, close,
                                       lambda a=a, b=b: torch.matmul(a, b), 1 if quick else ROUNDS, grid, **consts))
    return rows


def attention_tma(kernels: dict[str, ModuleType], quick: bool) -> list[list[Any]]:
    """The attention forward pass with Q, K, V and O through host TensorDescriptors (`attention_tma_kernel`),
    fp16, TFLOP/s, beside PyTorch's scaled_dot_product_attention; the cases and configs of `attention`, as
    written and warp-specialized (`ws`: WARP_SPECIALIZE, both compilers)."""
    import torch

    rows = []
    for (batch, heads, n_ctx, dim), (bm, bn, warps, stages) in ATTENTION_CASES:
        q, k, v = (torch.randn((batch * heads * n_ctx, dim), device="cuda", dtype=torch.float16) for _ in range(3))
        q4, k4, v4 = (t.view(batch, heads, n_ctx, dim) for t in (q, k, v))
        grid = (math.ceil(n_ctx / bm), batch * heads)
        for causal, ws in ((causal, ws) for causal in (False, True) for ws in (False, True)):
            ref = torch.nn.functional.scaled_dot_product_attention(q4, k4, v4, is_causal=causal).view_as(q)
            cells: list[Cell] = []
            launched: dict[str, tuple[Any, ...]] = {}
            for name in ("despina", "triton"):
                desc = kernels[name].TensorDescriptor
                out = torch.empty_like(q)
                args = launched[name] = (desc.from_tensor(q, [bm, dim]), desc.from_tensor(k, [bn, dim]),
                                         desc.from_tensor(v, [bn, dim]), desc.from_tensor(out, [bm, dim]),
                                         1 / math.sqrt(dim), n_ctx)
                f = kernels[name].attention_tma_kernel
                cells.append((lambda f=f, args=args, causal=causal, ws=ws: f[grid](
                                  *args, HEAD_DIM=dim, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal, WARP_SPECIALIZE=ws,
                                  num_warps=warps, num_stages=stages),
                              lambda out=out, ref=ref: torch.testing.assert_close(out, ref, rtol=2e-2, atol=2e-2)))
            cells.append((lambda causal=causal: torch.nn.functional.scaled_dot_product_attention(
                q4, k4, v4, is_causal=causal), None))
            flops = 4 * batch * heads * n_ctx * n_ctx * dim * (0.5 if causal else 1)
            times = side_by_side(cells, lambda ms: flops / ms * 1e-9, 1 if quick else ROUNDS)
            meta = {"HEAD_DIM": dim, "BLOCK_M": bm, "BLOCK_N": bn, "CAUSAL": causal, "WARP_SPECIALIZE": ws}
            rows.append([f"({batch},{heads},{n_ctx},{dim}) {'causal' if causal else 'full'} {bm}x{bn} w{warps} "
                         f"s{stages}{' ws' if ws else ''}", *times,
                         *launch_resources(kernels["despina"].attention_tma_kernel, launched["despina"], meta, warps,
                                           stages),
                         *triton_resources(cells)])
    return rows


def fp8_matmul(kernels: dict[str, ModuleType], size: int, rounds: int) -> list[list[Any]]:
    """The tutorial matmul on e4m3 operands, B K-major (a transposed view of a row-major tensor, as
    Triton's fp8 tutorial passes it), fp16 out, beside torch._scaled_mm."""
    import torch

    a = torch.randn((size, size), device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn((size, size), device="cuda").to(torch.float8_e4m3fn).t()
    exact = a.float() @ b.float()
    ref = exact.to(torch.float16)
    one = torch.ones((), device="cuda")
    # Hopper's fp8 tensor cores add each instruction's products in about 14 bits (Triton's kernel too):
    # the error is bounded by the magnitudes added, |a| @ |b|, plus the fp16 output's rounding. A fixed
    # atol of 0.5 failed both compilers' kernels at 8192^3 on an H100.
    bound = 2.0**-10 * (a.float().abs() @ b.float().abs()) + 2.0**-11 * exact.abs()

    def close(c: Any) -> None:
        err = (c.float() - exact).abs()
        assert bool((err <= bound).all()), f"{int((err > bound).sum())} elements beyond the bound, worst {err.max()}"

    return [matmul_row(kernels, "matmul_kernel", "e4m3", (a, b, ref), "*fp8e4nv:16,*fp8e4nv:16,*fp16:16", config,
                       close, lambda: torch._scaled_mm(a, b, one, one, out_dtype=torch.float16), rounds)
            for config in FP8_CONFIGS]


def attention_kernels(kernels: dict[str, ModuleType]) -> dict[str, Any]:
    """examples/flash_attention.py's `attention_fwd` as each compiler runs it (tutorial_figures.load), written
    beside the benchmark's kernels."""
    import sys

    import tutorial_figures

    sys.path.insert(0, str(tutorial_figures.EXAMPLES))
    workdir = Path(str(kernels["despina"].__file__)).parent / "attention"
    workdir.mkdir(exist_ok=True)
    return {f: tutorial_figures.load("flash_attention", f, workdir).attention_fwd for f in ("despina", "triton")}


def attention(kernels: dict[str, ModuleType], quick: bool) -> list[list[Any]]:
    """Attention forward, fp16, TFLOP/s (two products, half of them under a causal mask), beside
    PyTorch's scaled_dot_product_attention; the same block sizes, warps and stages for both compilers."""
    import torch

    fwd = attention_kernels(kernels)
    rows = []
    for (batch, heads, n_ctx, dim), (bm, bn, warps, stages) in ATTENTION_CASES:
        q, k, v = (torch.randn((batch * heads, n_ctx, dim), device="cuda", dtype=torch.float16) for _ in range(3))
        q4, k4, v4 = (t.view(batch, heads, n_ctx, dim) for t in (q, k, v))
        scale = 1 / math.sqrt(dim)
        grid = (math.ceil(n_ctx / bm), batch * heads)
        for causal in (False, True):
            ref = torch.nn.functional.scaled_dot_product_attention(q4, k4, v4, is_causal=causal).view_as(q)
            cells: list[Cell] = []
            for name in ("despina", "triton"):
                out = torch.empty_like(q)
                cells.append((lambda f=fwd[name], out=out, causal=causal: f[grid](
                                  q, k, v, out, scale, q.stride(0), q.stride(1), n_ctx, HEAD_DIM=dim, BLOCK_M=bm,
                                  BLOCK_N=bn, CAUSAL=causal, num_warps=warps, num_stages=stages),
                              lambda out=out, ref=ref: torch.testing.assert_close(out, ref, rtol=2e-2, atol=2e-2)))
            cells.append((lambda causal=causal: torch.nn.functional.scaled_dot_product_attention(
                q4, k4, v4, is_causal=causal), None))
            flops = 4 * batch * heads * n_ctx * n_ctx * dim * (0.5 if causal else 1)
            times = side_by_side(cells, lambda ms: flops / ms * 1e-9, 1 if quick else ROUNDS)
            constexprs = {"HEAD_DIM": dim, "BLOCK_M": bm, "BLOCK_N": bn, "CAUSAL": causal}
            signature = "*fp16:16,*fp16:16,*fp16:16,*fp16:16,fp32,i32:16,i32:16,i32:16"
            rows.append([f"({batch},{heads},{n_ctx},{dim}) {'causal' if causal else 'full'} {bm}x{bn} w{warps} "
                         f"s{stages}", *times,
                         *despina_resources(fwd["despina"], signature, constexprs, warps, stages),
                         *triton_resources(cells)])
    return rows
