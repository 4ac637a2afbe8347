"""The test kernels of the backend suite, built with `KernelBuilder` as a frontend would."""

from __future__ import annotations

from despina.compiler.ir.core import Module
from despina.compiler.ir.types import PointerType, float16, float32, int32

from .kernel_builder import KernelBuilder

f32p = PointerType(float32)
f16p = PointerType(float16)


def vector_add(block: int = 1024, aligned: bool = True) -> Module:
    """out[i] = x[i] + y[i] for i < n, one block of `block` elements per program."""
    k = KernelBuilder("add_kernel", [("x", f32p), ("y", f32p), ("out", f32p), ("n", int32)])
    offs = k.bin("add", k.bin("mul", k.program_id(0), block), k.arange(0, block))
    mask = k.cmp("lt", offs, k["n"])
    x = k.load(k.ptrs(k["x"], offs), mask)
    y = k.load(k.ptrs(k["y"], offs), mask)
    k.store(k.ptrs(k["out"], offs), k.bin("add", x, y), mask)
    return k.module(divisibility=[0, 1, 2, 3] if aligned else [])


def softmax(block: int = 1024) -> Module:
    """One row per program: load with other=-inf, subtract the max, exp, divide by the sum."""
    k = KernelBuilder(
        "softmax_kernel", [("out", f32p), ("inp", f32p), ("in_stride", int32), ("out_stride", int32), ("n_cols", int32)]
    )
    row = k.program_id(0)
    cols = k.arange(0, block)
    mask = k.cmp("lt", cols, k["n_cols"])
    row_ptr = k.op("addptr", k["inp"], k.bin("mul", row, k["in_stride"]))
    x = k.load(k.ptrs(row_ptr, cols), mask, float("-inf"))
    shifted = k.bin("sub", x, k.reduce(x, 0, "maximum"))
    num = k.op("exp", shifted)
    out = k.bin("div", num, k.reduce(num, 0, "add"))
    out_ptr = k.op("addptr", k["out"], k.bin("mul", row, k["out_stride"]))
    k.store(k.ptrs(out_ptr, cols), out, mask)
    return k.module(divisibility=[0, 1, 2, 3, 4])


def layer_norm(block: int = 1024) -> Module:
    """y = (x - mean) * rstd * w + b over one fp16 row, statistics in fp32."""
    args = [("x", f16p), ("y", f16p), ("w", f16p), ("b", f16p), ("stride", int32), ("n", int32), ("eps", float32)]
    k = KernelBuilder("layer_norm_fwd", args)
    row = k.program_id(0)
    cols = k.arange(0, block)
    mask = k.cmp("lt", cols, k["n"])
    base = k.bin("mul", row, k["stride"])
    x = k.cast(k.load(k.ptrs(k.op("addptr", k["x"], base), cols), mask, 0.0), float32)
    nf = k.cast(k["n"], float32)
    mean = k.bin("div", k.reduce(x, 0, "add"), nf)
    xc = k.op("select", mask, k.bin("sub", x, mean), k.full([block], 0.0, float32))
    var = k.bin("div", k.reduce(k.bin("mul", xc, xc), 0, "add"), nf)
    rstd = k.op("rsqrt", k.bin("add", var, k["eps"]))
    w = k.cast(k.load(k.ptrs(k["w"], cols), mask), float32)
    b = k.cast(k.load(k.ptrs(k["b"], cols), mask), float32)
    y = k.bin("add", k.bin("mul", k.bin("mul", xc, rstd), w), b)
    k.store(k.ptrs(k.op("addptr", k["y"], base), cols), k.cast(y, float16), mask)
    return k.module(divisibility=[0, 1, 2, 3, 4, 5])


def matmul(bm: int = 32, bn: int = 32, bk: int = 16) -> Module:
    """C = A @ B (fp32, row-major, K a multiple of BK), a K-loop of FMA dots."""
    args = [("a", f32p), ("b", f32p), ("c", f32p), ("M", int32), ("N", int32), ("K", int32)]
    k = KernelBuilder("matmul_kernel", args)
    pid_m, pid_n = k.program_id(0), k.program_id(1)
    rm = k.bin("add", k.bin("mul", pid_m, bm), k.arange(0, bm))
    rn = k.bin("add", k.bin("mul", pid_n, bn), k.arange(0, bn))
    rk = k.arange(0, bk)
    a_ptrs = k.ptrs(k["a"], k.bin("add", k.bin("mul", k.expand(rm, 1), k["K"]), k.expand(rk, 0)))
    b_ptrs = k.ptrs(k["b"], k.bin("add", k.bin("mul", k.expand(rk, 1), k["N"]), k.expand(rn, 0)))
    acc0 = k.full([bm, bn], 0.0, float32)
    zero, step = k.const(0), k.const(bk)

    def body(i, acc, pa, pb):  # type: ignore[no-untyped-def]
        a = k.load(pa)
        b = k.load(pb)
        acc = k.op("dot", a, b, acc)
        pa = k.ptrs(pa, k.full([bm, bk], bk, int32))
        pb = k.ptrs(pb, k.bin("mul", k.full([bk, bn], bk, int32), k["N"]))
        return [acc, pa, pb]

    acc, _, _ = k.for_(zero, k["K"], step, [acc0, a_ptrs, b_ptrs], body)
    c_offs = k.bin("add", k.bin("mul", k.expand(rm, 1), k["N"]), k.expand(rn, 0))
    c_mask = k.bin("and", k.cmp("lt", k.expand(rm, 1), k["M"]), k.cmp("lt", k.expand(rn, 0), k["N"]))
    k.store(k.ptrs(k["c"], c_offs), acc, c_mask)
    return k.module(divisibility=[0, 1, 2, 3, 4, 5])


def atomic_add(block: int = 256) -> Module:
    """Adds x[i] into out[i % 16] atomically (relaxed, gpu scope), and a scalar count."""
    k = KernelBuilder("atomic_add_kernel", [("x", f32p), ("out", f32p), ("count", PointerType(int32)), ("n", int32)])
    offs = k.bin("add", k.bin("mul", k.program_id(0), block), k.arange(0, block))
    mask = k.cmp("lt", offs, k["n"])
    x = k.load(k.ptrs(k["x"], offs), mask, 0.0)
    slot = k.ptrs(k["out"], k.bin("rem", offs, 16))
    k.op("atomic_rmw", slot, x, mask, kind="fadd", sem="relaxed", scope="gpu")
    k.op("atomic_rmw", k["count"], k.const(1), kind="add", sem="acq_rel", scope="gpu")
    return k.module(divisibility=[0, 1, 2])


def loop_carry(block: int = 512) -> Module:
    """acc = sum over j < steps of x[j*block + i] * 2, a tile carried through a for loop."""
    k = KernelBuilder("loop_carry_kernel", [("x", f32p), ("out", f32p), ("steps", int32)])
    offs = k.arange(0, block)

    def body(j, acc):  # type: ignore[no-untyped-def]
        v = k.load(k.ptrs(k["x"], k.bin("add", k.bin("mul", j, block), offs)))
        return [k.bin("add", acc, k.bin("mul", v, 2.0))]

    (acc,) = k.for_(k.const(0), k["steps"], k.const(1), [k.full([block], 0.0, float32)], body)
    k.store(k.ptrs(k["out"], offs), acc)
    return k.module(divisibility=[0, 1])


ALL = {
    "vector_add": vector_add,
    "softmax": softmax,
    "layer_norm": layer_norm,
    "matmul": matmul,
    "atomic_add": atomic_add,
    "loop_carry": loop_carry,
}
