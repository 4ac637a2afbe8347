"""Kernel errors the language raises, reported at the call (see test_errors.py for the scheme)."""

from __future__ import annotations

import functools

import numpy as np

import despina
import despina.language as tl

from .error_kit import compile_error, expect_in

X = np.zeros(16, np.float32)
expect = functools.partial(expect_in, __file__)


# ---- the language's errors, reported at the call --------------------------------------------


@despina.jit
def runtime_arange_kernel(x_ptr, n):
    offs = tl.arange(0, n)  # E:arangeruntime
    tl.store(x_ptr + offs, 1.0)


@despina.jit
def pow2_kernel(x_ptr):
    offs = tl.arange(0, 12)  # E:pow2
    tl.store(x_ptr + offs, 1.0)


@despina.jit
def empty_arange_kernel(x_ptr):
    offs = tl.arange(8, 8)  # E:emptyarange
    tl.store(x_ptr + offs, 1.0)


@despina.jit
def huge_tile_kernel(x_ptr):
    z = tl.zeros((2048, 1024), tl.float32)  # E:hugetile
    tl.store(x_ptr, tl.sum(z))


@despina.jit
def static_range_runtime_kernel(x_ptr, n):
    for _i in tl.static_range(n):  # E:staticruntime
        pass


def test_non_constexpr_where_a_constexpr_is_required(trace):
    expect(compile_error(trace, runtime_arange_kernel, X, 16), "runtime_arange_kernel", "arangeruntime", "tl.arange",
           "arange's end must be a constexpr integer, got a run-time int32 value", "tl.constexpr parameter")
    expect(compile_error(trace, static_range_runtime_kernel, X, 3), "static_range_runtime_kernel", "staticruntime",
           "tl.static_range", "static_range bounds must be constexpr integers", "use tl.range")


def test_tile_shape_rules(trace):
    expect(compile_error(trace, pow2_kernel, X), "pow2_kernel", "pow2", "tl.arange",
           "arange's length dimensions must be powers of two, got [12]", "next_power_of_2", "mask")
    expect(compile_error(trace, empty_arange_kernel, X), "empty_arange_kernel", "emptyarange", "tl.arange",
           "arange's end (8) must be greater than its start (8)")
    expect(compile_error(trace, huge_tile_kernel, X), "huge_tile_kernel", "hugetile", "tl.zeros",
           "has 2097152 elements; a tile holds at most 1048576", "split the work")


@despina.jit
def shape_mismatch_kernel(x_ptr):
    a = tl.arange(0, 16)
    b = tl.arange(0, 32)
    tl.store(x_ptr + a, a + b)  # E:shapemismatch


@despina.jit
def broadcast_to_kernel(x_ptr):
    a = tl.arange(0, 16)
    tl.store(x_ptr + a, tl.sum(tl.broadcast_to(a, (16, 8)), 1))  # E:broadcastto


@despina.jit
def broadcast_down_kernel(x_ptr):
    tl.store(x_ptr, tl.sum(tl.broadcast_to(tl.zeros((4, 8), tl.float32), (1, 8))))  # E:broadcastdown


def test_shape_mismatch(trace):
    expect(compile_error(trace, broadcast_down_kernel, X), "broadcast_down_kernel", "broadcastdown", "tl.broadcast_to",
           "cannot broadcast shape [4, 8] to [1, 8]; each dimension must match or be 1")
    expect(compile_error(trace, shape_mismatch_kernel, X), "shape_mismatch_kernel", "shapemismatch", "a + b",
           "shapes [16] and [32] are incompatible for broadcasting", "x[:, None]")
    expect(compile_error(trace, broadcast_to_kernel, X), "broadcast_to_kernel", "broadcastto", "tl.broadcast_to",
           "shapes [16] and [16, 8] are incompatible for broadcasting", "x[:, None]")


@despina.jit
def float_bitwise_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, x & 1)  # E:floatbitwise


@despina.jit
def float_invert_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, ~x)  # E:floatinvert


@despina.jit
def float_shift_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, x << 1)  # E:floatshift


@despina.jit
def literal_range_kernel(x_ptr):
    x = tl.load(x_ptr).to(tl.int8)
    tl.store(x_ptr, x + 300)  # E:literalrange


@despina.jit
def ptr_mul_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr * 2))  # E:ptrmul


@despina.jit
def ptr_float_offset_kernel(x_ptr):
    tl.store(x_ptr + 1.5, 1.0)  # E:ptrfloat


@despina.jit
def str_operand_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, x + "a")  # E:stroperand


