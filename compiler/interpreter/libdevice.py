"""libdevice functions (`extern_elementwise` ops, `tl.extra.cuda.libdevice`) computed with NumPy.

Each libdevice symbol maps to a NumPy function of the operands (computed in their own dtypes) whose
result is then rounded to the result type. fp32 functions are computed in float64 and rounded
once; the directed-rounding fp32 variants (`_rz`, `_rd`, `_ru`) round that float64 value in the
named direction, and fp64 ones that would need wider arithmetic are reported as unsupported here,
as is every symbol without a NumPy counterpart (the Bessel functions): those run on the GPU only.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable

import numpy as np

from ..ir.core import Op
from ..ir.types import ScalarType
from .core import State, rule
from .values import Val, finish

Fn = Callable[..., np.ndarray]
SYMBOLS: dict[str, Fn] = {}
_NORMAL = statistics.NormalDist()


def _f64(*xs: np.ndarray) -> list[np.ndarray]:
    return [np.asarray(x, dtype=np.float64) for x in xs]


def _vectorize(fn: Callable[..., float]) -> Fn:
    ufunc = np.frompyfunc(fn, 1, 1)
    return lambda x: np.asarray(ufunc(np.asarray(x, dtype=np.float64)), dtype=np.float64)


def _gamma(x: float) -> float:
    try:
        return math.gamma(x)
    except OverflowError:
        return math.inf
    except ValueError:  # a pole: 0 gives inf, a negative integer NaN (as CUDA's tgamma)
        return math.copysign(math.inf, x) if x == 0 else math.nan


def _lgamma(x: float) -> float:
    try:
        return math.lgamma(x)
    except (ValueError, OverflowError):
        return math.inf


def _inv_cdf(p: float) -> float:
    if p <= 0.0 or p >= 1.0 or p != p:
        return -math.inf if p == 0.0 else math.inf if p == 1.0 else math.nan
    return _NORMAL.inv_cdf(p)


def _round_half_away(x: np.ndarray) -> np.ndarray:
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


def _directed(x: np.ndarray, mode: str) -> np.ndarray:
    """float64 values rounded to float32 toward zero (rz), down (rd) or up (ru)."""
    r = x.astype(np.float32)
    wide = r.astype(np.float64)
    if mode == "rd":
        return np.where(wide > x, np.nextafter(r, np.float32(-np.inf)), r)
    if mode == "ru":
        return np.where(wide < x, np.nextafter(r, np.float32(np.inf)), r)
    return np.where(np.abs(wide) > np.abs(x), np.nextafter(r, np.float32(0)), r)


def _both(name: str, fn: Fn) -> None:
    """`__nv_<name>f` (fp32, computed in float64) and `__nv_<name>` (fp64)."""
    SYMBOLS[f"__nv_{name}f"] = lambda *xs: fn(*_f64(*xs))
    SYMBOLS[f"__nv_{name}"] = lambda *xs: fn(*_f64(*xs))


_UNARY: dict[str, Fn] = {
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh,
    "atanh": np.arctanh, "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(10.0, x), "expm1": np.expm1,
    "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "cbrt": np.cbrt, "rcbrt": lambda x: 1.0 / np.cbrt(x), "floor": np.floor,
    "ceil": np.ceil, "trunc": np.trunc, "round": _round_half_away, "rint": np.rint, "nearbyint": np.rint,
    "sinpi": lambda x: np.sin(np.pi * x), "cospi": lambda x: np.cos(np.pi * x),
    "erf": _vectorize(math.erf), "erfc": _vectorize(math.erfc),
    "erfcx": lambda x: np.exp(x * x) * _vectorize(math.erfc)(x),
    "erfinv": lambda x: _vectorize(_inv_cdf)((x + 1.0) / 2.0) / math.sqrt(2.0),
    "erfcinv": lambda x: -_vectorize(_inv_cdf)(x / 2.0) / math.sqrt(2.0),
    "normcdf": lambda x: 0.5 * _vectorize(math.erfc)(-x / math.sqrt(2.0)), "normcdfinv": _vectorize(_inv_cdf),
    "lgamma": _vectorize(_lgamma), "tgamma": _vectorize(_gamma),
    "logb": lambda x: np.where(x == 0, -np.inf, np.floor(np.log2(np.abs(x)))),
}
_BINARY: dict[str, Fn] = {
    "atan2": np.arctan2, "hypot": np.hypot, "rhypot": lambda x, y: 1.0 / np.hypot(x, y), "fmod": np.fmod,
    "remainder": lambda x, y: x - np.rint(x / y) * y, "copysign": np.copysign, "fdim": lambda x, y: np.maximum(x - y, 0.0),
    "pow": np.power,
}
for _name, _fn in {**_UNARY, **_BINARY}.items():
    _both(_name, _fn)
_both("fabs", np.abs)
_both("fma", lambda a, b, c: a * b + c)
_both("norm3d", lambda a, b, c: np.sqrt(a * a + b * b + c * c))
_both("rnorm3d", lambda a, b, c: 1.0 / np.sqrt(a * a + b * b + c * c))
_both("norm4d", lambda a, b, c, d: np.sqrt(a * a + b * b + c * c + d * d))
_both("rnorm4d", lambda a, b, c, d: 1.0 / np.sqrt(a * a + b * b + c * c + d * d))
_both("ldexp", lambda x, e: np.ldexp(x, e.astype(np.int32)))
_both("scalbn", lambda x, e: np.ldexp(x, e.astype(np.int32)))
_both("powi", lambda x, e: np.power(x, e))
SYMBOLS["__nv_nextafterf"] = lambda x, y: np.nextafter(x.astype(np.float32), y.astype(np.float32))
SYMBOLS["__nv_nextafter"] = np.nextafter
SYMBOLS["__nv_saturatef"] = lambda x: np.nan_to_num(np.clip(x, 0.0, 1.0), nan=0.0)
SYMBOLS["__nv_rcp64h"] = lambda x: 1.0 / x
for _f in ("sinf", "cosf", "log2f", "logf", "expf", "tanf", "exp10f", "log10f"):
    SYMBOLS[f"__nv_fast_{_f}"] = SYMBOLS[f"__nv_{_f}"]
SYMBOLS["__nv_fast_powf"] = SYMBOLS["__nv_powf"]
SYMBOLS["__nv_fast_fdividef"] = lambda x, y: _f64(x)[0] / _f64(y)[0]

# Correctly rounded arithmetic: exact in float64 for fp32 operands (then rounded once), NumPy's own for fp64.
_ARITH: dict[str, Fn] = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}
for _op, _fn in _ARITH.items():
    SYMBOLS[f"__nv_f{_op}_rn"] = lambda x, y, fn=_fn: fn(*_f64(x, y))
    SYMBOLS[f"__nv_d{_op}_rn"] = _fn
    for _mode in ("rz", "rd", "ru"):
        SYMBOLS[f"__nv_f{_op}_{_mode}"] = lambda x, y, fn=_fn, m=_mode: _directed(fn(*_f64(x, y)), m)
SYMBOLS["__nv_fmaf_rn"] = lambda a, b, c: _f64(a)[0] * _f64(b)[0] + _f64(c)[0]
SYMBOLS["__nv_fma_rn"] = lambda a, b, c: a * b + c
SYMBOLS["__nv_frcp_rn"] = lambda x: 1.0 / _f64(x)[0]
SYMBOLS["__nv_drcp_rn"] = lambda x: 1.0 / x
SYMBOLS["__nv_fsqrt_rn"] = lambda x: np.sqrt(_f64(x)[0])
SYMBOLS["__nv_dsqrt_rn"] = np.sqrt
SYMBOLS["__nv_frsqrt_rn"] = lambda x: 1.0 / np.sqrt(_f64(x)[0])
for _mode in ("rz", "rd", "ru"):
    SYMBOLS[f"__nv_fmaf_{_mode}"] = lambda a, b, c, m=_mode: _directed(_f64(a)[0] * _f64(b)[0] + _f64(c)[0], m)
    SYMBOLS[f"__nv_frcp_{_mode}"] = lambda x, m=_mode: _directed(1.0 / _f64(x)[0], m)
    SYMBOLS[f"__nv_fsqrt_{_mode}"] = lambda x, m=_mode: _directed(np.sqrt(_f64(x)[0]), m)


# ---- integers -----------------------------------------------------------------------------------


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(f"uint{x.dtype.itemsize * 8}")


def _clz(x: np.ndarray) -> np.ndarray:
    u, width = _bits(x).astype(np.uint64), x.dtype.itemsize * 8
    n = np.full(u.shape, width, dtype=np.int32)
    for k in range(width):
        n = np.where((u >> np.uint64(k)) & np.uint64(1) != 0, np.int32(width - 1 - k), n)
    return n


def _popc(x: np.ndarray) -> np.ndarray:
    u = _bits(x).astype(np.uint64)
    return sum(((u >> np.uint64(k)) & np.uint64(1)).astype(np.int32) for k in range(x.dtype.itemsize * 8))


def _brev(x: np.ndarray) -> np.ndarray:
    u, width = _bits(x).astype(np.uint64), x.dtype.itemsize * 8
    out = np.zeros(u.shape, dtype=np.uint64)
    for k in range(width):
        out |= ((u >> np.uint64(k)) & np.uint64(1)) << np.uint64(width - 1 - k)
    return out.astype(_bits(x).dtype).view(x.dtype)


def _ffs(x: np.ndarray) -> np.ndarray:
    u, width = _bits(x).astype(np.uint64), x.dtype.itemsize * 8
    n = np.zeros(u.shape, dtype=np.int32)
    for k in reversed(range(width)):
        n = np.where((u >> np.uint64(k)) & np.uint64(1) != 0, np.int32(k + 1), n)
    return n


def _hi(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    width = x.dtype.itemsize * 8
    big = np.frompyfunc(lambda a, b: (int(a) * int(b)) >> width, 2, 1)(x, y)
    mask = (1 << width) - 1
    return np.asarray(np.frompyfunc(lambda v: v & mask, 1, 1)(big), dtype=np.uint64).astype(_bits(x).dtype).view(x.dtype)


def _byte_perm(x: np.ndarray, y: np.ndarray, s: np.ndarray) -> np.ndarray:
    pool = (_bits(y).astype(np.uint64) << np.uint64(32)) | _bits(x).astype(np.uint64)
    sel = _bits(s).astype(np.uint64)
    out = np.zeros(np.broadcast(x, y, s).shape, dtype=np.uint64)
    for k in range(4):
        byte = (sel >> np.uint64(4 * k)) & np.uint64(7)
        out |= ((pool >> (byte * np.uint64(8))) & np.uint64(0xFF)) << np.uint64(8 * k)
    return out.astype(np.uint32).view(np.int32)


def _mul24(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "u":
        return ((x & np.uint32(0xFFFFFF)).astype(np.uint64) * (y & np.uint32(0xFFFFFF)).astype(np.uint64)).astype(np.uint32)
    sx = ((x.astype(np.int64) << 40) >> 40)
    sy = ((y.astype(np.int64) << 40) >> 40)
    return (sx * sy).astype(np.int32)


_INTEGER: dict[str, Fn] = {
    "clz": _clz, "clzll": _clz, "popc": _popc, "popcll": _popc, "brev": _brev, "brevll": _brev, "ffs": _ffs,
    "ffsll": _ffs, "mulhi": _hi, "umulhi": _hi, "mul64hi": _hi, "umul64hi": _hi, "byte_perm": _byte_perm,
    "mul24": _mul24, "umul24": _mul24, "abs": np.abs, "llabs": np.abs,
    "hadd": lambda x, y: ((x.astype(np.int64) + y.astype(np.int64)) >> 1),
    "uhadd": lambda x, y: ((x.astype(np.uint64) + y.astype(np.uint64)) >> np.uint64(1)),
    "rhadd": lambda x, y: ((x.astype(np.int64) + y.astype(np.int64) + 1) >> 1),
    "urhadd": lambda x, y: ((x.astype(np.uint64) + y.astype(np.uint64) + np.uint64(1)) >> np.uint64(1)),
    "sad": lambda x, y, z: (np.abs(x.astype(np.int64) - y.astype(np.int64)) + z.astype(np.int64)),
    "usad": lambda x, y, z: (np.abs(x.astype(np.int64) - y.astype(np.int64)) + z.astype(np.int64)),
}
for _sym, _fn in _INTEGER.items():
    SYMBOLS[f"__nv_{_sym}"] = _fn


# ---- conversions and classification -------------------------------------------------------------

_TO_INT = {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil}


def _to_int(dtype: str, mode: str) -> Fn:
    info = np.iinfo(dtype)

    def convert(x: np.ndarray) -> np.ndarray:
        r = _TO_INT[mode](np.asarray(x, dtype=np.float64))
        r = np.where(np.isnan(r), 0, np.clip(r, float(info.min), float(info.max)))
        return r.astype(dtype)

    return convert


for _mode in _TO_INT:
    for _src in ("float", "double"):
        SYMBOLS[f"__nv_{_src}2int_{_mode}"] = _to_int("int32", _mode)
        SYMBOLS[f"__nv_{_src}2uint_{_mode}"] = _to_int("uint32", _mode)
        SYMBOLS[f"__nv_{_src}2ll_{_mode}"] = _to_int("int64", _mode)
        SYMBOLS[f"__nv_{_src}2ull_{_mode}"] = _to_int("uint64", _mode)
    for _src in ("int", "uint", "ll", "ull"):
        SYMBOLS[f"__nv_{_src}2float_{_mode}"] = (
            (lambda x: x.astype(np.float32)) if _mode == "rn" else (lambda x, m=_mode: _directed(x.astype(np.float64), m))
        )
    for _src in ("ll", "ull"):
        if _mode == "rn":
            SYMBOLS[f"__nv_{_src}2double_{_mode}"] = lambda x: x.astype(np.float64)
    SYMBOLS[f"__nv_double2float_{_mode}"] = (
        (lambda x: x.astype(np.float32)) if _mode == "rn" else (lambda x, m=_mode: _directed(x, m))
    )
SYMBOLS["__nv_int2double_rn"] = SYMBOLS["__nv_uint2double_rn"] = lambda x: x.astype(np.float64)
SYMBOLS["__nv_llrintf"] = SYMBOLS["__nv_llrint"] = _to_int("int64", "rn")
SYMBOLS["__nv_llroundf"] = SYMBOLS["__nv_llround"] = lambda x: _round_half_away(_f64(x)[0]).astype(np.int64)
SYMBOLS["__nv_int_as_float"] = SYMBOLS["__nv_uint_as_float"] = lambda x: x.view(np.float32)
SYMBOLS["__nv_float_as_int"] = SYMBOLS["__nv_float_as_uint"] = lambda x: x.view(np.int32)
SYMBOLS["__nv_longlong_as_double"] = lambda x: x.view(np.float64)
SYMBOLS["__nv_double_as_longlong"] = lambda x: x.view(np.int64)
SYMBOLS["__nv_hiloint2double"] = lambda hi, lo: (
    (hi.astype(np.int64) << 32) | (lo.view(np.uint32).astype(np.int64))).view(np.float64)
SYMBOLS["__nv_double2loint"] = lambda x: (x.view(np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
SYMBOLS["__nv_double2hiint"] = lambda x: (x.view(np.int64) >> 32).astype(np.int32)
for _suffix in ("f", "d"):
    SYMBOLS[f"__nv_isnan{_suffix}"] = lambda x: np.isnan(x).astype(np.int32)
    SYMBOLS[f"__nv_isinf{_suffix}"] = lambda x: np.isinf(x).astype(np.int32)
    SYMBOLS[f"__nv_signbit{_suffix}"] = lambda x: np.signbit(x).astype(np.int32)
SYMBOLS["__nv_finitef"] = SYMBOLS["__nv_isfinited"] = lambda x: np.isfinite(x).astype(np.int32)
SYMBOLS["__nv_ilogbf"] = SYMBOLS["__nv_ilogb"] = lambda x: np.where(
    x == 0, np.int32(-(2**31)), np.where(np.isfinite(x), np.floor(np.log2(np.abs(np.where(x == 0, 1, x)))), 2**31 - 1)
).astype(np.int32)


@rule("extern_elementwise")
def extern_elementwise(st: State, op: Op) -> list[Val]:
    symbol = op.attrs["symbol"]
    fn = SYMBOLS.get(symbol)
    if fn is None:
        raise st.error(op, f"libdevice's {symbol} has no NumPy counterpart in the interpreter; run this kernel on "
                           "the GPU (unset DESPINA_INTERPRET)")
    result = op.attrs["result"]
    assert isinstance(result, ScalarType)
    with np.errstate(all="ignore"):
        out = fn(*(st.get(v) for v in op.operands))
    return [finish(np.asarray(out), result)]
