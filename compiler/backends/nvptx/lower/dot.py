"""`dot` on CUDA cores: each thread accumulates its result elements with one FMA per k.

Operands arrive in dot-operand layouts of the result's layout (layout assignment converts
them), so a thread holds whole rows of A and whole columns of B for its own results.
Dots that layout assignment put on tensor cores (an `Mma` result encoding) go to `mma.py`
(mma.sync) or `wgmma.py` (version 3).
"""

from __future__ import annotations

import llvmlite.ir as ir

from ....ir.core import Op
from ....ir.types import ScalarType, elem_of
from ...gpuir.mma import Mma
from .context import Lowering
from .elementwise import _suffix, cast_value
from .mma import mma_dot
from .registry import Regs, lowering
from .wgmma import wgmma_dot


@lowering("dot")
def dot(ctx: Lowering, op: Op, args: list[Regs]) -> list[Regs]:
    enc = ctx.gpu.encoding(op.result)
    if isinstance(enc, Mma):
        return wgmma_dot(ctx, op, args) if enc.version == 3 else mma_dot(ctx, op, args)
    a_ll, b_ll, c_ll = (ctx.layout(v) for v in op.operands)
    a_elem, acc_elem = elem_of(op.operands[0].type), elem_of(op.operands[2].type)
    assert isinstance(a_elem, ScalarType) and isinstance(acc_elem, ScalarType)
    if a_elem.is_floating() != acc_elem.is_floating():
        raise ctx.error(op, f"dot of {a_elem} operands into a {acc_elem} accumulator is not supported")
    a = [cast_value(ctx, x, a_elem, acc_elem) for x in args[0]]
    b = [cast_value(ctx, x, a_elem, acc_elem) for x in args[1]]
    k_size = a_ll.shape[-1]
    builder = ctx.b
    out: list[ir.Value] = []
    for r, acc in enumerate(args[2]):
        s = c_ll.reg_index(r)
        batch, m, n = s[:-2], s[-2], s[-1]
        for k in range(k_size):
            x = a[a_ll.reg_of_index[batch + (m, k)]]
            y = b[b_ll.reg_of_index[batch + (k, n)]]
            if acc_elem.is_floating():
                acc = ctx.call(f"llvm.fma.{_suffix(acc.type)}", acc.type, [x, y, acc])
            else:
                acc = builder.add(builder.mul(x, y), acc)
        out.append(acc)
    return [out]