@despina.jit
def huge_literal_kernel(x_ptr):
    tl.store(x_ptr, tl.full((), 2**70, tl.int64))  # E:hugeliteral


@despina.jit
def fma_int_kernel(x_ptr):
    a = tl.arange(0, 16)
    tl.store(x_ptr + a, tl.fma(a, a, a))  # E:fmaint


@despina.jit
def math_ptr_kernel(x_ptr):
    tl.store(x_ptr, tl.exp(x_ptr))  # E:mathptr


@despina.jit
def math_tuple_kernel(x_ptr):
    tl.store(x_ptr, tl.exp((1.0, 2.0)))  # E:mathtuple


def test_dtype_mismatch(trace):
    expect(compile_error(trace, float_bitwise_kernel, X), "float_bitwise_kernel", "floatbitwise", "x & 1",
           "'&' needs integer operands, got fp32", ".to(")
    expect(compile_error(trace, float_invert_kernel, X), "float_invert_kernel", "floatinvert", "~x",
           "'~' needs an integer tensor, got fp32", ".to(")
    expect(compile_error(trace, float_shift_kernel, X), "float_shift_kernel", "floatshift", "x << 1",
           "'<<' needs integer operands, got fp32", ".to(")
    expect(compile_error(trace, literal_range_kernel, X), "literal_range_kernel", "literalrange", "x + 300",
           "integer literal 300 does not fit in the tensor's type int8", ".to(")
    expect(compile_error(trace, ptr_mul_kernel, X), "ptr_mul_kernel", "ptrmul", "x_ptr * 2",
           "expected a numeric tensor, got ptr<fp32>", "pointers support only + and - of integer offsets")
    expect(compile_error(trace, ptr_float_offset_kernel, X), "ptr_float_offset_kernel", "ptrfloat", "x_ptr + 1.5",
           "pointer offsets must be integers, got fp32", ".to(tl.int32)")
    expect(compile_error(trace, str_operand_kernel, X), "str_operand_kernel", "stroperand", 'x + "a"',
           "cannot use str value 'a' as a kernel value")
    expect(compile_error(trace, huge_literal_kernel, X), "huge_literal_kernel", "hugeliteral", "tl.full",
           "does not fit in 64 bits")
    expect(compile_error(trace, fma_int_kernel, X), "fma_int_kernel", "fmaint", "tl.fma",
           "fma needs floating-point operands, got int32", ".to(tl.float32)")
    expect(compile_error(trace, math_ptr_kernel, X), "math_ptr_kernel", "mathptr", "tl.exp",
           "exp needs a numeric tensor, got ptr<fp32>")
    expect(compile_error(trace, math_tuple_kernel, X), "math_tuple_kernel", "mathtuple", "tl.exp",
           "expected a tensor or a number, got tuple")


@despina.jit
def cast_target_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr).to("float32"))  # E:casttarget


@despina.jit
def bitcast_width_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr).to(tl.int16, bitcast=True))  # E:bitcastwidth


@despina.jit
def ptr_cast_kernel(x_ptr):
    tl.store(x_ptr, x_ptr.to(tl.int32))  # E:ptrcast


@despina.jit
def rounding_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr).to(tl.float16, fp_downcast_rounding="up"))  # E:rounding


def test_cast_errors(trace):
    expect(compile_error(trace, cast_target_kernel, X), "cast_target_kernel", "casttarget", "tl.load",
           "cast target must be a dtype such as tl.float32, got 'float32'")
    expect(compile_error(trace, bitcast_width_kernel, X), "bitcast_width_kernel", "bitcastwidth", "tl.load",
           "cannot bitcast fp32 (32 bits) to int16 (16 bits)", "same width")
    expect(compile_error(trace, ptr_cast_kernel, X), "ptr_cast_kernel", "ptrcast", "x_ptr.to",
           "pointers cast only to and from int64, not int32")
    expect(compile_error(trace, rounding_kernel, X), "rounding_kernel", "rounding", "tl.load",
           "fp_downcast_rounding must be 'rtne' or 'rtz', got 'up'")


@despina.jit
def load_non_pointer_kernel(x_ptr):
    tl.store(x_ptr, tl.load(1.0))  # E:loadnonptr


@despina.jit
def cache_modifier_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr, cache_modifier=".xx"))  # E:cachemod


@despina.jit
def eviction_kernel(x_ptr):
    tl.store(x_ptr, 1.0, eviction_policy="never")  # E:eviction


@despina.jit
def boundary_check_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr, boundary_check=(0,)))  # E:boundary


@despina.jit
def other_without_mask_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr, other=0.0))  # E:otherwithoutmask


