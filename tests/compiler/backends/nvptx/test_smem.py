"""Shared-memory allocation in the lowering: where the scratch buffers of reductions and layout
conversions go, how many bytes the kernel asks for, and which barriers are emitted."""

from __future__ import annotations

import pytest

pytest.importorskip("llvmlite")

from despina.compiler.backends.gpuir import assign_layouts  # noqa: E402
from despina.compiler.backends.nvptx import compile_module, get_target  # noqa: E402
from despina.compiler.backends.nvptx.lower import Lowering  # noqa: E402
from despina.compiler.ir.core import Module  # noqa: E402
from despina.compiler.ir.types import PointerType, float32, int32  # noqa: E402

from .. import kernels  # noqa: E402
from ..kernel_builder import KernelBuilder  # noqa: E402

f32p = PointerType(float32)


def plan(module: Module, num_warps: int = 4) -> Lowering:
    """The lowering of `module`, to read its allocator's placements."""
    ctx = Lowering(assign_layouts(module, num_warps), get_target("sm_90"))
    ctx.run()
    return ctx


def barriers(module: Module, num_warps: int = 4) -> int:
    k = compile_module(module, target="sm_90", num_warps=num_warps, isolate=False)
    return str(k.asm["ptx"]).count("bar.sync")


def loop_of_reductions(combines: list[str], block: int = 1024) -> Module:
    """acc += reduce(x[j*block : (j+1)*block]) for each combine, over `steps` blocks."""
    k = KernelBuilder("loop_reduce", [("x", f32p), ("y", f32p), ("steps", int32)])
    offs = k.arange(0, block)

    def body(j, acc):  # type: ignore[no-untyped-def]
        v = k.load(k.ptrs(k["x"], k.bin("add", k.bin("mul", j, block), offs)))
        for combine in combines:
            acc = k.bin("add", acc, k.reduce(v, 0, combine))
        return [acc]

    (acc,) = k.for_(k.const(0), k["steps"], k.const(1), [k.const(0.0, float32)], body)
    k.store(k["y"], acc)
    return k.module(divisibility=[0, 1])


def transposes(n: int = 64) -> Module:
    """y = x^T + x^T^T on an n x n tile: two layout changes through shared memory, in a row."""
    k = KernelBuilder("transposes", [("x", f32p), ("y", f32p)])
    rows, cols = k.arange(0, n), k.arange(0, n)
    offs = k.bin("add", k.bin("mul", k.expand(rows, 1), n), k.expand(cols, 0))
    x = k.load(k.ptrs(k["x"], offs))
    t = k.op("trans", x, perm=[1, 0])
    tt = k.op("trans", k.bin("mul", t, 2.0), perm=[1, 0])
    k.store(k.ptrs(k["y"], offs), k.bin("add", tt, x))
    return k.module(divisibility=[0, 1])


def test_softmax_reductions_take_two_slots_and_no_barrier_between() -> None:
    ctx = plan(kernels.softmax())
    assert ctx.shared.placements == [(0, 16, False), (16, 16, False)]
    assert ctx.smem_bytes == 32


def test_layer_norm_reports_its_shared_bytes() -> None:
    k = compile_module(kernels.layer_norm(), target="sm_80", num_warps=8, isolate=False)
    assert k.metadata["shared"] == 64  # two reductions of 8 warps' fp32 partials, side by side
    assert str(k.asm["ptx"]).count("bar.sync") == 2


def test_kernels_without_exchanges_need_no_shared_memory() -> None:
    ctx = plan(kernels.vector_add())
    assert ctx.smem_bytes == 0 and ctx.shared.placements == []


def test_large_conversions_reuse_bytes_behind_a_barrier() -> None:
    ctx = plan(transposes())
    sizes = [size for _, size, _ in ctx.shared.placements]
    assert len(sizes) >= 2 and all(size == 64 * 64 * 4 for size in sizes)
    assert [(offset, barrier) for offset, _, barrier in ctx.shared.placements][:2] == [(0, False), (0, True)]
    assert ctx.smem_bytes == 64 * 64 * 4
    # write, barrier, read; barrier (reuse), write, barrier, read
    assert barriers(transposes()) == 2 * len(sizes) - 1


def test_a_loop_with_one_reduction_ends_its_body_with_a_barrier() -> None:
    ctx = plan(loop_of_reductions(["add"]))
    assert ctx.shared.placements == [(0, 16, False)]
    assert ctx.shared.barriers == 2  # the exchange's own, and one before the next iteration's writes
    assert barriers(loop_of_reductions(["add"])) == 2


def test_a_loop_with_two_reductions_alternates_slots_and_adds_no_barrier() -> None:
    ctx = plan(loop_of_reductions(["add", "maximum"]))
    assert ctx.shared.placements == [(0, 16, False), (16, 16, False)]
    assert ctx.shared.barriers == 2
    assert barriers(loop_of_reductions(["add", "maximum"])) == 2


def test_explicit_barrier_ends_pending_bytes() -> None:
    k = KernelBuilder("explicit", [("x", f32p), ("y", f32p)])
    offs = k.arange(0, 1024)
    v = k.load(k.ptrs(k["x"], offs))
    a = k.reduce(v, 0, "add")
    k.void("barrier")
    b = k.reduce(v, 0, "maximum")
    k.store(k["y"], k.bin("add", a, b))
    ctx = plan(k.module(divisibility=[0, 1]))
    assert ctx.shared.placements == [(0, 16, False), (0, 16, False)]  # no need for a second slot
