"""`tl.math`: Triton's math namespace, the same functions as their `tl.*` names.

    tl.math.exp2(x), tl.math.rsqrt(x), tl.math.fma(a, b, c), tl.math.sqrt_rn(x)
"""

from .arith import (
    abs,
    ceil,
    cos,
    div_rn,
    erf,
    exp,
    exp2,
    fdiv,
    floor,
    fma,
    log,
    log2,
    rsqrt,
    sin,
    sqrt,
    sqrt_rn,
    umulhi,
)

__all__ = ["abs", "ceil", "cos", "div_rn", "erf", "exp", "exp2", "fdiv", "floor", "fma", "log", "log2", "rsqrt", "sin",
           "sqrt", "sqrt_rn", "umulhi"]
