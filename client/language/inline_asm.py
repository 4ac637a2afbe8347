"""`tl.inline_asm_elementwise`: PTX applied elementwise, `pack` elements per instance.

    y = tl.inline_asm_elementwise("shf.l.wrap.b32 $0, $1, $2, $3;", "=r,r,r,r", [x, x, s], dtype=tl.uint32,
                                  is_pure=True, pack=1)

As in Triton: the arguments are broadcast to one shape; `dtype` (or a tuple of them, for several
results) gives the results' types; each instance of the assembly takes `pack` elements of every
argument and writes `pack` of every result, elements narrower than 32 bits packed into 32-bit
registers; the constraints list the output registers (`=r`), then the input ones, result by result
and argument by argument. Which elements one instance gets is unspecified. The NumPy interpreter
cannot run PTX: a kernel using this runs on the GPU only.
"""

from __future__ import annotations

from typing import Any

from despina.compiler.ir import types as _t
from despina.compiler.ir.ops_calls import asm_registers

from .core import builder, builtin, tensor, unwrap
from .semantic import broadcast_shapes, broadcast_to, to_tensor


@builtin
def inline_asm_elementwise(asm: Any, constraints: Any, args: Any, dtype: Any, is_pure: Any, pack: Any) -> Any:
    """The results of the PTX `asm` over the elements of `args` (a tensor, or a tuple of them when
    `dtype` is a tuple)."""
    text, cons = unwrap(asm), unwrap(constraints)
    if not isinstance(text, str) or not isinstance(cons, str):
        raise TypeError("tl.inline_asm_elementwise needs the assembly and its constraints as constexpr strings")
    values = unwrap(args)
    tensors = [to_tensor(unwrap(a)) for a in (values if isinstance(values, (tuple, list)) else [values])]
    if not tensors:
        raise ValueError("tl.inline_asm_elementwise needs at least one argument")
    dtypes = unwrap(dtype)
    many = isinstance(dtypes, (tuple, list))
    results = [unwrap(d) for d in (dtypes if many else [dtypes])]
    for d in results:
        if not isinstance(d, _t.ScalarType) or d == _t.int1:
            raise TypeError(f"tl.inline_asm_elementwise's dtype must be numeric types other than int1, got {d!r}")
    n = unwrap(pack)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1 or n & (n - 1):
        raise ValueError(f"tl.inline_asm_elementwise's pack must be a power of two, got {n!r}")
    elems: list[_t.ScalarType] = []
    for t in tensors:
        if not isinstance(t.dtype, _t.ScalarType) or t.dtype == _t.int1:
            raise TypeError(f"tl.inline_asm_elementwise takes numeric arguments other than int1 (use int8), got {t.type}")
        elems.append(t.dtype)
    entries = [c.strip() for c in cons.split(",") if c.strip() and not c.strip().startswith("~")]
    outputs = sum(asm_registers(d, n)[0] for d in results)
    inputs = sum(asm_registers(e, n)[0] for e in elems)
    given_out = sum(1 for c in entries if c.startswith("="))
    if (given_out, len(entries) - given_out) != (outputs, inputs):
        raise ValueError(f"tl.inline_asm_elementwise: constraints {cons!r} list {given_out} output and "
                         f"{len(entries) - given_out} input registers, but pack={n} needs {outputs} and {inputs} "
                         "(elements narrower than 32 bits share 32-bit registers)")
    shape: tuple[int, ...] = ()
    for t in tensors:
        shape = broadcast_shapes(shape, t.shape)
    operands = [broadcast_to(t, shape).handle for t in tensors]
    attrs = {"asm": text, "constraints": cons, "pure": bool(unwrap(is_pure)), "pack": n, "results": results}
    out = [tensor(r) for r in builder().create("inline_asm", operands, attrs).results]
    return tuple(out) if many else out[0]
