"""`tl.extra.cuda.libdevice`: NVIDIA's libdevice math library, as in Triton (tutorial 07).

    from despina.language.extra import libdevice      # or despina.language.extra.cuda.libdevice
    y = libdevice.asin(x)                              # __nv_asinf for fp32, __nv_asin for fp64

Each function calls the libdevice function for its arguments' types (the table below, Triton 3.6's
signatures): arguments of other types are first promoted to a common type, as Triton does, and a
combination libdevice lacks is an error that lists what it takes. The call becomes an
`extern_elementwise` op; the NVPTX backend links libdevice (from the nvidia-nvvm wheel) into the
kernel, and the interpreter computes the same function with NumPy (a function without a NumPy
counterpart there is a clear error at run time).
"""

from __future__ import annotations

from typing import Any

from despina.compiler.ir import types as _t

from ...core import builder, builtin, tensor, unwrap
from ...semantic import broadcast_shapes, broadcast_to, cast, promote, to_tensor

Signature = tuple[tuple[str, ...], str, str]


def _float(arity: int) -> tuple[Signature, ...]:
    """The usual pair: `__nv_<name>f` on fp32 and `__nv_<name>` on fp64 (the name is filled in below)."""
    return ((("fp32",) * arity, "f", "fp32"), (("fp64",) * arity, "", "fp64"))


