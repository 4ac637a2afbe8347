"""The scan lowering rule run on an emulated CTA: every IR value it builds is a NumPy array over
the CTA's threads, warp shuffles and shared memory are emulated, and the combine region runs
on those arrays. A non-commutative combine (composition of affine maps) pins the operand order
of every stage (in-thread registers, lane shuffles, warps through shared memory) for forward
and reverse scans against the interpreter's definition (reverse = flip, scan, flip)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip("llvmlite")

import llvmlite.ir as ir  # noqa: E402

from despina.compiler.backends.gpuir import LinearLayout, assign_layouts  # noqa: E402
from despina.compiler.backends.nvptx.lower import scan as scan_rule  # noqa: E402
from despina.compiler.ir.core import Block, Op  # noqa: E402
from despina.compiler.ir.types import PointerType, TileType, int64  # noqa: E402

from ..kernel_builder import KernelBuilder  # noqa: E402

P = 1_000_003  # affine maps x -> a*x + b over Z/P: associative, not commutative


def _v(x: Any) -> Any:
    return x.constant if isinstance(x, ir.Constant) else x


class Builder:
    """The `ir.IRBuilder` calls the scan rule makes, on per-thread arrays."""

    def add(self, x: Any, y: Any) -> Any:
        return _v(x) + _v(y)

    def mul(self, x: Any, y: Any) -> Any:
        return _v(x) * _v(y)

    def xor(self, x: Any, y: Any) -> Any:
        return _v(x) ^ _v(y)

    def and_(self, x: Any, y: Any) -> Any:
        return _v(x) & _v(y)

    def not_(self, x: Any) -> Any:
        return np.logical_not(x)

    def icmp_unsigned(self, pred: str, x: Any, y: Any) -> Any:
        return {"!=": np.not_equal, "==": np.equal}[pred](_v(x), _v(y))

    def select(self, flag: Any, yes: Any, no: Any) -> Any:
        return np.where(flag, yes, no)


class CTA:
    """What the scan rule needs of `Lowering`, for `num_warps` warps of 32 lanes."""

    def __init__(self, ll: LinearLayout, num_warps: int) -> None:
        self.ll = ll
        self.tid = np.arange(32 * num_warps)
        self.lane, self.warp = self.tid % 32, self.tid // 32
        self.b = Builder()
        self.smem: dict[int, np.ndarray] = {}
        self.barriers = 0

    def layout(self, v: Any) -> LinearLayout:
        return self.ll

    def index(self, ll: LinearLayout, r: int) -> list[np.ndarray]:
        at = [ll.index(r, int(lane), int(warp)) for lane, warp in zip(self.lane, self.warp)]
        return [np.array([i[d] for i in at]) for d in range(ll.rank)]

    def lower_region(self, block: Block, args: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        env = {id(a): regs[0] for a, regs in zip(block.args, args)}
        for op in block.ops:
            x = [env[id(v)] for v in op.operands]
            if op.name == "yield":
                return [[v] for v in x]
            env[id(op.result)] = {"mul": lambda a, b: a * b % P, "add": lambda a, b: (a + b) % P}[op.name](*x)
        raise AssertionError("the combine region has no yield")

    @contextlib.contextmanager
    def scratch(self, nbytes: int) -> Iterator[int]:
        yield 0

    def barrier(self) -> None:
        self.barriers += 1


def _shuffle_xor(ctx: CTA, v: np.ndarray, lane_mask: int) -> np.ndarray:
    return v[ctx.tid ^ lane_mask]


def _store_elem(ctx: CTA, elem: Any, offset: np.ndarray, value: np.ndarray, byte_base: int = 0) -> None:
    buf = ctx.smem.setdefault(byte_base, np.full(1 << 16, -1, dtype=np.int64))
    buf[offset] = value  # replicas write the same value


def _load_elem(ctx: CTA, elem: Any, offset: np.ndarray, byte_base: int = 0) -> np.ndarray:
    got = ctx.smem[byte_base][offset]
    assert (got >= 0).all(), "read shared memory nobody wrote"
    return got


def _affine_scan_op(shape: tuple[int, ...], axis: int, reverse: bool) -> Op:
    """`associative_scan((a, b), axis, (a1, b1), (a2, b2) -> (a1*a2, b1*a2 + b2))` on int64 tiles."""
    k = KernelBuilder("affine_scan", [("x", PointerType(int64))])
    tile = k.full(list(shape), 1, int64)
    region = Block([int64] * 4)
    with k.b.at(region):
        a1, b1, a2, b2 = region.args
        k.void("yield", k.op("mul", a1, a2), k.op("add", k.op("mul", b1, a2), b2))
    return k.b.create("scan", [tile, tile], {"axis": axis, "reverse": reverse}, [region])


def _reference(a: np.ndarray, b: np.ndarray, axis: int, reverse: bool) -> tuple[np.ndarray, np.ndarray]:
    """The interpreter's definition: acc = combine(acc, x) along `axis` in scan order."""
    a, b = np.moveaxis(a, axis, -1).copy(), np.moveaxis(b, axis, -1).copy()
    n = a.shape[-1]
    order = range(n - 1, -1, -1) if reverse else range(n)
    out_a, out_b = np.empty_like(a), np.empty_like(b)
    acc_a, acc_b = np.ones(a.shape[:-1], np.int64), np.zeros(a.shape[:-1], np.int64)
    for i in order:
        acc_a, acc_b = acc_a * a[..., i] % P, (acc_b * a[..., i] + b[..., i]) % P
        out_a[..., i], out_b[..., i] = acc_a, acc_b
    return np.moveaxis(out_a, -1, axis), np.moveaxis(out_b, -1, axis)


