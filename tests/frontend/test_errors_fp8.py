"""Kernel errors of the 8-bit floats, reported at the call (see test_errors.py for the scheme)."""

from __future__ import annotations

import functools

import numpy as np

import despina
import despina.language as tl

from .error_kit import compile_error, expect_in

E4 = despina.reinterpret(np.zeros(16, np.uint8), tl.float8e4nv)
E5 = despina.reinterpret(np.zeros(16, np.uint8), tl.float8e5)
F16 = np.zeros(16, np.float16)
expect = functools.partial(expect_in, __file__)


@despina.jit
def add_kernel(x_ptr, y_ptr):
    offs = tl.arange(0, 16)
    x = tl.load(x_ptr + offs)
    tl.store(y_ptr + offs, x + tl.load(y_ptr + offs))  # E:add


@despina.jit
def literal_kernel(x_ptr):
    offs = tl.arange(0, 16)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2.0)  # E:literal


@despina.jit
def rtz_kernel(x_ptr, y_ptr):
    offs = tl.arange(0, 16)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs).to(tl.float8e4nv, fp_downcast_rounding="rtz"))  # E:rtz


@despina.jit
def promote_kernel(x_ptr, y_ptr, out_ptr):
    offs = tl.arange(0, 16)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))


def test_arithmetic_on_fp8_asks_for_a_cast(trace):
    for other in (E4, np.zeros(16, np.int32)):
        expect(compile_error(trace, add_kernel, E4, other), "add_kernel", "add", "x + tl.load",
               "arithmetic on fp8e4nv values is not supported", "x.to(tl.float32)")
    expect(compile_error(trace, literal_kernel, E5), "literal_kernel", "literal", "tl.load(x_ptr + offs) * 2.0",
           "arithmetic on fp8e5 values is not supported")


def test_rtz_to_fp8_is_refused(trace):
    expect(compile_error(trace, rtz_kernel, np.zeros(16, np.float32), E4), "rtz_kernel", "rtz", "tl.load(x_ptr + offs).to",
           "fp_downcast_rounding='rtz' is not available for fp8e4nv", "leave fp_downcast_rounding out")


def test_fp8_promotes_as_in_triton(trace):
    """fp8 with fp16 and the two fp8 types together compute in fp16; fp8 with bf16 in fp32."""
    for x, y, want in ((E4, F16, "fp16"), (E4, E5, "fp16"), (E5, np.zeros(16, np.float32), "fp32")):
        ops = [op for op in trace(promote_kernel, x, y, np.zeros(16, np.float32)).kernel.body.walk() if op.name == "add"]
        assert [str(op.result.type) for op in ops] == [f"tile<16x{want}>"]


@despina.jit
def imprecise_kernel(x_ptr, out_ptr, ACC: tl.constexpr):
    offs = tl.arange(0, 16)
    a = tl.load(x_ptr + offs[:, None] * 16 + offs[None, :])
    c = tl.dot(a, a, max_num_imprecise_acc=ACC)  # E:imprecise
    tl.store(out_ptr + offs[:, None] * 16 + offs[None, :], c)


@despina.jit
def fp8_acc_kernel(x_ptr, out_ptr):
    offs = tl.arange(0, 16)
    a = tl.load(x_ptr + offs[:, None] * 16 + offs[None, :])
    c = tl.dot(a, a, out_dtype=tl.float16)  # E:fp8acc
    tl.store(out_ptr + offs[:, None] * 16 + offs[None, :], c)


def test_fp8_dot_options(trace):
    x = despina.reinterpret(np.zeros(256, np.uint8), tl.float8e4nv)
    out = np.zeros(256, np.float32)
    expect(compile_error(trace, imprecise_kernel, x, out, ACC=8), "imprecise_kernel", "imprecise", "tl.dot",
           "max_num_imprecise_acc=8 for an fp8 dot with K=16: only K (16) is supported", "leave it out")
    trace(imprecise_kernel, x, out, ACC=16)
    expect(compile_error(trace, fp8_acc_kernel, x, np.zeros(256, np.float16)), "fp8_acc_kernel", "fp8acc", "tl.dot",
           "dot of fp8e4nv tiles accumulates in fp32, not fp16")