def test_load_store_errors(trace):
    expect(compile_error(trace, load_non_pointer_kernel, X), "load_non_pointer_kernel", "loadnonptr", "tl.load(1",
           "tl.load needs a pointer or a tile of pointers, got 1.0")
    expect(compile_error(trace, cache_modifier_kernel, X), "cache_modifier_kernel", "cachemod", "tl.load(x",
           "cache_modifier must be one of '', '.ca', '.cg'", "got '.xx'")
    expect(compile_error(trace, eviction_kernel, X), "eviction_kernel", "eviction", "tl.store",
           "eviction_policy must be one of '', 'evict_normal', 'evict_first', 'evict_last', got 'never'")
    expect(compile_error(trace, boundary_check_kernel, X), "boundary_check_kernel", "boundary", "tl.load(x",
           "boundary_check and padding_option belong to block pointers (tl.make_block_ptr)", "mask")
    expect(compile_error(trace, other_without_mask_kernel, X), "other_without_mask_kernel", "otherwithoutmask",
           "tl.load(x", "tl.load got `other` without a `mask`; pass the mask")


@despina.jit
def atomic_sem_kernel(x_ptr):
    tl.atomic_add(x_ptr, 1.0, sem="strong")  # E:atomicsem


@despina.jit
def atomic_scope_kernel(x_ptr):
    tl.atomic_add(x_ptr, 1.0, scope="world")  # E:atomicscope


@despina.jit
def atomic_float_and_kernel(x_ptr):
    tl.atomic_and(x_ptr, 1.0)  # E:atomicfloatand


@despina.jit
def atomic_ptr_ptr_kernel(x_ptr):
    p = x_ptr.to(tl.pointer_type(tl.pointer_type(tl.float32)))
    tl.atomic_xchg(p, x_ptr)  # E:atomicptrptr


def test_atomic_errors(trace):
    expect(compile_error(trace, atomic_sem_kernel, X), "atomic_sem_kernel", "atomicsem", "tl.atomic_add",
           "sem must be 'relaxed', 'acquire', 'release' or 'acq_rel', got 'strong'")
    expect(compile_error(trace, atomic_scope_kernel, X), "atomic_scope_kernel", "atomicscope", "tl.atomic_add",
           "scope must be 'gpu', 'cta' or 'sys', got 'world'")
    expect(compile_error(trace, atomic_float_and_kernel, X), "atomic_float_and_kernel", "atomicfloatand",
           "tl.atomic_and", "tl.atomic_and needs integer pointers, got ptr<fp32>")
    expect(compile_error(trace, atomic_ptr_ptr_kernel, X), "atomic_ptr_ptr_kernel", "atomicptrptr", "tl.atomic_xchg",
           "tl.atomic_xchg needs pointers to numbers, got ptr<ptr<fp32>>")


@despina.jit
def program_axis_kernel(x_ptr):
    tl.store(x_ptr, tl.program_id(3))  # E:programaxis


@despina.jit
def reduce_axis_kernel(x_ptr):
    tl.store(x_ptr, tl.sum(tl.arange(0, 16), axis=1))  # E:reduceaxis


@despina.jit
def reduce_scalar_kernel(x_ptr):
    tl.store(x_ptr, tl.sum(tl.load(x_ptr), axis=0))  # E:reducescalar


@despina.jit
def xor_sum_float_kernel(x_ptr):
    tl.store(x_ptr, tl.xor_sum(tl.load(x_ptr + tl.arange(0, 16)), 0))  # E:xorsumfloat


@despina.jit
def pair_combine(a, b, c, d):
    return a + c


@despina.jit
def combine_count_kernel(x_ptr):
    a = tl.arange(0, 16)
    s, t = tl.reduce((a, a), 0, pair_combine)  # E:combinecount
    tl.store(x_ptr, s)


def test_reduction_errors(trace):
    expect(compile_error(trace, program_axis_kernel, X), "program_axis_kernel", "programaxis", "tl.program_id",
           "axis must be the constexpr 0, 1 or 2, got 3")
    expect(compile_error(trace, reduce_axis_kernel, X), "reduce_axis_kernel", "reduceaxis", "tl.sum",
           "axis 1 is out of range for a tile of rank 1")
    expect(compile_error(trace, reduce_scalar_kernel, X), "reduce_scalar_kernel", "reducescalar", "tl.sum",
           "sum needs tiles, got fp32")
    expect(compile_error(trace, xor_sum_float_kernel, X), "xor_sum_float_kernel", "xorsumfloat", "tl.xor_sum",
           "xor_sum needs an integer tile, got tile<16xfp32>")
    expect(compile_error(trace, combine_count_kernel, X), "combine_count_kernel", "combinecount", "tl.reduce",
           "the combine function must return 2 value(s), got 1")


