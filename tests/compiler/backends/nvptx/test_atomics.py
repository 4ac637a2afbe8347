"""Float atomic max/min: the PTX they lower to, and what that PTX does, emulated on the bits
(PTX's integer `atom.max`/`atom.min`), against the interpreter, on zeros, infinities, NaNs and
denormals of both signs.

16-bit float atomics without an instruction (bf16 add below sm_90, fp16/bf16 xchg everywhere):
the compare-and-swap loop they lower to, per target and memory order, and that loop run by a small
PTX emulator, threads serialised (against the interpreter, bit for bit) and interleaved at random
(so that compare-and-swaps fail and retry). And every atomic form links on every target."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

import llvmlite.ir as ir  # noqa: E402

from despina.compiler.backends.gpuir import LinearLayout  # noqa: E402
from despina.compiler.backends.nvptx import compile_module  # noqa: E402
from despina.compiler.backends.nvptx.lower import atomics as atomic_rules  # noqa: E402
from despina.compiler.backends.nvptx.lower.types import bf16 as bf16_type  # noqa: E402
from despina.compiler.backends.nvptx.target import TARGETS, get_target  # noqa: E402
from despina.compiler.interpreter import run_kernel  # noqa: E402
from despina.compiler.ir.core import Module  # noqa: E402
from despina.compiler.ir.types import PointerType, ScalarType, float32, float64  # noqa: E402

from ..filecheck import filecheck  # noqa: E402
from ..kernel_builder import KernelBuilder  # noqa: E402

N, K = 128, 4
FLOATS = {"fp32": (float32, np.float32, np.int32, np.uint32), "fp64": (float64, np.float64, np.int64, np.uint64)}


def atomic_module(kind: str, dtype: str, sem: str = "acq_rel", scope: str = "gpu", n: int = N) -> Module:
    """old = atomic_<kind>(p + i % K, v[i], mask=i % 5 != 3); o[i] = old where the mask holds."""
    elem = ScalarType(dtype)
    k = KernelBuilder(f"atomic_{kind}_{dtype}", [("p", PointerType(elem)), ("v", PointerType(elem)), ("o", PointerType(elem))])
    offs = k.arange(0, n)
    mask = k.cmp("ne", k.bin("rem", offs, 5), 3)
    v = k.load(k.ptrs(k["v"], offs))
    old = k.op("atomic_rmw", k.ptrs(k["p"], k.bin("rem", offs, K)), v, mask, kind=kind, sem=sem, scope=scope)
    k.store(k.ptrs(k["o"], offs), old, mask)
    return k.module()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_float_max_and_min_are_integer_atomics_split_on_the_sign(arch: str) -> None:
    fmax = compile_module(atomic_module("max", "fp32", "release", "cta"), target=arch, isolate=False)
    filecheck(
        str(fmax.asm["llir"]),
        """
        CHECK: icmp slt i32
        CHECK: atom.release.cta.global.max.s32
        CHECK: atom.release.cta.global.min.u32
        CHECK: select i1
        """,
    )
    filecheck(str(fmax.asm["ptx"]), "CHECK-COUNT-1: atom.release.cta.global.max.s32\nCHECK-COUNT-1: atom.release.cta.global.min.u32")
    fmin = compile_module(atomic_module("min", "fp64", "relaxed", "sys"), target=arch, isolate=False)
    filecheck(
        str(fmin.asm["ptx"]),
        "CHECK: atom.relaxed.sys.global.min.s64\nCHECK: atom.relaxed.sys.global.max.u64\nCHECK-NOT: .f64",
    )


def test_16_bit_float_max_is_a_clear_error() -> None:
    k = KernelBuilder("fmax16", [("p", PointerType(ScalarType("fp16")))])
    k.op("atomic_rmw", k["p"], k.load(k["p"]), kind="max", sem="acq_rel", scope="gpu")
    with pytest.raises(Exception, match="atomic 'max' on fp16 is not supported.*max and min on fp32 and fp64"):
        compile_module(k.module(), isolate=False)


# ---- the lowering rule, run on emulated threads ---------------------------------------------

_IR_TYPES = {np.dtype(np.float32): ir.FloatType(), np.dtype(np.float64): ir.DoubleType(), np.dtype(np.int32): ir.IntType(32),
             np.dtype(np.int64): ir.IntType(64), np.dtype(np.bool_): ir.IntType(1)}
_NP_TYPES = {str(t): d for d, t in _IR_TYPES.items()}


class Arr(np.ndarray):
    """One value of every thread, with the LLVM type the rule checks."""

    @property
    def type(self) -> ir.Type:
        return _IR_TYPES[self.dtype]

    def __bool__(self) -> bool:  # an IR value, as `pred or const(...)` sees it
        return True


def arr(x: Any, dtype: Any = None) -> Arr:
    return np.asarray(x, dtype).view(Arr)


def _v(x: Any) -> Any:
    return x.constant if isinstance(x, ir.Constant) else x


class Builder:
    def bitcast(self, x: Arr, ty: ir.Type) -> Arr:
        return arr(x.view(_NP_TYPES[str(ty)]))

    def icmp_signed(self, pred: str, x: Arr, y: Any) -> Arr:
        assert pred == "<"
        return arr(np.asarray(x) < _v(y))

    def and_(self, x: Any, y: Any) -> Arr:
        return arr(np.asarray(_v(x), bool) & np.asarray(_v(y), bool))

    def not_(self, x: Arr) -> Arr:
        return arr(~np.asarray(x, bool))

    def select(self, flag: Arr, yes: Arr, no: Arr) -> Arr:
        return arr(np.where(flag, yes, no), yes.dtype)


_ATOM = re.compile(r"mov\.b(\d+) \$0, 0; @\$1 atom\.(\w+)\.(\w+)\.global\.(\w+)\.([su])(\d+) \$0, \[ \$2 \+ 0 \], \$3;")


class Threads:
    """What the atomic rule needs of `Lowering`, for the threads whose values it is given, which
    run its atomics one after the other in thread order."""

    def __init__(self, memory: np.ndarray) -> None:
        self.memory = memory  # the bits, as unsigned integers
        self.b = Builder()
        self.atoms: list[str] = []

    def layout(self, v: Any) -> LinearLayout:
        return LinearLayout.distributed((N,), (), tuple((1 << i,) for i in range(5)), ((32,), (64,)))

    def owner(self, ll: LinearLayout) -> None:
        return None

    def and_preds(self, a: Any, b: Any) -> Any:
        return a if b is None else b if a is None else self.b.and_(a, b)

    def asm(self, ty: ir.Type, text: str, constraints: str, operands: list[Any], side_effect: bool = False) -> Arr:
        m = _ATOM.fullmatch(text)
        assert m is not None, text
        self.atoms.append(text)
        bits, op, signed = int(m.group(1)), m.group(4), m.group(5) == "s"
        assert int(m.group(6)) == bits and op in ("max", "min")
        n = np.asarray(operands[2]).size
        pred, ptr, word = (np.broadcast_to(np.asarray(_v(o)), (n,)) for o in operands)
        ints, uints = np.dtype(f"i{bits // 8}"), np.dtype(f"u{bits // 8}")
        out = np.zeros(n, ints)  # `mov.b $0, 0` where the predicate is off
        for t in range(n):
            if pred[t]:
                old = self.memory[ptr[t]]
                out[t] = old.view(ints)
                a, b = (old.view(ints), word[t]) if signed else (old, word[t].view(uints))
                self.memory[ptr[t]] = np.asarray(max(a, b) if op == "max" else min(a, b)).astype(ints if signed else uints).view(uints)
        return arr(out)


SPECIALS = [0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, 1e-40, -1e-40, 3.5, -3.5, 1e30, -1e30]


def _nans(dtype: str) -> list[Any]:
    _, f, _, u = FLOATS[dtype]
    top = np.dtype(u).itemsize * 8
    quiet = np.array([0x7FC00000, 0x7FC00001, 0xFFC00000, 0xFFFFFFFF], np.uint32) if top == 32 else \
        np.array([0x7FF8000000000000, 0x7FF8000000000005, 0xFFF8000000000000, 0xFFFFFFFFFFFFFFFF], np.uint64)
    return list(quiet.view(f))


@pytest.mark.parametrize("dtype", sorted(FLOATS))
@pytest.mark.parametrize("kind", ["max", "min"])
def test_float_max_and_min_agree_with_the_interpreter_bit_for_bit(kind: str, dtype: str) -> None:
    _, f, _, u = FLOATS[dtype]
    rng = np.random.default_rng(7)
    pool = np.array(SPECIALS + _nans(dtype), f)
    init = pool[rng.integers(0, len(pool), K)]
    vals = pool[rng.integers(0, len(pool), N)]
    mask = np.arange(N) % 5 != 3
    module = atomic_module(kind, dtype)

    mem_i, out_i = init.copy(), np.zeros(N, f)
    run_kernel(module, (1, 1, 1), [mem_i, vals.copy(), out_i])

    # The rule's code once per thread, thread after thread (one element each): the interpreter's
    # serial order, so that the old values can be compared too, not only the final memory.
    (op,) = [o for o in module.kernel.walk() if o.name == "atomic_rmw"]
    gpu = Threads(init.view(u).copy())
    old = np.zeros(N, f)
    for t in range(N):
        one = [[arr([t % K], np.int64)], [arr(vals[t : t + 1])], [arr(mask[t : t + 1])]]
        (got,) = atomic_rules.atomic_rmw(gpu, op, one)  # type: ignore[arg-type]
        assert np.asarray(got[0]).dtype == f
        old[t] = np.asarray(got[0])[0]
    assert len(gpu.atoms) == 2 * N
    np.testing.assert_array_equal(gpu.memory, mem_i.view(u), err_msg="memory after the atomics")
    np.testing.assert_array_equal(old.view(u)[mask], out_i.view(u)[mask], err_msg="old values")


@pytest.mark.parametrize("dtype", sorted(FLOATS))
def test_signed_zeros_and_nans_are_ordered_by_sign_and_magnitude(dtype: str) -> None:
    """Whatever the order of the updates: +0.0 beats -0.0 in a max, a NaN with the sign bit clear
    wins a max and loses a min, one with it set loses a max and wins a min."""
    _, f, _, u = FLOATS[dtype]
    pos_nan, neg_nan = np.array(_nans(dtype)[0], f), np.array(_nans(dtype)[2], f)
    cases = [("max", [-0.0, 0.0], 0.0), ("max", [0.0, -0.0], 0.0), ("min", [0.0, -0.0], -0.0), ("min", [-0.0, 0.0], -0.0),
             ("max", [1.0, pos_nan, np.inf], pos_nan), ("max", [1.0, neg_nan, -np.inf], 1.0),
             ("min", [1.0, pos_nan, -np.inf], -np.inf), ("min", [1.0, neg_nan, np.inf], neg_nan)]
    for kind, updates, want in cases:
        mem = np.array(updates[:1], f)
        run_kernel(_seq_module(kind, dtype, len(updates) - 1), (1, 1, 1), [mem, np.array(updates[1:], f)])
        assert mem.view(u)[0] == np.array(want, f).view(u), (kind, updates, mem)


def _seq_module(kind: str, dtype: str, n: int) -> Module:
    """atomic_<kind>(p, v[i]) for i < n, one program, element order."""
    elem = FLOATS[dtype][0]
    k = KernelBuilder("seq", [("p", PointerType(elem)), ("v", PointerType(elem))])
    block = 1 << max(0, (n - 1).bit_length())
    offs = k.arange(0, block)
    mask = k.cmp("lt", offs, n)
    v = k.load(k.ptrs(k["v"], offs), mask, 0.0)
    k.op("atomic_rmw", k.ptrs(k["p"], k.bin("mul", offs, 0)), v, mask, kind=kind, sem="acq_rel", scope="gpu")
    return k.module()



# ---- 16-bit float atomics without an instruction: compare-and-swap loops -------------------

BELOW_SM_90 = ["sm_80", "sm_86", "sm_89"]
FROM_SM_90 = ["sm_90", "sm_90a"]
SEMS = ["relaxed", "acquire", "release", "acq_rel"]
_LOOP = """
    CHECK: and.b64 cas_addr, %rd
    CHECK: , -4; cvt.u32.u64 cas_shift, %rd
    CHECK: ld.relaxed.{scope}.global.b32 cas_word, [ cas_addr + 0 ]; cas_retry:
    CHECK: bfe.u32 cas_bits, cas_word, cas_shift, 16; cvt.u16.u32 cas_old, cas_bits;
    CHECK: {update}
    CHECK: bfi.b32 cas_bits, cas_bits, cas_word, cas_shift, 16;
    CHECK: atom.relaxed.{scope}.global.cas.b32 cas_seen, [ cas_addr + 0 ], cas_word, cas_bits;
    CHECK: setp.ne.b32 cas_again, cas_seen, cas_word; mov.b32 cas_word, cas_seen; @cas_again bra cas_retry;
    CHECK: mov.b16 %rs
    CHECK: , cas_old; cas_done: }}
