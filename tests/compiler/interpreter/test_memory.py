"""Loads, stores and pointers: addressing, masks, dtypes in memory, and the errors of bad accesses."""

from __future__ import annotations

import re

import numpy as np
import pytest

from despina.compiler.errors import KernelRuntimeError
from despina.compiler.ir.types import PointerType, int1, int32, int64

from .kernel import FILE, K, ptr, vector_add
from .reference import bf16, from_memory, to_memory


@pytest.mark.parametrize("n", [4096, 4000, 1])
def test_vector_add_with_masked_tail(n: int) -> None:
    rng = np.random.default_rng(0)
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    out = np.full(n + 8, -1.0, dtype=np.float32)
    vector_add(256).run((n + 255) // 256, x, y, out, n)
    np.testing.assert_array_equal(out[:n], x + y)
    np.testing.assert_array_equal(out[n:], -1.0)


def test_vector_add_benchmark_sized() -> None:
    n = 1 << 20
    rng = np.random.default_rng(1)
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    out = np.empty_like(x)
    vector_add(1024).run(n // 1024, x, y, out, n)
    np.testing.assert_array_equal(out, x + y)


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int64", "fp16", "bf16", "fp64"])
def test_vector_add_in_memory_dtypes(dtype: str) -> None:
    x = np.arange(100) % 7 * 1.5 if dtype in ("fp16", "bf16", "fp64") else np.arange(100) % 50
    out = np.zeros(100, dtype=to_memory(x, dtype).dtype)
    vector_add(32, dtype=dtype).run(4, to_memory(x, dtype), to_memory(x, dtype), out, 100)
    np.testing.assert_array_equal(from_memory(out, dtype), from_memory(to_memory(2 * x, dtype), dtype))


def test_masked_load_takes_other_and_masked_store_skips() -> None:
    k = K(x=ptr("int32"), out=ptr("int32"))
    offs = k.arange(16)
    even = k.op("cmp", k.op("rem", offs, k.splat(k.const(2), 16)), k.splat(k.const(0), 16), pred="eq")
    loaded = k.op("load", k.at(k.arg["x"], offs), even, k.splat(k.const(-5), 16))
    k.void("store", k.at(k.arg["out"], offs), loaded)
    k.void("store", k.at(k.arg["out"], k.op("add", offs, k.splat(k.const(16), 16))), loaded, even)
    x, out = np.arange(16, dtype=np.int32) + 100, np.zeros(32, dtype=np.int32)
    k.run(1, x, out)
    np.testing.assert_array_equal(out[:16], np.where(np.arange(16) % 2 == 0, x, -5))
    np.testing.assert_array_equal(out[16:], np.where(np.arange(16) % 2 == 0, x, 0))


def test_masked_load_without_other_reads_zero_and_fully_masked_touches_nothing() -> None:
    k = K(x=ptr("fp32"), out=ptr("fp32"))
    offs = k.arange(8)
    none = k.splat(k.const(False, int1), 8)
    # Every lane is off: the pointers (far out of bounds) are never looked at.
    far = k.op("add", offs, k.splat(k.const(1 << 20), 8))
    k.void("store", k.at(k.arg["out"], offs), k.op("load", k.at(k.arg["x"], far), none))
    out = np.ones(8, dtype=np.float32)
    k.run(3, np.ones(4, np.float32), out)
    np.testing.assert_array_equal(out, 0.0)


def test_2d_tiles_with_a_row_stride() -> None:
    # Each program copies the transpose of one 8x4 block of a 16x8 matrix.
    k = K(a=ptr("fp32"), out=ptr("fp32"), stride=int32)
    rows = k.op("add", k.splat(k.op("mul", k.pid(), k.const(8)), 8), k.arange(8))
    cols = k.arange(4)
    r2 = k.op("broadcast", k.op("expand_dims", rows, axis=1), shape=[8, 4])
    c2 = k.op("broadcast", k.op("expand_dims", cols, axis=0), shape=[8, 4])
    offs = k.op("add", k.op("mul", r2, k.splat(k.arg["stride"], [8, 4])), c2)
    block = k.op("load", k.at(k.arg["a"], offs))
    t_offs = k.op(
        "add", k.op("mul", k.op("trans", c2, perm=[1, 0]), k.splat(k.const(16), [4, 8])), k.op("trans", r2, perm=[1, 0])
    )
    k.void("store", k.at(k.arg["out"], t_offs), k.op("trans", block, perm=[1, 0]))
    a = np.arange(128, dtype=np.float32).reshape(16, 8)
    out = np.zeros((4, 16), dtype=np.float32)
    k.run(2, a, out, 8)
    np.testing.assert_array_equal(out, a[:, :4].T)


def test_gather_and_scatter_through_an_index_tensor() -> None:
    k = K(x=ptr("fp64"), idx=ptr("int64"), out=ptr("fp64"))
    offs = k.offsets(16)
    where = k.op("load", k.at(k.arg["idx"], offs))
    k.void("store", k.at(k.arg["out"], where), k.op("load", k.at(k.arg["x"], offs)))
    perm = np.random.default_rng(2).permutation(64)
    x, out = np.arange(64, dtype=np.float64), np.zeros(64)
    k.run(4, x, perm.astype(np.int64), out)
    np.testing.assert_array_equal(out[perm], x)


def test_uniform_load_and_scalar_accesses() -> None:
    # Every program loads the same table; program p stores table[p] * x[p] at out[p].
    k = K(table=ptr("int32"), x=ptr("int32"), out=ptr("int32"))
    pid = k.pid()
    table = k.op("load", k.at(k.arg["table"], k.arange(8)))
    onehot = k.op("cmp", k.arange(8), k.splat(pid, 8), pred="eq")
    mine = k.combine(
        "reduce", [k.op("select", onehot, table, k.splat(k.const(0), 8))], lambda a, b: [k.op("add", a, b)], axis=0
    )[0]
    x = k.op("load", k.op("addptr", k.arg["x"], pid))
    k.void("store", k.op("addptr", k.arg["out"], pid), k.op("mul", mine, x))
    table, x, out = np.arange(8, dtype=np.int32) * 10, np.arange(8, dtype=np.int32) + 1, np.zeros(8, np.int32)
    k.run(8, table, x, out)
    np.testing.assert_array_equal(out, table * x)


def test_pointee_type_reinterprets_the_bytes() -> None:
    k = K(x=ptr("int32"), out=ptr("int32"))
    offs = k.arange(4)
    k.void("store", k.at(k.arg["out"], offs), k.op("load", k.at(k.arg["x"], offs)))
    x, out = np.array([1.0, -2.0, 0.5, np.inf], dtype=np.float32), np.zeros(4, np.int32)
    k.run(1, x, out)
    np.testing.assert_array_equal(out, x.view(np.int32))


def test_bf16_and_int1_in_memory() -> None:
    k = K(x=ptr("bf16"), flags=ptr("int1"), out=ptr("bf16"), out_flags=ptr("int1"))
    offs = k.arange(8)
    x = k.op("load", k.at(k.arg["x"], offs))
    f = k.op("load", k.at(k.arg["flags"], offs))
    k.void("store", k.at(k.arg["out"], offs), k.op("select", f, k.op("neg", x), x))
    k.void("store", k.at(k.arg["out_flags"], offs), k.op("not", f))
    values = bf16(np.linspace(-3, 3, 8))
    flags = np.array([1, 0, 1, 0, 0, 0, 1, 1], dtype=np.bool_)
    out, out_flags = np.zeros(8, np.uint16), np.zeros(8, np.bool_)
    k.run(1, to_memory(values, "bf16"), flags, out, out_flags)
    np.testing.assert_array_equal(from_memory(out, "bf16"), np.where(flags, -values, values))
    np.testing.assert_array_equal(out_flags, ~flags)


def test_pointers_into_several_buffers_in_one_tile() -> None:
    k = K(x=ptr("int16"), y=ptr("int16"), out=ptr("int16"))
    offs = k.arange(8)
    odd = k.op("cmp", k.op("and", offs, k.splat(k.const(1), 8)), k.splat(k.const(1), 8), pred="eq")
    p = k.op("select", odd, k.at(k.arg["y"], offs), k.at(k.arg["x"], offs))
    k.void("store", k.at(k.arg["out"], offs), k.op("load", p))
    k.void("store", p, k.op("load", p, odd, k.splat(k.const(0, p.type.element_ty.element_ty), 8)))  # type: ignore[union-attr]
    x, y, out = np.arange(8, dtype=np.int16), np.arange(8, dtype=np.int16) + 100, np.zeros(8, np.int16)
    k.run(1, x, y, out)
    np.testing.assert_array_equal(out, np.where(np.arange(8) % 2 == 1, np.arange(8) + 100, np.arange(8)))
    np.testing.assert_array_equal(x, np.where(np.arange(8) % 2 == 1, np.arange(8), 0))


def test_pointer_int_round_trip() -> None:
    k = K(x=ptr("fp32"), out=ptr("fp32"))
    address = k.op("cast", k.arg["x"], to=int64)
    moved = k.op("add", address, k.const(8, int64))  # two fp32 elements on
    back = k.op("cast", moved, to=PointerType(k.arg["x"].type.element_ty))  # type: ignore[union-attr]
    k.void("store", k.arg["out"], k.op("load", back))
    out = np.zeros(1, np.float32)
    k.run(1, np.arange(4, dtype=np.float32), out)
    assert out[0] == 2.0


def _message(excinfo: pytest.ExceptionInfo[KernelRuntimeError]) -> str:
    return str(excinfo.value)


def test_out_of_bounds_load_names_kernel_line_argument_and_offset() -> None:
    x, y, out = np.zeros(1000, np.float32), np.zeros(1000, np.float32), np.zeros(1024, np.float32)
    with pytest.raises(KernelRuntimeError) as excinfo:
        vector_add(256, masked=False).run(4, x, y, out, 1000)
    msg = _message(excinfo)
    assert "'add_kernel'" in msg and f"{FILE}:12" in msg and "'x_ptr'" in msg
    assert "program (3, 0, 0)" in msg and "element (232)" in msg
    assert "element offset 1000" in msg and "holds 1000 fp32 elements" in msg and "mask" in msg.lower()


def test_out_of_bounds_store_and_negative_offsets() -> None:
    x, y, out = np.zeros(1024, np.float32), np.zeros(1024, np.float32), np.zeros(1000, np.float32)
    with pytest.raises(KernelRuntimeError, match=re.escape(f"{FILE}:14") + ".*'out_ptr'.*offset 1000"):
        vector_add(256, masked=False).run(4, x, y, out, 1000)
    k = K("neg", x=ptr("fp32"))
    k.line(3).op("load", k.at(k.arg["x"], k.op("sub", k.arange(4), k.splat(k.const(2), 4))))
    with pytest.raises(
        KernelRuntimeError, match=r"'neg' at .*:3: .*'x'.*element \(0\).*offset -2, but the buffer holds 4"
    ):
        k.run(1, np.zeros(4, np.float32))


def test_masked_off_lanes_may_point_anywhere() -> None:
    x, y, out = np.ones(1000, np.float32), np.ones(1000, np.float32), np.zeros(1000, np.float32)
    vector_add(256).run(4, x, y, out, 1000)
    np.testing.assert_array_equal(out, 2.0)


def test_null_pointer() -> None:
    k = K("uses_bias", x=ptr("fp32"), bias=ptr("fp32"))
    k.line(7).op("load", k.at(k.arg["bias"], k.arange(4)))
    with pytest.raises(KernelRuntimeError, match=r"'uses_bias' at .*:7: .*null pointer.*'bias'"):
        k.run(2, np.zeros(4, np.float32), None)


def test_misaligned_access() -> None:
    k = K(x=ptr("int8"))
    odd = k.op("addptr", k.arg["x"], k.const(1))
    k.op("load", k.op("bitcast", odd, to=ptr("fp32")))
    with pytest.raises(KernelRuntimeError, match="byte offset 1 of 'x'.*not aligned.*4 bytes"):
        k.run(1, np.zeros(16, np.int8))


def test_bad_arguments() -> None:
    k = vector_add(4)
    with pytest.raises(TypeError, match="C-contiguous"):
        k.run(1, np.zeros(8, np.float32)[::2], np.zeros(4, np.float32), np.zeros(4, np.float32), 4)
    with pytest.raises(TypeError, match="takes 4 arguments"):
        k.run(1, np.zeros(4, np.float32))