@despina.jit
def dot_rank_kernel(x_ptr):
    a = tl.zeros((16,), tl.float32)
    tl.store(x_ptr, tl.sum(tl.dot(a, a)))  # E:dotrank


@despina.jit
def dot_inner_kernel(x_ptr):
    a = tl.zeros((16, 32), tl.float32)
    tl.store(x_ptr, tl.sum(tl.dot(a, a)))  # E:dotinner


@despina.jit
def dot_precision_kernel(x_ptr):
    a = tl.zeros((16, 16), tl.float32)
    tl.store(x_ptr, tl.sum(tl.dot(a, a, input_precision="fp8")))  # E:dotprecision


def test_dot_errors(trace):
    expect(compile_error(trace, dot_rank_kernel, X), "dot_rank_kernel", "dotrank", "tl.dot",
           "dot needs two 2-D (or two 3-D batched) tiles, got tile<16xfp32> and tile<16xfp32>")
    expect(compile_error(trace, dot_inner_kernel, X), "dot_inner_kernel", "dotinner", "tl.dot",
           "dot: the inner dimensions differ: [16, 32] @ [16, 32]", "tl.trans")
    expect(compile_error(trace, dot_precision_kernel, X), "dot_precision_kernel", "dotprecision", "tl.dot",
           "input_precision must be one of ('tf32', 'tf32x3', 'ieee'), got 'fp8'")


@despina.jit
def permute_kernel(x_ptr):
    z = tl.zeros((2, 4, 8), tl.float32)
    tl.store(x_ptr, tl.sum(tl.permute(z, (0, 0, 1))))  # E:permute


@despina.jit
def trans_3d_kernel(x_ptr):
    z = tl.zeros((2, 4, 8), tl.float32)
    tl.store(x_ptr, tl.sum(tl.trans(z)))  # E:trans3d


@despina.jit
def cat_scalar_kernel(x_ptr):
    tl.store(x_ptr, tl.cat(1.0, 2.0))  # E:catscalar


@despina.jit
def split_kernel(x_ptr):
    a, b = tl.split(tl.zeros((16, 4), tl.float32))  # E:split
    tl.store(x_ptr, tl.sum(a))


@despina.jit
def index_count_kernel(x_ptr):
    a = tl.arange(0, 16)
    tl.store(x_ptr, tl.sum(a[:, :]))  # E:indexcount


@despina.jit
def index_kind_kernel(x_ptr):
    a = tl.arange(0, 16)
    tl.store(x_ptr, a[3])  # E:indexkind


def test_shape_op_errors(trace):
    expect(compile_error(trace, permute_kernel, X), "permute_kernel", "permute", "tl.permute",
           "[0, 0, 1] is not a permutation of the 3 dimensions of tile<2x4x8xfp32>")
    expect(compile_error(trace, trans_3d_kernel, X), "trans_3d_kernel", "trans3d", "tl.trans",
           "trans without dims needs a 2-D tile, got tile<2x4x8xfp32>; pass the permutation")
    expect(compile_error(trace, cat_scalar_kernel, X), "cat_scalar_kernel", "catscalar", "tl.cat",
           "cat needs tiles, got scalars")
    expect(compile_error(trace, split_kernel, X), "split_kernel", "split", "tl.split",
           "split needs a last dimension of size 2, got tile<16x4xfp32>", "tl.reshape")
    expect(compile_error(trace, index_count_kernel, X), "index_count_kernel", "indexcount", "a[:, :]",
           "too many indices for a tile of shape [16]")
    expect(compile_error(trace, index_kind_kernel, X), "index_kind_kernel", "indexkind", "a[3]",
           "tiles support only `None` and `:` in an index, got 3; use tl.split, tl.reshape or a mask")


@despina.jit
def reshape_count_kernel(x_ptr):
    tl.store(x_ptr, tl.sum(tl.reshape(tl.arange(0, 16), (8, 4))))  # E:reshapecount


@despina.jit
def expand_axis_kernel(x_ptr):
    tl.store(x_ptr, tl.sum(tl.expand_dims(tl.arange(0, 16), 2)))  # E:expandaxis


@despina.jit
def dot_acc_kernel(x_ptr):
    a = tl.zeros((16, 16), tl.float32)
    tl.store(x_ptr, tl.sum(tl.dot(a, a, tl.zeros((16, 32), tl.float32))))  # E:dotacc


