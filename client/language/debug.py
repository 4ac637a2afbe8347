"""Compile-time checks, device-side printing and assertions, compiler hints and loop ranges."""

from __future__ import annotations

from typing import Any

from despina.compiler.ir import types as _t

from .arith import logical_not, logical_or
from .core import builder, builtin, current, tensor, unwrap
from .semantic import cast, to_tensor


@builtin
def static_assert(cond: Any, msg: str = "") -> None:
    """Fail compilation when the constexpr `cond` is false."""
    value = unwrap(cond)
    if isinstance(value, tensor):
        raise TypeError("static_assert needs a constexpr condition; use tl.device_assert for run-time values")
    if not value:
        raise AssertionError(f"static_assert failed{': ' + str(unwrap(msg)) if unwrap(msg) else ''}")


@builtin
def static_print(*values: Any, sep: str = " ", end: str = "\n", file: Any = None, flush: bool = False) -> None:
    """Print at compile time (once per compilation)."""
    print(*(unwrap(v) for v in values), sep=sep, end=end, file=file, flush=flush)


@builtin
def device_print(prefix: Any, *args: Any, hex: bool = False) -> None:
    """Print `prefix` and the values of `args` from every program and element at run time."""
    text = unwrap(prefix)
    if not isinstance(text, str):
        raise TypeError(f"device_print's first argument must be a constexpr string, got {text!r}")
    operands = [to_tensor(a).handle for a in args]
    builder().create("device_print", operands, {"prefix": text, "hex": bool(unwrap(hex))})


@builtin
def device_assert(cond: Any, msg: str = "", mask: Any = None) -> None:
    """Fail the launch with `msg` where `cond` is false (where `mask` is true, if given). As in
    Triton, it checks only when the kernel is compiled with debug on (the interpreter's default)."""
    if not current().debug:
        return
    c = cast(to_tensor(cond), _t.int1)
    if unwrap(mask) is not None:
        c = logical_or(c, logical_not(mask))
    builder().create("device_assert", [c.handle], {"msg": str(unwrap(msg))})


@builtin
def debug_barrier() -> None:
    """Synchronize the threads of one program."""
    builder().create("barrier", [])


def _hint(name: str, input: Any, values: Any) -> tensor:
    x = to_tensor(input)
    vals = unwrap(values)
    vals = [unwrap(v) for v in vals] if isinstance(vals, (list, tuple)) else [vals]
    if len(vals) == 1 and len(x.shape) > 1:
        vals = vals * len(x.shape)
    if not x.dtype.is_int():
        raise TypeError(f"{name} applies to integer values (offsets), got {x.type}")
    return tensor(builder().value(name, [x.handle], values=[int(v) for v in vals]))


@builtin
def multiple_of(input: Any, values: Any) -> tensor:
    """Promise the compiler that every element of `input` is a multiple of `values`."""
    return _hint("multiple_of", input, values)


@builtin
def max_contiguous(input: Any, values: Any) -> tensor:
    """Promise the compiler that `input` holds runs of `values` consecutive integers."""
    return _hint("max_contiguous", input, values)


@builtin
def max_constancy(input: Any, values: Any) -> tensor:
    """Promise the compiler that `input` holds runs of `values` equal elements."""
    return _hint("max_constancy", input, values)


@builtin
def assume(cond: Any) -> None:
    """Promise the compiler that `cond` holds (for example `n % 16 == 0`)."""
    builder().create("assume", [cast(to_tensor(cond), _t.int1).handle])


class range:
    """A loop range compiled as a loop (`for i in tl.range(0, n, step, num_stages=3)`).

    `num_stages` overrides the kernel's for this loop's software pipeline (1: none);
    `loop_unroll_factor=U` (2 or more) has the GPU backend run the body U times an iteration, with a
    second loop for the iterations left over, as Triton's does. Neither changes what the loop computes.
    `flatten=True` has the GPU backend run this loop and the one inner loop of its body as one
    software-pipelined loop (passes/flatten.py), as Triton's does. `disallow_acc_multi_buffer` is Triton's:
    despina never multi-buffers a dot's accumulator, so either value compiles the same.
    `warp_specialize=True` has the GPU backend give the loop a producer warp that issues its TMA copies
    while the kernel's warps run its wgmma dots (sm_90a; gpuir/specialize.py says when it can, and the GPU
    IR's `warp_specialized` attribute why not), and defer the second of two chained dots (attention's P V) to
    the next iteration, beside the first (gpuir/defer.py). It does not change what the loop computes.
    """

    def __init__(self, arg1: Any, arg2: Any = None, step: Any = None, num_stages: Any = None,
                 loop_unroll_factor: Any = None, disallow_acc_multi_buffer: Any = False, flatten: Any = False,
                 warp_specialize: Any = False) -> None:
        start, end = (0, arg1) if arg2 is None else (arg1, arg2)
        self.start: Any = start
        self.end: Any = end
        self.step: Any = 1 if step is None else step
        self.num_stages = unwrap(num_stages)
        self.loop_unroll_factor = unwrap(loop_unroll_factor)
        if not isinstance(unwrap(disallow_acc_multi_buffer), bool):
            raise TypeError(f"tl.range: disallow_acc_multi_buffer must be a constexpr bool, got {disallow_acc_multi_buffer!r}")
        self.flatten = unwrap(flatten)
        if not isinstance(self.flatten, bool):
            raise TypeError(f"tl.range: flatten must be a constexpr bool, got {flatten!r}")
        self.warp_specialize = unwrap(warp_specialize)
        if not isinstance(self.warp_specialize, bool):
            raise TypeError(f"tl.range: warp_specialize must be a constexpr bool, got {warp_specialize!r}")


class static_range:
    """A loop range unrolled at compile time; its bounds must be constexprs."""

    def __init__(self, arg1: Any, arg2: Any = None, step: Any = None) -> None:
        start, end = (0, arg1) if arg2 is None else (arg1, arg2)
        self.start, self.end, self.step = unwrap(start), unwrap(end), unwrap(1 if step is None else step)
        for v in (self.start, self.end, self.step):
            if not isinstance(v, int) or isinstance(v, bool):
                got = f"a run-time {v.type} value" if isinstance(v, tensor) else repr(v)
                raise TypeError(f"static_range bounds must be constexpr integers, got {got}; use tl.range for bounds "
                                "known only at run time")