# name -> the argument types, libdevice symbol and result type of each signature.
FUNCTIONS: dict[str, tuple[Signature, ...]] = {
    "clz": ((("int32",), "__nv_clz", "int32"), (("int64",), "__nv_clzll", "int32")),
    "popc": ((("int32",), "__nv_popc", "int32"), (("int64",), "__nv_popcll", "int32")),
    "byte_perm": ((("int32", "int32", "int32"), "__nv_byte_perm", "int32"),),
    "mulhi": ((("int32", "int32"), "__nv_mulhi", "int32"), (("uint32", "uint32"), "__nv_umulhi", "uint32"), (("int64", "int64"), "__nv_mul64hi", "int64"), (("uint64", "uint64"), "__nv_umul64hi", "uint64")),
    "mul24": ((("int32", "int32"), "__nv_mul24", "int32"), (("uint32", "uint32"), "__nv_umul24", "uint32")),
    "brev": ((("int32",), "__nv_brev", "int32"), (("int64",), "__nv_brevll", "int64")),
    "sad": ((("int32", "int32", "uint32"), "__nv_sad", "int32"), (("uint32", "uint32", "uint32"), "__nv_usad", "uint32")),
    "abs": ((("int32",), "__nv_abs", "int32"), (("int64",), "__nv_llabs", "int64"), (("fp32",), "__nv_fabsf", "fp32"), (("fp64",), "__nv_fabs", "fp64")),
    "floor": _float(1),
    "rcp64h": ((("fp64",), "__nv_rcp64h", "fp64"),),
    "rsqrt": _float(1),
    "ceil": _float(1),
    "trunc": _float(1),
    "exp2": _float(1),
    "saturatef": ((("fp32",), "__nv_saturatef", "fp32"),),
    "fma_rn": ((("fp32", "fp32", "fp32"), "__nv_fmaf_rn", "fp32"), (("fp64", "fp64", "fp64"), "__nv_fma_rn", "fp64")),
    "fma_rz": ((("fp32", "fp32", "fp32"), "__nv_fmaf_rz", "fp32"), (("fp64", "fp64", "fp64"), "__nv_fma_rz", "fp64")),
    "fma_rd": ((("fp32", "fp32", "fp32"), "__nv_fmaf_rd", "fp32"), (("fp64", "fp64", "fp64"), "__nv_fma_rd", "fp64")),
    "fma_ru": ((("fp32", "fp32", "fp32"), "__nv_fmaf_ru", "fp32"), (("fp64", "fp64", "fp64"), "__nv_fma_ru", "fp64")),
    "fast_dividef": ((("fp32", "fp32"), "__nv_fast_fdividef", "fp32"),),
    "div_rn": ((("fp32", "fp32"), "__nv_fdiv_rn", "fp32"), (("fp64", "fp64"), "__nv_ddiv_rn", "fp64")),
    "div_rz": ((("fp32", "fp32"), "__nv_fdiv_rz", "fp32"), (("fp64", "fp64"), "__nv_ddiv_rz", "fp64")),
    "div_rd": ((("fp32", "fp32"), "__nv_fdiv_rd", "fp32"), (("fp64", "fp64"), "__nv_ddiv_rd", "fp64")),
    "div_ru": ((("fp32", "fp32"), "__nv_fdiv_ru", "fp32"), (("fp64", "fp64"), "__nv_ddiv_ru", "fp64")),
    "rcp_rn": ((("fp32",), "__nv_frcp_rn", "fp32"), (("fp64",), "__nv_drcp_rn", "fp64")),
    "rcp_rz": ((("fp32",), "__nv_frcp_rz", "fp32"), (("fp64",), "__nv_drcp_rz", "fp64")),
    "rcp_rd": ((("fp32",), "__nv_frcp_rd", "fp32"), (("fp64",), "__nv_drcp_rd", "fp64")),
    "rcp_ru": ((("fp32",), "__nv_frcp_ru", "fp32"), (("fp64",), "__nv_drcp_ru", "fp64")),
    "sqrt_rn": ((("fp32",), "__nv_fsqrt_rn", "fp32"), (("fp64",), "__nv_dsqrt_rn", "fp64")),
    "sqrt_rz": ((("fp32",), "__nv_fsqrt_rz", "fp32"), (("fp64",), "__nv_dsqrt_rz", "fp64")),
    "sqrt_rd": ((("fp32",), "__nv_fsqrt_rd", "fp32"), (("fp64",), "__nv_dsqrt_rd", "fp64")),
    "sqrt_ru": ((("fp32",), "__nv_fsqrt_ru", "fp32"), (("fp64",), "__nv_dsqrt_ru", "fp64")),
    "sqrt": _float(1),
    "add_rn": ((("fp64", "fp64"), "__nv_dadd_rn", "fp64"), (("fp32", "fp32"), "__nv_fadd_rn", "fp32")),
    "add_rz": ((("fp64", "fp64"), "__nv_dadd_rz", "fp64"), (("fp32", "fp32"), "__nv_fadd_rz", "fp32")),
    "add_rd": ((("fp64", "fp64"), "__nv_dadd_rd", "fp64"), (("fp32", "fp32"), "__nv_fadd_rd", "fp32")),
    "add_ru": ((("fp64", "fp64"), "__nv_dadd_ru", "fp64"), (("fp32", "fp32"), "__nv_fadd_ru", "fp32")),
    "mul_rn": ((("fp64", "fp64"), "__nv_dmul_rn", "fp64"), (("fp32", "fp32"), "__nv_fmul_rn", "fp32")),
    "mul_rz": ((("fp64", "fp64"), "__nv_dmul_rz", "fp64"), (("fp32", "fp32"), "__nv_fmul_rz", "fp32")),
    "mul_rd": ((("fp64", "fp64"), "__nv_dmul_rd", "fp64"), (("fp32", "fp32"), "__nv_fmul_rd", "fp32")),
    "mul_ru": ((("fp64", "fp64"), "__nv_dmul_ru", "fp64"), (("fp32", "fp32"), "__nv_fmul_ru", "fp32")),
    "double2float_rn": ((("fp64",), "__nv_double2float_rn", "fp32"),),
    "double2float_rz": ((("fp64",), "__nv_double2float_rz", "fp32"),),
    "double2float_rd": ((("fp64",), "__nv_double2float_rd", "fp32"),),
    "double2float_ru": ((("fp64",), "__nv_double2float_ru", "fp32"),),
    "double2int_rn": ((("fp64",), "__nv_double2int_rn", "int32"),),
    "double2int_rz": ((("fp64",), "__nv_double2int_rz", "int32"),),
    "double2int_rd": ((("fp64",), "__nv_double2int_rd", "int32"),),
    "double2int_ru": ((("fp64",), "__nv_double2int_ru", "int32"),),
    "double2uint_rn": ((("fp64",), "__nv_double2uint_rn", "int32"),),
    "double2uint_rz": ((("fp64",), "__nv_double2uint_rz", "int32"),),
    "double2uint_rd": ((("fp64",), "__nv_double2uint_rd", "int32"),),
    "double2uint_ru": ((("fp64",), "__nv_double2uint_ru", "int32"),),
    "int2double_rn": ((("int32",), "__nv_int2double_rn", "fp64"),),
    "uint2double_rn": ((("uint32",), "__nv_uint2double_rn", "fp64"),),
    "float2int_rn": ((("fp32",), "__nv_float2int_rn", "int32"),),
    "float2int_rz": ((("fp32",), "__nv_float2int_rz", "int32"),),
    "float2int_rd": ((("fp32",), "__nv_float2int_rd", "int32"),),
    "float2int_ru": ((("fp32",), "__nv_float2int_ru", "int32"),),
    "float2uint_rn": ((("fp32",), "__nv_float2uint_rn", "int32"),),
    "float2uint_rz": ((("fp32",), "__nv_float2uint_rz", "int32"),),
    "float2uint_rd": ((("fp32",), "__nv_float2uint_rd", "int32"),),
    "float2uint_ru": ((("fp32",), "__nv_float2uint_ru", "int32"),),
    "int2float_rn": ((("int32",), "__nv_int2float_rn", "fp32"),),
    "int2float_rz": ((("int32",), "__nv_int2float_rz", "fp32"),),
    "int2float_rd": ((("int32",), "__nv_int2float_rd", "fp32"),),
    "int2float_ru": ((("int32",), "__nv_int2float_ru", "fp32"),),
    "uint2float_rn": ((("uint32",), "__nv_uint2float_rn", "fp32"),),
    "uint2float_rz": ((("uint32",), "__nv_uint2float_rz", "fp32"),),
    "uint2float_rd": ((("uint32",), "__nv_uint2float_rd", "fp32"),),
    "uint2float_ru": ((("uint32",), "__nv_uint2float_ru", "fp32"),),
    "hiloint2double": ((("int32", "int32"), "__nv_hiloint2double", "fp64"),),
    "double2loint": ((("fp64",), "__nv_double2loint", "int32"),),
    "double2hiint": ((("fp64",), "__nv_double2hiint", "int32"),),
    "float2ll_rn": ((("fp32",), "__nv_float2ll_rn", "int64"),),
    "float2ll_rz": ((("fp32",), "__nv_float2ll_rz", "int64"),),
    "float2ll_rd": ((("fp32",), "__nv_float2ll_rd", "int64"),),
    "float2ll_ru": ((("fp32",), "__nv_float2ll_ru", "int64"),),
    "float2ull_rn": ((("fp32",), "__nv_float2ull_rn", "int64"),),
    "float2ull_rz": ((("fp32",), "__nv_float2ull_rz", "int64"),),
    "float2ull_rd": ((("fp32",), "__nv_float2ull_rd", "int64"),),
    "float2ull_ru": ((("fp32",), "__nv_float2ull_ru", "int64"),),
    "double2ll_rn": ((("fp64",), "__nv_double2ll_rn", "int64"),),
    "double2ll_rz": ((("fp64",), "__nv_double2ll_rz", "int64"),),
    "double2ll_rd": ((("fp64",), "__nv_double2ll_rd", "int64"),),
    "double2ll_ru": ((("fp64",), "__nv_double2ll_ru", "int64"),),
    "double2ull_rn": ((("fp64",), "__nv_double2ull_rn", "int64"),),
    "double2ull_rz": ((("fp64",), "__nv_double2ull_rz", "int64"),),
    "double2ull_rd": ((("fp64",), "__nv_double2ull_rd", "int64"),),
    "double2ull_ru": ((("fp64",), "__nv_double2ull_ru", "int64"),),
    "ll2float_rn": ((("int64",), "__nv_ll2float_rn", "fp32"),),
    "ll2float_rz": ((("int64",), "__nv_ll2float_rz", "fp32"),),
    "ll2float_rd": ((("int64",), "__nv_ll2float_rd", "fp32"),),
    "ll2float_ru": ((("int64",), "__nv_ll2float_ru", "fp32"),),
    "ull2float_rn": ((("uint64",), "__nv_ull2float_rn", "fp32"),),
    "ull2float_rz": ((("uint64",), "__nv_ull2float_rz", "fp32"),),
    "ull2float_rd": ((("uint64",), "__nv_ull2float_rd", "fp32"),),
    "ull2float_ru": ((("uint64",), "__nv_ull2float_ru", "fp32"),),
    "ll2double_rn": ((("int64",), "__nv_ll2double_rn", "fp64"),),
    "ll2double_rz": ((("int64",), "__nv_ll2double_rz", "fp64"),),
    "ll2double_rd": ((("int64",), "__nv_ll2double_rd", "fp64"),),
    "ll2double_ru": ((("int64",), "__nv_ll2double_ru", "fp64"),),
    "ull2double_rn": ((("uint64",), "__nv_ull2double_rn", "fp64"),),
    "ull2double_rz": ((("uint64",), "__nv_ull2double_rz", "fp64"),),
    "ull2double_rd": ((("uint64",), "__nv_ull2double_rd", "fp64"),),
    "ull2double_ru": ((("uint64",), "__nv_ull2double_ru", "fp64"),),
    "int_as_float": ((("int32",), "__nv_int_as_float", "fp32"),),
    "float_as_int": ((("fp32",), "__nv_float_as_int", "int32"),),
    "uint_as_float": ((("uint32",), "__nv_uint_as_float", "fp32"),),
    "float_as_uint": ((("fp32",), "__nv_float_as_uint", "int32"),),
    "longlong_as_double": ((("int64",), "__nv_longlong_as_double", "fp64"),),
    "double_as_longlong": ((("fp64",), "__nv_double_as_longlong", "int64"),),
    "fast_sinf": ((("fp32",), "__nv_fast_sinf", "fp32"),),
    "fast_cosf": ((("fp32",), "__nv_fast_cosf", "fp32"),),
    "fast_log2f": ((("fp32",), "__nv_fast_log2f", "fp32"),),
    "fast_logf": ((("fp32",), "__nv_fast_logf", "fp32"),),
    "fast_expf": ((("fp32",), "__nv_fast_expf", "fp32"),),
    "fast_tanf": ((("fp32",), "__nv_fast_tanf", "fp32"),),
    "fast_exp10f": ((("fp32",), "__nv_fast_exp10f", "fp32"),),
    "fast_log10f": ((("fp32",), "__nv_fast_log10f", "fp32"),),
    "fast_powf": ((("fp32", "fp32"), "__nv_fast_powf", "fp32"),),
    "hadd": ((("int32", "int32"), "__nv_hadd", "int32"), (("uint32", "uint32"), "__nv_uhadd", "uint32")),
    "rhadd": ((("int32", "int32"), "__nv_rhadd", "int32"), (("uint32", "uint32"), "__nv_urhadd", "uint32")),
    "sub_rn": ((("fp32", "fp32"), "__nv_fsub_rn", "fp32"), (("fp64", "fp64"), "__nv_dsub_rn", "fp64")),
    "sub_rz": ((("fp32", "fp32"), "__nv_fsub_rz", "fp32"), (("fp64", "fp64"), "__nv_dsub_rz", "fp64")),
    "sub_rd": ((("fp32", "fp32"), "__nv_fsub_rd", "fp32"), (("fp64", "fp64"), "__nv_dsub_rd", "fp64")),
    "sub_ru": ((("fp32", "fp32"), "__nv_fsub_ru", "fp32"), (("fp64", "fp64"), "__nv_dsub_ru", "fp64")),
    "rsqrt_rn": ((("fp32",), "__nv_frsqrt_rn", "fp32"),),
    "ffs": ((("int32",), "__nv_ffs", "int32"), (("int64",), "__nv_ffsll", "int32")),
    "rint": _float(1),
    "llrint": ((("fp32",), "__nv_llrintf", "int64"), (("fp64",), "__nv_llrint", "int64")),
    "nearbyint": _float(1),
    "isnan": ((("fp32",), "__nv_isnanf", "int32"), (("fp64",), "__nv_isnand", "int32")),
    "signbit": ((("fp32",), "__nv_signbitf", "int32"), (("fp64",), "__nv_signbitd", "int32")),
    "copysign": _float(2),
    "finitef": ((("fp32",), "__nv_finitef", "int32"),),
    "isinf": ((("fp32",), "__nv_isinff", "int32"), (("fp64",), "__nv_isinfd", "int32")),
    "nextafter": _float(2),
    "sin": _float(1),
    "cos": _float(1),
    "sinpi": _float(1),
    "cospi": _float(1),
    "tan": _float(1),
    "log2": _float(1),
    "exp": _float(1),
    "exp10": _float(1),
    "cosh": _float(1),
    "sinh": _float(1),
    "tanh": _float(1),
    "atan2": _float(2),
    "atan": _float(1),
    "asin": _float(1),
    "acos": _float(1),
    "log": _float(1),
    "log10": _float(1),
    "log1p": _float(1),
    "acosh": _float(1),
    "asinh": _float(1),
    "atanh": _float(1),
    "expm1": _float(1),
    "hypot": _float(2),
    "rhypot": _float(2),
    "norm3d": _float(3),
    "rnorm3d": _float(3),
    "norm4d": _float(4),
    "rnorm4d": _float(4),
    "cbrt": _float(1),
    "rcbrt": _float(1),
    "j0": _float(1),
    "j1": _float(1),
    "y0": _float(1),
    "y1": _float(1),
    "yn": ((("int32", "fp32"), "__nv_ynf", "fp32"), (("int32", "fp64"), "__nv_yn", "fp64")),
    "jn": ((("int32", "fp32"), "__nv_jnf", "fp32"), (("int32", "fp64"), "__nv_jn", "fp64")),
    "cyl_bessel_i0": _float(1),
    "cyl_bessel_i1": _float(1),
    "erf": _float(1),
    "erfinv": _float(1),
    "erfc": _float(1),
    "erfcx": _float(1),
    "erfcinv": _float(1),
    "normcdfinv": _float(1),
    "normcdf": _float(1),
    "lgamma": _float(1),
    "ldexp": ((("fp32", "int32"), "__nv_ldexpf", "fp32"), (("fp64", "int32"), "__nv_ldexp", "fp64")),
    "scalbn": ((("fp32", "int32"), "__nv_scalbnf", "fp32"), (("fp64", "int32"), "__nv_scalbn", "fp64")),
    "fmod": _float(2),
    "remainder": _float(2),
    "fma": _float(3),
    "pow": ((("fp32", "int32"), "__nv_powif", "fp32"), (("fp64", "int32"), "__nv_powi", "fp64"), (("fp32", "fp32"), "__nv_powf", "fp32"), (("fp64", "fp64"), "__nv_pow", "fp64")),
    "tgamma": _float(1),
    "round": _float(1),
    "llround": ((("fp32",), "__nv_llroundf", "int64"), (("fp64",), "__nv_llround", "int64")),
    "fdim": _float(2),
    "ilogb": ((("fp32",), "__nv_ilogbf", "int32"), (("fp64",), "__nv_ilogb", "int32")),
    "logb": _float(1),
    "isfinited": ((("fp64",), "__nv_isfinited", "int32"),),
}
FUNCTIONS = {
    name: tuple((args, f"__nv_{name}{sym}" if sym in ("", "f") else sym, ret) for args, sym, ret in sigs)
    for name, sigs in FUNCTIONS.items()
}
_TYPES = {t.name: t for t in (_t.int32, _t.int64, _t.uint32, _t.uint64, _t.float32, _t.float64)}


