"""Every public name of Triton 3.6's `triton.language` exists in `despina.language`, unless it is
on the short list below of names not supported, each with the reason."""

from __future__ import annotations

import despina.language as tl

# `triton/language/__init__.py` `__all__` of Triton 3.6.0, as released.
TRITON_3_6_NAMES = (
    "PropagateNan", "TRITON_MAX_TENSOR_NUMEL", "load_tensor_descriptor", "store_tensor_descriptor",
    "make_tensor_descriptor", "tensor_descriptor", "abs", "add", "advance", "arange", "argmax", "argmin",
    "associative_scan", "assume", "atomic_add", "atomic_and", "atomic_cas", "atomic_max", "atomic_min", "atomic_or",
    "atomic_xchg", "atomic_xor", "bfloat16", "bitonic_merge", "block_type", "broadcast", "broadcast_to", "cat", "cast",
    "cdiv", "ceil", "clamp", "condition", "const", "constexpr", "constexpr_type", "cos", "cumprod", "cumsum",
    "debug_barrier", "device_assert", "device_print", "div_rn", "dot", "dot_scaled", "dtype", "erf", "exp", "exp2",
    "expand_dims", "extra", "fdiv", "flip", "float16", "float32", "float64", "float8e4b15", "float8e4nv", "float8e4b8",
    "float8e5", "float8e5b16", "floor", "fma", "full", "gather", "histogram", "inline_asm_elementwise", "interleave",
    "int1", "int16", "int32", "int64", "int8", "join", "load", "log", "log2", "make_block_ptr", "map_elementwise",
    "math", "max", "max_constancy", "max_contiguous", "maximum", "min", "minimum", "mul", "multiple_of",
    "num_programs", "pair_uniform_to_normal", "permute", "philox", "philox_impl", "pi32_t", "pointer_type",
    "program_id", "rand", "rand4x", "randint", "randint4x", "randn", "randn4x", "range", "ravel", "reduce",
    "reduce_or", "reshape", "rsqrt", "slice", "sigmoid", "sin", "softmax", "sort", "split", "sqrt", "sqrt_rn",
    "static_assert", "static_print", "static_range", "store", "sub", "sum", "swizzle2d", "target_info", "tensor",
    "topk", "trans", "tuple", "uint16", "uint32", "uint64", "uint8", "uint_to_uniform_float", "umulhi", "view", "void",
    "where", "xor_sum", "zeros", "zeros_like",
)

_FNUZ = "AMD's fnuz fp8 format (MI300); NVIDIA GPUs have no conversion or MMA for it, only e4m3fn and e5m2"
NOT_SUPPORTED = {
    "float8e4b15": "Triton's legacy e4m3 with bias 15, emulated in integer ops on every GPU; float8e4nv (OCP e4m3fn) "
                   "is the format NVIDIA's cvt and wgmma take",
    "float8e4b8": _FNUZ, "float8e5b16": _FNUZ,
    "dot_scaled": "microscaled (mxfp8/mxfp4) products with per-block scales: Blackwell's block-scaled MMA, or an "
                  "emulation that upcasts and scales, neither of which the backend has yet",
    "map_elementwise": "it runs a scalar function with control flow per element, which needs a scalar-region op the "
                       "IR lacks; elementwise @jit helpers on whole tiles do the same without branches",
    "condition": "Triton's `while tl.condition(c, disable_licm=...)` hint; despina's loop passes have no LICM switch",
    "const": "const-qualified pointer types; the IR's pointers carry no constness",
    "void": "the IR has no void values (functions without a result return nothing)",
    "constexpr_type": "Triton's type of constexpr values in its own type system; a despina constexpr is a Python value",
    "tuple": "kernel tuples are Python tuples in despina (indexing and unpacking them works without a tl type)",
    "slice": "Triton's type of slices inside its tuple type; slicing Python tuples needs no tl type",
    "target_info": "Triton's target queries (is_cuda, cuda_capability_geq); despina compiles every kernel for the "
                   "one target of the launch, given as a constexpr where a kernel needs to branch on it",
}


def test_every_triton_name_is_here_or_documented_as_not_supported():
    missing = [n for n in TRITON_3_6_NAMES if not hasattr(tl, n) and n not in NOT_SUPPORTED]
    assert not missing, f"Triton 3.6 names missing from despina.language: {missing}"


def test_the_not_supported_list_holds_only_missing_triton_names():
    assert set(NOT_SUPPORTED) <= set(TRITON_3_6_NAMES)
    assert [n for n in NOT_SUPPORTED if hasattr(tl, n)] == []
    assert all(len(reason) > 20 for reason in NOT_SUPPORTED.values())
