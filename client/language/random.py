"""Counter-based random numbers (Philox 4x32, or 4x64 for 64-bit offsets), bit-identical to Triton's `tl.rand*`."""

from __future__ import annotations

from typing import Any

from despina.compiler.ir import types as _t

from . import arith
from .core import builtin, tensor, unwrap
from .semantic import broadcast_shapes, broadcast_to, cast, to_tensor

# Key increments and round multipliers (key A, key B, round A, round B) of Philox 4x32 and 4x64.
PHILOX_CONSTANTS = {
    32: (0x9E3779B9, 0xBB67AE85, 0xD2511F53, 0xCD9E8D57),
    64: (0x9E3779B97F4A7C15, 0xBB67AE8584CAA73B, 0xD2E7470EE14C6C93, 0xCA5A826395121157),
}
N_ROUNDS_DEFAULT = 10


def _counter(x: Any, bits: int) -> tensor:
    """`x` as unsigned counters of `bits` bits: bit-cast at that width, else converted."""
    t = to_tensor(x, _t.uint32 if isinstance(unwrap(x), int) else None)
    uint = _t.uint64 if bits == 64 else _t.uint32
    if t.dtype.primitive_bitwidth != bits:
        t = cast(t, uint.with_signedness(t.dtype.is_int_signed()))
    return cast(t, uint, bitcast=True) if t.dtype != uint else t


@builtin
def philox_impl(c0: tensor, c1: tensor, c2: tensor, c3: tensor, k0: tensor, k1: tensor,
                n_rounds: int = N_ROUNDS_DEFAULT) -> tuple[tensor, ...]:
    """The Philox 4x32 (or 4x64) rounds on counters `c0..c3` with key `k0, k1`: four tiles of random unsigned
    integers."""
    uint = c0.dtype
    if not isinstance(uint, _t.ScalarType):
        raise TypeError(f"philox counters must be unsigned integers, got {c0.type}")
    key_a, key_b, round_a, round_b = PHILOX_CONSTANTS[uint.primitive_bitwidth]
    a = to_tensor(round_a, uint)
    b = to_tensor(round_b, uint)
    for _ in range(n_rounds):
        _c0, _c2 = c0, c2
        c0 = arith.xor_(arith.xor_(arith.umulhi(b, _c2), c1), k0)
        c2 = arith.xor_(arith.xor_(arith.umulhi(a, _c0), c3), k1)
        c1 = arith.mul(b, _c2)
        c3 = arith.mul(a, _c0)
        k0 = arith.add(k0, key_a)
        k1 = arith.add(k1, key_b)
    return c0, c1, c2, c3


@builtin
def philox(seed: Any, c0: Any, c1: Any, c2: Any, c3: Any, n_rounds: Any = N_ROUNDS_DEFAULT) -> tuple[tensor, ...]:
    """Philox random bits for `seed` and the counters `c0..c3` (32- or 64-bit): four tiles of unsigned integers,
    the same for the same seed and counters."""
    s = cast(to_tensor(seed, _t.int64 if isinstance(unwrap(seed), int) else None), _t.uint64)
    first = unwrap(c0)
    bits = 64 if isinstance(first, tensor) and first.dtype.primitive_bitwidth == 64 else 32
    if bits == 64:
        seed_hi, seed_lo = to_tensor(0, _t.uint64), s
    else:
        seed_hi = cast(arith.and_(arith.rshift(s, 32), 0xFFFFFFFF), _t.uint32)
        seed_lo = cast(arith.and_(s, 0xFFFFFFFF), _t.uint32)
    counters = [_counter(c, bits) for c in (c0, c1, c2, c3)]
    shape: tuple[int, ...] = ()
    for c in counters:
        shape = broadcast_shapes(shape, c.shape)
    x0, x1, x2, x3 = (broadcast_to(c, shape) for c in counters)
    k0, k1 = broadcast_to(seed_lo, shape), broadcast_to(seed_hi, shape)
    return philox_impl(x0, x1, x2, x3, k0, k1, int(unwrap(n_rounds)))


@builtin
def randint4x(seed: Any, offset: Any, n_rounds: Any = N_ROUNDS_DEFAULT) -> tuple[tensor, ...]:
    """Four blocks of random uint32 for `seed` and `offset` (uint64 for 64-bit offsets), deterministic."""
    off = to_tensor(offset)
    zero = arith.mul(off, 0)
    return philox(seed, off, zero, zero, zero, n_rounds)


@builtin
def randint(seed: Any, offset: Any, n_rounds: Any = N_ROUNDS_DEFAULT) -> tensor:
    """A block of random uint32 for `seed` and `offset`."""
    return randint4x(seed, offset, n_rounds)[0]


@builtin
def uint_to_uniform_float(x: tensor) -> tensor:
    """Random uint32 (or uint64) bits to fp32 uniform in [0, 1)."""
    wide = x.dtype.primitive_bitwidth == 64
    signed = cast(x, _t.int64 if wide else _t.int32, bitcast=True)
    signed = arith.where(arith.compare("lt", signed, 0), arith.sub(arith.neg(signed), 1), signed)
    # The largest scale with MAX_INT * scale < 1.0 after fp32 rounding, as in Triton.
    return arith.mul(signed, 1.0842020432385337e-19 if wide else 4.6566127342e-10)


@builtin
def rand(seed: Any, offset: Any, n_rounds: Any = N_ROUNDS_DEFAULT) -> tensor:
    """A block of fp32 uniform in [0, 1) for `seed` and `offset`."""
    return uint_to_uniform_float(randint(seed, offset, n_rounds))


@builtin
def pair_uniform_to_normal(u1: tensor, u2: tensor) -> tuple[tensor, tensor]:
    """Box-Muller: two tiles of uniform floats in [0, 1) to two tiles of standard normal floats."""
    u1 = arith.maximum(1.0e-7, u1)
    th = arith.mul(6.283185307179586, u2)
    r = arith.sqrt(arith.mul(-2.0, arith.log(u1)))
    return arith.mul(r, arith.cos(th)), arith.mul(r, arith.sin(th))


@builtin
def randn(seed: Any, offset: Any, n_rounds: Any = N_ROUNDS_DEFAULT) -> tensor:
    """A block of fp32 standard normal values for `seed` and `offset`."""
    i1, i2, _, _ = randint4x(seed, offset, n_rounds)
    return pair_uniform_to_normal(uint_to_uniform_float(i1), uint_to_uniform_float(i2))[0]


@builtin
def randn4x(seed: Any, offset: Any, n_rounds: Any = N_ROUNDS_DEFAULT) -> tuple[tensor, ...]:
    """Four tiles of standard normal fp32 numbers from one Philox call on `seed` and `offset`."""
    i1, i2, i3, i4 = randint4x(seed, offset, n_rounds)
    n1, n2 = pair_uniform_to_normal(uint_to_uniform_float(i1), uint_to_uniform_float(i2))
    n3, n4 = pair_uniform_to_normal(uint_to_uniform_float(i3), uint_to_uniform_float(i4))
    return n1, n2, n3, n4


@builtin
def rand4x(seed: Any, offset: Any, n_rounds: Any = N_ROUNDS_DEFAULT) -> tuple[tensor, ...]:
    """Four tiles of uniform fp32 numbers in [0, 1) from one Philox call on `seed` and `offset`: four times
    `tl.rand`'s numbers for one call's cost."""
    return tuple(uint_to_uniform_float(i) for i in randint4x(seed, offset, n_rounds))
