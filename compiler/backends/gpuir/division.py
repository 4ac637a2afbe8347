"""fp32 `/` in kernels that multiply on tensor cores: `div.full.f32`, as Triton lowers every fp32 `/`.

IEEE division (`div.rn.f32`, and `div.rn.f64`) has a slow path that ptxas compiles as a subroutine
(FCHK, then a CALL per element), and a call costs tensor-core kernels dearly:
- on wgmma, a call anywhere in a function makes ptxas serialize every wgmma of the function ("C7509
  ... wgmma.mma_async instructions are serialized due to the presence of Extern calls"): the attention
  example's epilogue `acc / l_i[:, None]` serialized the products of its whole loop on sm_90a;
- on mma.sync, the same epilogue took 64 FCHK and 64 calls a thread, with their branches, in a kernel
  at 255 registers, which spilled around the calls: the attention example at d128 on sm_90.
So in a kernel with a tensor-core dot each fp32 `div` (the `/` operator) is marked `rounding = "full"`,
which the GPU-IR dump shows, and lowered to `div.full.f32` (at most 2 ulp from the rounded quotient;
the interpreter divides exactly, as Triton's does). Elsewhere `/` stays IEEE (a 16-warp layer norm ran
24% slower on the approximation: `lower/elementwise.py`); `tl.div_rn` and `tl.fdiv(..., ieee_rounding=True)`
stay IEEE everywhere.
"""

from __future__ import annotations

from ...ir.types import ScalarType, elem_of
from .assign import GpuFunction
from .mma import Mma


def has_tensor_core_dots(gpu: GpuFunction) -> bool:
    return any(op.name == "dot" and isinstance(gpu.encoding(op.result), Mma) for op in gpu.fn.walk())


def mark_tensor_core_divisions(gpu: GpuFunction) -> None:
    """Mark the fp32 `div` ops of a kernel with tensor-core dots `rounding = "full"` (in place)."""
    if not has_tensor_core_dots(gpu):
        return
    for op in gpu.fn.walk():
        elem = elem_of(op.result.type) if op.name == "div" else None
        if isinstance(elem, ScalarType) and elem.is_fp32():
            op.attrs["rounding"] = "full"