"""


def _ptx(kind: str, dtype: str, arch: str, sem: str = "acq_rel", scope: str = "gpu") -> str:
    """The PTX of `atomic_module` on one warp, one element per thread: one atomic in the text."""
    kernel = compile_module(atomic_module(kind, dtype, sem, scope, n=32), target=arch, num_warps=1, isolate=False)
    return str(kernel.asm["ptx"])


def _check_loop(ptx: str, update: str, sem: str, scope: str) -> None:
    filecheck(ptx, "CHECK-COUNT-1: cas_retry:\nCHECK-COUNT-1: @!%p1 bra cas_done;")
    filecheck(ptx, _LOOP.format(scope=scope, update=update))
    loop = ptx[ptx.index("{ .reg .pred cas_again;") : ptx.index("cas_done: }")]
    leading, trailing = f"fence.acq_rel.{scope}; ld.relaxed", f"bra cas_retry; fence.acq_rel.{scope}; mov.b16"
    assert (leading in loop) == (sem in ("release", "acq_rel")), (sem, loop)
    assert (trailing in loop) == (sem in ("acquire", "acq_rel")), (sem, loop)
    assert loop.count("fence.") == (sem != "relaxed") + (sem == "acq_rel"), (sem, loop)


@pytest.mark.parametrize("sem, scope", [("relaxed", "sys"), ("acquire", "gpu"), ("release", "cta"), ("acq_rel", "gpu")])
@pytest.mark.parametrize("arch", BELOW_SM_90)
def test_bf16_add_below_sm_90_is_a_cas_loop_on_the_word(arch: str, sem: str, scope: str) -> None:
    ptx = _ptx("fadd", "bf16", arch, sem, scope)
    filecheck(ptx, f"CHECK: .target {arch}\nCHECK-NOT: add.noftz.bf16\nCHECK-NOT: global.add\nCHECK-NOT: cas.b16")
    _check_loop(ptx, "mov.b16 cas_one, 0x3F80; fma.rn.bf16 cas_new, cas_old, cas_one, %rs", sem, scope)


@pytest.mark.parametrize("arch", FROM_SM_90)
def test_bf16_add_from_sm_90_is_the_native_atomic(arch: str) -> None:
    ptx = _ptx("fadd", "bf16", arch, "release", "cta")
    filecheck(ptx, "CHECK-COUNT-1: atom.release.cta.global.add.noftz.bf16\nCHECK-COUNT-0: cas_retry\nCHECK-COUNT-0: fence")


@pytest.mark.parametrize("arch", BELOW_SM_90 + FROM_SM_90)
def test_fp16_add_is_the_native_atomic_on_every_target(arch: str) -> None:
    ptx = _ptx("fadd", "fp16", arch, "acquire", "sys")
    filecheck(ptx, "CHECK-COUNT-1: atom.acquire.sys.global.add.noftz.f16\nCHECK-COUNT-0: cas_retry")


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_16_bit_float_xchg_is_a_cas_loop_on_every_target(arch: str, dtype: str) -> None:
    """PTX has `atom.exch` on .b32, .b64 and .b128 only."""
    ptx = _ptx("xchg", dtype, arch, "acq_rel", "gpu")
    filecheck(ptx, "CHECK-COUNT-0: exch\nCHECK-COUNT-0: fma")
    _check_loop(ptx, "mov.b16 cas_new, %rs", "acq_rel", "gpu")


def test_every_atomic_form_links_on_every_target() -> None:
    """Every kind the rules take on every dtype they take it on, and `atomic_cas` on each, under
    every memory order and scope: one kernel, linked to a cubin for every target (ptxas rejects
    an instruction a target lacks)."""
    kinds = {
        "int32": ["add", "max", "min", "and", "or", "xor", "xchg"],
        "uint32": ["add", "umax", "umin", "and", "or", "xor", "xchg"],
        "int64": ["add", "max", "min", "and", "or", "xor", "xchg"],
        "uint64": ["add", "umax", "umin", "and", "or", "xor", "xchg"],
        "fp16": ["fadd", "xchg"],
        "bf16": ["fadd", "xchg"],
        "fp32": ["fadd", "max", "min", "xchg"],
        "fp64": ["fadd", "max", "min", "xchg"],
    }
    orders = [(sem, scope) for sem in SEMS for scope in ("cta", "gpu", "sys")]
    k = KernelBuilder("every_atomic", [(dtype, PointerType(ScalarType(dtype))) for dtype in kinds])
    offs = k.arange(0, 64)
    mask = k.cmp("ne", k.bin("rem", offs, 5), 3)
    n = 0
    for dtype, names in kinds.items():
        ptrs = k.ptrs(k[dtype], offs)
        v = k.load(ptrs)
        for kind in names + ["cas"]:
            sem, scope = orders[n % len(orders)]
            n += 1
            if kind == "cas":
                old = k.op("atomic_cas", ptrs, v, v, sem=sem, scope=scope)
            else:
                old = k.op("atomic_rmw", ptrs, v, mask, kind=kind, sem=sem, scope=scope)
            k.store(ptrs, old, mask)
    module = k.module()
    for arch in TARGETS:
        kernel = compile_module(module, target=arch, num_warps=2, isolate=False)
        assert kernel.cubin[:4] == b"\x7fELF", arch


# ---- the loop, run by a small PTX emulator ---------------------------------------------------

_BITS = {"b16": 16, "u16": 16, "b32": 32, "u32": 32, "b64": 64, "u64": 64}
_MEM = re.compile(r"\[ (\S+) \+ 0 \]")


def _bf16_value(bits: int) -> float:
    return float(np.array(int(bits) << 16, np.uint32).view(np.float32))


def _fma_bf16(a: int, b: int, c: int) -> int:
    """`fma.rn.bf16` on bits, for b = 1.0: a + c rounded once to the nearest bf16, ties to even
    (rounded first to float64, then float32: each keeps more than twice bf16's 8 bits, so the
    result is that of rounding the exact sum once). A NaN is the canonical 0x7FFF."""
    assert b == 0x3F80, "the loop multiplies by 1.0"
    with np.errstate(over="ignore"):  # to an infinity, as rounding to nearest does
        total = np.float32(_bf16_value(a) + _bf16_value(c))
    if np.isnan(total):
        return 0x7FFF
    f = int(np.array(total).view(np.uint32))
    return ((f + 0x7FFF + ((f >> 16) & 1)) >> 16) & 0xFFFF


class PtxThread:
    """One thread running one `_cas16` block: `run()` is a generator that yields before every
    access to `memory` (bytes), so that a scheduler can interleave threads between them."""

    def __init__(self, text: str, operands: dict[str, Any], memory: np.ndarray) -> None:
        self.memory, self.regs = memory, dict(operands)
        self.events: list[str] = []  # fences and accesses, in order
        self.prog: list[tuple[str | None, str, list[str]]] = []
        self.labels: dict[str, int] = {}
        assert text.startswith("{ ") and text.endswith(" }"), text
        for stmt in text[2:-2].split(";"):
            stmt = stmt.strip()
            while (m := re.match(r"(\w+):\s*(.*)", stmt)) is not None:
                self.labels[m.group(1)] = len(self.prog)
                stmt = m.group(2)
            if not stmt or stmt.startswith(".reg"):
                continue
            guard = None
            if stmt.startswith("@"):
                guard, stmt = stmt[1:].split(None, 1)
            opcode, _, rest = stmt.partition(" ")
            self.prog.append((guard, opcode, [a.strip() for a in rest.split(",")] if rest else []))

    def val(self, x: str) -> int:
        return self.regs[x] if x in self.regs else int(x, 0)

    def addr(self, x: str) -> int:
        m = _MEM.fullmatch(x)
        assert m is not None, x
        a = self.val(m.group(1))
        assert a % 4 == 0 and 0 <= a <= self.memory.size - 4, f"word access at {a}"
        return a

    def word(self, a: int) -> int:
        return int.from_bytes(self.memory[a : a + 4].tobytes(), "little")

    def run(self) -> Any:
        pc = 0
        while pc < len(self.prog):
            guard, opcode, args = self.prog[pc]
            pc += 1
            if guard is not None and bool(self.regs[guard.lstrip("!")]) == guard.startswith("!"):
                continue
            parts = opcode.split(".")
            width = _BITS.get(parts[-1], 0)
            mask = (1 << width) - 1
            d, src = (args[0], args[1:]) if args else (None, [])
            if opcode == "bra":
                pc = self.labels[args[0]]
            elif parts[0] == "fence":
                assert parts[1] == "acq_rel", opcode
                self.events.append(opcode)
            elif parts[0] == "ld":
                assert parts[1] == "relaxed" and parts[3] == "global" and width == 32, opcode
                yield
                a = self.addr(src[0])
                self.events.append(f"ld.{parts[2]} {a}")
                self.regs[d] = self.word(a)
            elif parts[0] == "atom":
                assert parts[1] == "relaxed" and parts[3:5] == ["global", "cas"] and width == 32, opcode
                yield
                a = self.addr(src[0])
                self.events.append(f"cas.{parts[2]} {a}")
                old, cmp, new = self.word(a), self.val(src[1]), self.val(src[2])
                if old == cmp:
                    self.memory[a : a + 4] = np.frombuffer(new.to_bytes(4, "little"), np.uint8)
                self.regs[d] = old
            elif parts[0] in ("mov", "cvt"):
                self.regs[d] = self.val(src[0]) & mask
            elif parts[0] == "and":
                self.regs[d] = self.val(src[0]) & self.val(src[1]) & mask
            elif parts[0] == "shl":
                self.regs[d] = (self.val(src[0]) << self.val(src[1])) & mask
            elif parts[0] == "bfe":
                self.regs[d] = (self.val(src[0]) >> self.val(src[1])) & ((1 << self.val(src[2])) - 1)
            elif parts[0] == "bfi":
                field = ((1 << self.val(src[3])) - 1) << self.val(src[2])
                self.regs[d] = (self.val(src[1]) & ~field | self.val(src[0]) << self.val(src[2]) & field) & mask
            elif opcode == "fma.rn.bf16":
                self.regs[d] = _fma_bf16(*(self.val(s) for s in src))
            elif opcode == "setp.ne.b32":
                self.regs[d] = self.val(src[0]) != self.val(src[1])
            else:
                raise AssertionError(f"the emulator does not know {opcode}")
        return self.regs["$0"]


# 16-bit values as the rule sees them: bf16 as its bits in uint16 arrays, fp16 as float16.
_IR_TYPES.update({np.dtype(np.uint16): bf16_type, np.dtype(np.float16): ir.HalfType(), np.dtype(np.int16): ir.IntType(16)})
_NP_TYPES.update({str(t): d for d, t in _IR_TYPES.items()})


class CasThreads(Threads):
    """`Threads` for the compare-and-swap loops: each lane's block becomes a `PtxThread` on
    `memory` (bytes, pointers are byte addresses); `asm` hands back zeros, which `run` later
    fills with what the threads return (the rule's bitcasts are views of them)."""

    def __init__(self, memory: np.ndarray, arch: str) -> None:
        super().__init__(memory)
        self.target = get_target(arch)
        self.threads: list[tuple[PtxThread, np.ndarray, int]] = []

    def asm(self, ty: ir.Type, text: str, constraints: str, operands: list[Any], side_effect: bool = False) -> Arr:
        assert ty == ir.IntType(16) and constraints == "=&h,b,l,h" and side_effect, (ty, constraints)
        self.atoms.append(text)
        n = np.asarray(operands[1]).size
        pred, ptr, word = (np.broadcast_to(np.asarray(_v(o)), (n,)) for o in operands)
        out = np.zeros(n, np.int16)
        for lane in range(n):
            regs = {"$1": bool(pred[lane]), "$2": int(ptr[lane]), "$3": int(np.asarray(word[lane]).view(np.uint16))}
            self.threads.append((PtxThread(text, regs, self.memory), out, lane))
        return arr(out)

    def run(self, rng: np.random.Generator | None = None) -> None:
        """Every thread to its end: in order, one after the other, or stepped in a random order."""
        live = [(t.run(), t, out, lane) for t, out, lane in self.threads]
        while live:
            i = 0 if rng is None else int(rng.integers(len(live)))
            gen, t, out, lane = live[i]
            try:
                next(gen)
            except StopIteration as done:
                out[lane] = np.array(done.value, np.uint16).view(np.int16)
                live.pop(i)


BASE = 2  # the K elements start at byte 2: both halves of a word are elements, and each has a neighbour that is not
CAS_CASES = [("fadd", "bf16"), ("xchg", "bf16"), ("xchg", "fp16")]
# Zeros of both signs, an infinity, subnormals, values whose sums round (ties included), the largest.
CAS_POOLS = {
    "bf16": [0.0, -0.0, np.inf, 1.0, -1.0, 1e-40, -3e-39, 3.5, -3.5, 1e30, -1e30, 1.00390625, 0.0078125, 257.0, -3.3e38],
    "fp16": [0.0, -0.0, np.inf, 1.0, -1.0, 6e-8, -3e-5, 3.5, -3.5, 1e4, -1e4, 1.0009765625, 0.0078125, 2049.0, -65504.0],
}


def _bits16(x: Any, dtype: str) -> np.ndarray:
    """Values as the bits of `dtype` (bf16 rounded to nearest even)."""
    if dtype == "fp16":
        return np.asarray(x, np.float16).view(np.uint16)
    f = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((f + 0x7FFF + ((f >> 16) & 1)) >> 16).astype(np.uint16)


def _rule_value(bits: np.ndarray, dtype: str) -> Arr:
    return arr(bits) if dtype == "bf16" else arr(bits.view(np.float16))


def _run_rule(kind: str, dtype: str, arch: str, sem: str, init: np.ndarray, vals: np.ndarray, mask: np.ndarray,
              rng: np.random.Generator | None) -> tuple[CasThreads, np.ndarray]:
    """The rule's code for thread t on element t % K (t < len(vals)), then the threads run."""
    memory = np.full(BASE + 2 * K + 2, 0xA5, np.uint8)
    memory[BASE : BASE + 2 * K] = init.view(np.uint8)
    gpu = CasThreads(memory, arch)
    (op,) = [o for o in atomic_module(kind, dtype, sem).kernel.walk() if o.name == "atomic_rmw"]
    got = []
    for t in range(vals.size):
        one = [[arr([BASE + 2 * (t % K)], np.int64)], [_rule_value(vals[t : t + 1], dtype)], [arr(mask[t : t + 1])]]
        (regs,) = atomic_rules.atomic_rmw(gpu, op, one)  # type: ignore[arg-type]
        got.append(regs[0])
    assert len(gpu.atoms) == vals.size
    gpu.run(rng)
    old = np.array([np.asarray(g).view(np.uint16)[0] for g in got], np.uint16)
    assert (memory[:BASE] == 0xA5).all() and (memory[BASE + 2 * K :] == 0xA5).all(), "the neighbours were written"
    return gpu, old


def _storage(bits: np.ndarray, dtype: str) -> np.ndarray:
    return bits.copy() if dtype == "bf16" else bits.view(np.float16).copy()


@pytest.mark.parametrize("sem", SEMS)
@pytest.mark.parametrize("kind, dtype", CAS_CASES)
def test_cas_loops_agree_with_the_interpreter_bit_for_bit(kind: str, dtype: str, sem: str) -> None:
    """Threads one after the other (the interpreter's serial order): the same memory and old
    values, bit for bit, on zeros of both signs, infinities, subnormals and rounding ties; 0 and
    no access at all for the threads the mask turns off; fences where `sem` asks for them."""
    rng = np.random.default_rng(11)
    pool_bits = _bits16(np.array(CAS_POOLS[dtype], np.float32), dtype)
    if kind == "xchg":  # moved as bits, payloads and all (an add's NaN is canonical, the interpreter's not)
        pool_bits = np.concatenate([pool_bits, np.array([0x7E01, 0xFFFF] if dtype == "fp16" else [0x7FC1, 0xFF81], np.uint16)])
    init, vals = pool_bits[rng.integers(0, pool_bits.size, K)], pool_bits[rng.integers(0, pool_bits.size, N)]
    mask = np.arange(N) % 5 != 3
    gpu, old = _run_rule(kind, dtype, "sm_80", sem, init, vals, mask, None)

    mem_i = _storage(init, dtype)
    out_i = np.zeros(N, mem_i.dtype)
    run_kernel(atomic_module(kind, dtype, sem), (1, 1, 1), [mem_i, _storage(vals, dtype), out_i])
    np.testing.assert_array_equal(gpu.memory[BASE : BASE + 2 * K].view(np.uint16), mem_i.view(np.uint16), err_msg="memory")
    np.testing.assert_array_equal(old[mask], out_i.view(np.uint16)[mask], err_msg="old values")
    assert (old[~mask] == 0).all()

    want = (["fence.acq_rel.gpu"] if sem in ("release", "acq_rel") else []) + ["ld.gpu", "cas.gpu"] + \
        (["fence.acq_rel.gpu"] if sem in ("acquire", "acq_rel") else [])
    for (thread, _, _), on in zip(gpu.threads, mask):
        assert [e.split()[0] for e in thread.events] == (want if on else []), thread.events


@pytest.mark.parametrize("kind, dtype", CAS_CASES)
def test_cas_loops_under_contention_lose_no_update(kind: str, dtype: str) -> None:
    """Threads stepped in random orders, so that compare-and-swaps fail (on the element or on its
    neighbour in the word) and retry: every update lands once. Values are small integers (sums
    exact in bf16), distinct and positive, so that the old values chain: from the initial value,
    the one thread that saw it, then the one that saw what that thread wrote, ... to the final."""
    vals_f = np.arange(1, N + 1, dtype=np.float32) if kind == "xchg" else np.arange(N, dtype=np.float32) % 2 + 1
    init_f = -np.arange(1, K + 1, dtype=np.float32)
    vals, init = _bits16(vals_f, dtype), _bits16(init_f, dtype)
    mask = np.arange(N) % 5 != 3
    retries = 0
    for seed in range(8):
        gpu, old = _run_rule(kind, dtype, "sm_86", "acq_rel", init, vals, mask, np.random.default_rng(seed))
        final = gpu.memory[BASE : BASE + 2 * K].view(np.uint16)
        retries += sum(e.startswith("cas") for t, _, _ in gpu.threads for e in t.events) - int(mask.sum())
        as_float = (lambda b: float(np.asarray(b, np.uint16).view(np.float16))) if dtype == "fp16" else _bf16_value
        for a in range(K):
            lanes = [t for t in range(N) if t % K == a and mask[t]]
            seen = {int(old[t]): t for t in lanes}
            assert len(seen) == len(lanes), "two threads saw the same value"
            cur = int(init[a])
            for _ in lanes:
                t = seen.pop(cur)
                cur = int(vals[t]) if kind == "xchg" else int(_bits16(as_float(cur) + as_float(vals[t]), dtype))
            assert cur == final[a], (a, cur, final[a])
    assert retries > 0, "no compare-and-swap ever failed: the interleaving did not contend"
