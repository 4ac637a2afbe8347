"""The language's surface: every Triton name the foundation issue lists, dtypes and constexpr."""

from __future__ import annotations

import numpy as np
import pytest

import despina
import despina.language as tl

LANGUAGE_NAMES = """
constexpr int1 int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 bfloat16 float32 float64 pointer_type
program_id num_programs arange zeros zeros_like full cat load store
where maximum minimum clamp abs exp exp2 log log2 sqrt rsqrt sin cos sigmoid erf floor ceil fma cdiv umulhi div_rn fdiv
cast broadcast_to expand_dims reshape view trans permute ravel split join
sum max min argmax argmin reduce xor_sum cumsum cumprod associative_scan dot
atomic_add atomic_max atomic_min atomic_and atomic_or atomic_xor atomic_xchg atomic_cas
rand randn randint randint4x multiple_of max_contiguous max_constancy assume static_range range
static_assert static_print device_print device_assert debug_barrier tensor dtype
""".split()
TOP_LEVEL_NAMES = "jit cdiv next_power_of_2 Config autotune heuristics CompilationError language".split()


@pytest.mark.parametrize("name", LANGUAGE_NAMES)
def test_language_name_exists(name):
    assert hasattr(tl, name), f"despina.language.{name} is missing"


@pytest.mark.parametrize("name", TOP_LEVEL_NAMES)
def test_top_level_name_exists(name):
    assert hasattr(despina, name), f"despina.{name} is missing"


def test_dtypes():
    assert [str(d) for d in (tl.int1, tl.int8, tl.uint64, tl.float16, tl.bfloat16, tl.float32, tl.float64)] == [
        "int1", "int8", "uint64", "fp16", "bf16", "fp32", "fp64"]
    assert tl.float32.is_floating() and tl.uint8.is_int_unsigned() and tl.int1.is_bool()
    assert tl.bfloat16.primitive_bitwidth == 16 and tl.pointer_type(tl.float16).element_ty == tl.float16


def test_constexpr_wraps_values():
    c = tl.constexpr(tl.constexpr(4))
    assert c.value == 4 and c == 4 and int(c) == 4 and bool(c) and hash(c) == hash(4)


@despina.jit
def triton_style_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)


def test_triton_style_imports(device):
    import despina as triton

    x = np.arange(50, dtype=np.float32)
    out = device.zeros(50, "fp32")
    triton_style_kernel[lambda meta: (triton.cdiv(50, meta["BLOCK"]),)](device.put(x), out, 50, BLOCK=16)
    np.testing.assert_array_equal(device.get(out), x + 1)