def emulate(ll: LinearLayout, num_warps: int, axis: int, reverse: bool, monkeypatch: pytest.MonkeyPatch) -> CTA:
    monkeypatch.setattr(scan_rule, "shuffle_xor", _shuffle_xor)
    monkeypatch.setattr(scan_rule, "store_elem", _store_elem)
    monkeypatch.setattr(scan_rule, "load_elem", _load_elem)
    rng = np.random.default_rng(len(ll.shape) * 100 + axis)
    a = rng.integers(1, P, ll.shape)
    b = rng.integers(0, P, ll.shape)
    cta = CTA(ll, num_warps)
    op = _affine_scan_op(ll.shape, axis, reverse)
    at = [tuple(int(i[t]) for i in idx) for idx in (cta.index(ll, r) for r in range(ll.num_regs))
          for t in range(len(cta.tid))]
    assert len(set(at)) == int(np.prod(ll.shape)), "the layout must cover the tile"
    args = [[np.array([x[tuple(int(i[t]) for i in cta.index(ll, r))] for t in cta.tid]) for r in range(ll.num_regs)]
            for x in (a, b)]
    got = scan_rule.scan(cta, op, args)  # type: ignore[arg-type]
    want = _reference(a, b, axis, reverse)
    for o in range(2):
        for r in range(ll.num_regs):
            idx = cta.index(ll, r)
            expected = want[o][tuple(idx)]
            np.testing.assert_array_equal(got[o][r], expected, err_msg=f"output {o}, register {r}")
    return cta


def _layout_of_scan(shape: tuple[int, ...], axis: int, num_warps: int) -> LinearLayout:
    """The layout the compiler gives a scan over a fresh tile of `shape`."""
    k = KernelBuilder("scan_layout", [("x", PointerType(int64))])
    offs = k.arange(0, int(np.prod(shape)))
    x = k.load(k.ptrs(k["x"], offs))
    if len(shape) > 1:
        x = k.op("reshape", x, shape=list(shape))
    s = k.scan(x, axis, "add")
    flat = k.op("reshape", s, shape=[int(np.prod(shape))]) if len(shape) > 1 else s
    k.store(k.ptrs(k["x"], offs), flat)
    module = k.module()
    gpu = assign_layouts(module, num_warps)
    (op,) = [o for o in gpu.fn.walk() if o.name == "scan"]
    assert isinstance(op.operands[0].type, TileType)
    return gpu.layout(op.operands[0])


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_of_16_over_4_warps_like_custom_scan_kernel(reverse: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # tests/language/test_reduction.py's custom_scan_kernel: 16 elements over 16 lanes, replicated.
    ll = _layout_of_scan((16,), 0, 4)
    assert ll.lane[:4] == ((1,), (2,), (4,), (8,)) and not any(ll.reg)
    emulate(ll, 4, 0, reverse, monkeypatch)


LAYOUTS = {
    # registers, lanes and warps all along the axis, in increasing powers
    "reg-lane-warp": (LinearLayout.distributed((1024,), ((1,), (2,)), ((4,), (8,), (16,), (32,), (64,)), ((128,), (256,), (512,))), 8),
    # a register bit above the lane and warp bits, and a replicated lane bit
    "warp-below-reg": (LinearLayout.distributed((256,), ((128,),), ((1,), (2,), (0,), (4,), (8,)), ((16,), (32,), (64,))), 8),
    # lanes split between two dimensions; warps along the other one
    "2d": (LinearLayout.distributed((8, 16), ((0, 1),), ((0, 2), (0, 4), (1, 0), (2, 0), (0, 8)), ((4, 0), (0, 0))), 4),
}


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_scan_operand_order_in_every_stage(name: str, reverse: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    ll, num_warps = LAYOUTS[name]
    axes = [0, 1] if ll.rank == 2 else [0]
    for axis in axes:
        cta = emulate(ll, num_warps, axis, reverse, monkeypatch)
        assert cta.barriers == sum(1 for w in ll.warp if w[axis])


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize(("shape", "axis", "num_warps"), [((1024,), 0, 4), ((64, 32), 0, 4), ((64, 32), 1, 8)])
def test_scan_on_compiler_layouts(shape: tuple[int, ...], axis: int, num_warps: int, reverse: bool,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    emulate(_layout_of_scan(shape, axis, num_warps), num_warps, axis, reverse, monkeypatch)
