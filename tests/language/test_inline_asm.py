"""`tl.inline_asm_elementwise` against NumPy on the GPU; the interpreter cannot run PTX and says so
(the cubin collection still compiles every kernel here)."""

from __future__ import annotations

import numpy as np
import pytest

import despina
import despina.language as tl

N = 256


def run_or_refuse(device, launch):
    """Launch on the GPU; in the interpreter, expect the error that names the call."""
    if device.name == "gpu":
        launch()
        return True
    with pytest.raises(despina.KernelRuntimeError, match="tl.inline_asm_elementwise runs PTX, which the NumPy "
                                                         "interpreter cannot execute; run this kernel on the GPU"):
        launch()
    return False


@despina.jit
def triton_example_kernel(a_ptr, b_ptr, c_ptr, d_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    c, d = tl.inline_asm_elementwise(
        asm="""
        {
            .reg .b8 tmp<4>;
            mov.b32 {tmp0, tmp1, tmp2, tmp3}, $8;
            cvt.u32.u8 $0, tmp0;
            cvt.u32.u8 $1, tmp1;
            cvt.u32.u8 $2, tmp2;
            cvt.u32.u8 $3, tmp3;
        }
        cvt.rn.f32.s32 $4, $0;
        cvt.rn.f32.s32 $5, $1;
        cvt.rn.f32.s32 $6, $2;
        cvt.rn.f32.s32 $7, $3;
        max.f32 $4, $4, $9;
        max.f32 $5, $5, $10;
        max.f32 $6, $6, $11;
        max.f32 $7, $7, $12;
        """,
        constraints="=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r",
        args=[a, b], dtype=(tl.int32, tl.float32), is_pure=True, pack=4)
    tl.store(c_ptr + offs, c)
    tl.store(d_ptr + offs, d)


def test_triton_docstring_example(device):
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, N).astype(np.uint8)
    b = rng.uniform(0, 300, N).astype(np.float32)
    c, d = device.zeros(N, "int32"), device.zeros(N, "fp32")
    if run_or_refuse(device, lambda: triton_example_kernel[(1,)](device.put(a), device.put(b), c, d, BLOCK=N)):
        np.testing.assert_array_equal(device.get(c), a.astype(np.int32))
        np.testing.assert_array_equal(device.get(d), np.maximum(a.astype(np.float32), b))


@despina.jit
def rotate_kernel(x_ptr, out_ptr, shift, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("shf.l.wrap.b32 $0, $1, $1, $2;", "=r,r,r", [x, shift], dtype=tl.uint32,
                                  is_pure=True, pack=1)
    tl.store(out_ptr + offs, y)


def test_scalar_arguments_broadcast(device):
    x = np.random.default_rng(1).integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    out = device.zeros(N, "uint32")
    if run_or_refuse(device, lambda: rotate_kernel[(1,)](device.put(x), out, 5, BLOCK=N)):
        np.testing.assert_array_equal(device.get(out), (x << np.uint32(5)) | (x >> np.uint32(27)))


@despina.jit
def half_add_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    z = tl.inline_asm_elementwise("add.rn.f16x2 $0, $1, $2;", "=r,r,r", [tl.load(x_ptr + offs), tl.load(y_ptr + offs)],
                                  dtype=tl.float16, is_pure=True, pack=2)
    tl.store(out_ptr + offs, z)


def test_two_halves_share_a_register(device):
    rng = np.random.default_rng(2)
    x, y = rng.uniform(-8, 8, N).astype(np.float16), rng.uniform(-8, 8, N).astype(np.float16)
    out = device.zeros(N, "fp16")
    if run_or_refuse(device, lambda: half_add_kernel[(1,)](device.put(x), device.put(y), out, BLOCK=N)):
        np.testing.assert_array_equal(device.get(out), x + y)


@despina.jit
def bad_asm_kernel(x_ptr, CASE: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    if CASE == "count":
        tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r,r", [x], dtype=tl.int32, is_pure=True, pack=1)
    elif CASE == "bool":
        tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x > 0], dtype=tl.int32, is_pure=True, pack=1)
    elif CASE == "pack":
        tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=True, pack=3)


@pytest.mark.parametrize("case,message", [
    ("count", "list 1 output and 2 input registers, but pack=1 needs 1 and 1"),
    ("bool", "takes numeric arguments other than int1"),
    ("pack", "pack must be a power of two, got 3"),
])
def test_bad_calls_are_clear_errors(device, case, message):
    with pytest.raises(despina.CompilationError, match=message):
        bad_asm_kernel[(1,)](device.put(np.zeros(16, np.int32)), CASE=case)