@despina.jit
def store_tile_scalar_kernel(x_ptr):
    tl.store(x_ptr, tl.zeros((16,), tl.float32))  # E:storetile


@despina.jit
def builtin_arity_kernel(x_ptr):
    tl.store(x_ptr + tl.arange(16), 1.0)  # E:builtinarity


@despina.jit
def builtin_keyword_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr, msk=None))  # E:builtinkeyword


def test_more_shape_rules(trace):
    expect(compile_error(trace, reshape_count_kernel, X), "reshape_count_kernel", "reshapecount", "tl.reshape",
           "cannot reshape tile<16xint32> (16 elements) to [8, 4]; the number of elements must stay the same")
    expect(compile_error(trace, expand_axis_kernel, X), "expand_axis_kernel", "expandaxis", "tl.expand_dims",
           "expand_dims axes [2] are out of range for a result of rank 2; use -2 to 1")
    expect(compile_error(trace, dot_acc_kernel, X), "dot_acc_kernel", "dotacc", "tl.dot",
           "dot: acc has shape [16, 32] but the product of [16, 16] and [16, 16] has [16, 16]")
    expect(compile_error(trace, store_tile_scalar_kernel, X), "store_tile_scalar_kernel", "storetile", "tl.store",
           "tl.store got a tile<16xfp32> value for a single pointer", "ptr + tl.arange(...)")


def test_wrong_arguments_to_a_builtin(trace):
    expect(compile_error(trace, builtin_arity_kernel, X), "builtin_arity_kernel", "builtinarity", "tl.arange",
           "arange() missing 1 required positional argument: 'end'")
    expect(compile_error(trace, builtin_keyword_kernel, X), "builtin_keyword_kernel", "builtinkeyword", "tl.load(x",
           "load() got an unexpected keyword argument 'msk'")


@despina.jit
def static_assert_kernel(x_ptr, N: tl.constexpr):
    tl.static_assert(N > 4, "N must exceed 4")  # E:staticassert


@despina.jit
def static_assert_runtime_kernel(x_ptr, n):
    tl.static_assert(n > 4)  # E:staticassertruntime


@despina.jit
def device_print_kernel(x_ptr):
    tl.device_print(tl.load(x_ptr))  # E:deviceprint


@despina.jit
def hint_float_kernel(x_ptr):
    tl.store(x_ptr, tl.multiple_of(tl.load(x_ptr), 16))  # E:hintfloat


@despina.jit
def nan_mode_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, tl.maximum(x, x, propagate_nan="sometimes"))  # E:nanmode


def test_debug_and_hint_errors(trace):
    expect(compile_error(trace, static_assert_kernel, X, N=2), "static_assert_kernel", "staticassert",
           "tl.static_assert", "static_assert failed: N must exceed 4")
    expect(compile_error(trace, static_assert_runtime_kernel, X, 3), "static_assert_runtime_kernel",
           "staticassertruntime", "tl.static_assert", "static_assert needs a constexpr condition; use tl.device_assert")
    expect(compile_error(trace, device_print_kernel, X), "device_print_kernel", "deviceprint", "tl.device_print",
           "device_print's first argument must be a constexpr string")
    expect(compile_error(trace, hint_float_kernel, X), "hint_float_kernel", "hintfloat", "tl.multiple_of",
           "multiple_of applies to integer values (offsets), got fp32")
    expect(compile_error(trace, nan_mode_kernel, X), "nan_mode_kernel", "nanmode", "tl.maximum",
           "propagate_nan must be tl.PropagateNan.NONE or .ALL, got 'sometimes'")


@despina.jit
def truth_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, 1.0 if (x, 1) == (x + 1, 1) else 2.0)  # E:truth


@despina.jit
def iterate_kernel(x_ptr):
    tl.store(x_ptr, tl.maximum(*tl.arange(0, 2)))  # E:iterate


@despina.jit
def scalar_len_kernel(x_ptr):
    tl.store(x_ptr, len(tl.load(x_ptr)))  # E:scalarlen


def test_tensor_python_protocols(trace):
    expect(compile_error(trace, truth_kernel, X), "truth_kernel", "truth", "(x, 1) ==",
           "a tensor has no Python truth value at trace time", "tl.where")
    expect(compile_error(trace, iterate_kernel, X), "iterate_kernel", "iterate", "tl.maximum",
           "a tensor cannot be iterated", "tl.split")
    expect(compile_error(trace, scalar_len_kernel, X), "scalar_len_kernel", "scalarlen", "len(",
           "len() of a scalar tensor", ".shape")