def _signature(name: str, args: list[tensor]) -> Signature | None:
    key = tuple(str(a.dtype) for a in args)
    return next((s for s in FUNCTIONS[name] if s[0] == key), None)


def call(name: str, *values: Any) -> tensor:
    """`libdevice.<name>(*values)`: the extern_elementwise op of the matching signature."""
    sigs = FUNCTIONS[name]
    if len(values) != len(sigs[0][0]):
        raise TypeError(f"libdevice.{name} takes {len(sigs[0][0])} argument(s), got {len(values)}")
    args = [to_tensor(unwrap(v)) for v in values]
    for a in args:
        if not isinstance(a.dtype, _t.ScalarType):
            raise TypeError(f"libdevice.{name} takes numbers, got {a.type}")
    given = ", ".join(str(a.dtype) for a in args)
    sig = _signature(name, args)
    if sig is None:  # as Triton: promote every argument to one type and look again
        common = args[0].dtype
        for a in args[1:]:
            common = promote(common, a.dtype)  # type: ignore[arg-type]
        args = [cast(a, common) for a in args]
        sig = _signature(name, args)
    if sig is None:
        accepted = "; ".join("(" + ", ".join(s[0]) + ")" for s in sigs)
        raise TypeError(f"libdevice.{name} has no version for ({given}); it takes {accepted}: convert the arguments "
                        "with .to()")
    shape: tuple[int, ...] = ()
    for a in args:
        shape = broadcast_shapes(shape, a.shape)
    operands = [broadcast_to(a, shape).handle for a in args]
    return tensor(builder().value("extern_elementwise", operands, symbol=sig[1], result=_TYPES[sig[2]]))


def _function(name: str) -> Any:
    def fn(*args: Any) -> tensor:
        return call(name, *args)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"libdevice's {' / '.join(s[1] for s in FUNCTIONS[name])}, elementwise."
    return builtin(fn)


for _name in FUNCTIONS:
    globals()[_name] = _function(_name)


def __getattr__(name: str) -> Any:
    raise AttributeError(f"libdevice has no function '{name}'; see despina.language.extra.cuda.libdevice.FUNCTIONS")
