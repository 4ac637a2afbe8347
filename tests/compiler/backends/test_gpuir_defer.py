"""A chain's second product deferred to the next iteration (gpuir/defer.py, sm_90a, warp-specialized loops): the
deferred loop computes what the loop as written computes, in the interpreter, whatever the trip count (none
included); loops that do not fit stay and say why. The lowering's side is in nvptx/test_tma.py (the
specialized attention through descriptors)."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("llvmlite")

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))

import flash_attention  # noqa: E402

import despina  # noqa: E402
import despina.language as tl  # noqa: E402
from despina.compiler.backends.gpuir.combine import accumulate_dot_adds  # noqa: E402
from despina.compiler.backends.gpuir.defer import defer_dots  # noqa: E402
from despina.compiler.interpreter import run_kernel  # noqa: E402
from despina.compiler.ir.core import Module  # noqa: E402


def module_of(fn: Any, args: tuple[Any, ...], consts: dict[str, Any]) -> Module:
    options = fn.options({}, interpret=True)
    return fn.ir(fn.specialize(fn.bind(args, consts), options), options)


def deferred(module: Module, specialize: bool = False) -> tuple[Module, list[str]]:
    """`module` as the backend defers it: after `acc * alpha + tl.dot(p, v)` became `tl.dot(p, v, acc * alpha)`;
    with `specialize`, its loops marked `warp_specialize` first (the example's loop is not)."""
    out = copy.deepcopy(module)
    for op in out.kernel.walk():
        if op.name == "for" and specialize:
            op.attrs["warp_specialize"] = True
    accumulate_dot_adds(out.kernel)
    defer_dots(out.kernel)
    return out, [op.attrs.get("deferred", "") for op in out.kernel.walk() if op.name == "for"]


@despina.jit
def chain(a_ptr, b_ptr, v_ptr, out_ptr, LO, HI, N: tl.constexpr, STEP: tl.constexpr, UNROLL: tl.constexpr,
          READ_EARLY: tl.constexpr, CARRIED_B: tl.constexpr, WS: tl.constexpr):
    """acc = sum over j in range(LO, HI, STEP) of (A B_j) scaled, then times V_j (V through a descriptor);
    the scale reads S as attention's rescaling does."""
    i = tl.arange(0, N)
    a = tl.load(a_ptr + i[:, None] * N + i[None, :])
    acc = tl.zeros((N, N), tl.float32) + 1.0
    row = 0
    v_desc = tl.make_tensor_descriptor(v_ptr, [64, N], [N, 1], [N, N])
    for j in tl.range(LO, HI, STEP, loop_unroll_factor=UNROLL, warp_specialize=WS):
        if READ_EARLY:
            acc = acc * 0.5
        b = tl.load(b_ptr + (j + i[:, None]) * N + i[None, :], mask=(j + i[:, None]) < 64, other=0.0)
        s = tl.dot(a, b)
        scale = tl.max(s, 1) * 0.0 + 0.75
        acc = acc * scale[:, None]
        v = v_desc.load([row if CARRIED_B else j, 0])
        acc = tl.dot((s * 0.125).to(tl.float16), v, acc)
        row = row + 1
    tl.store(out_ptr + i[:, None] * N + i[None, :], acc)


def _chain_run(module: Module, lo: int, hi: int) -> np.ndarray:
    rng = np.random.default_rng(lo * 7 + hi)
    a, b, v = (rng.integers(-3, 4, shape).astype(np.float16) for shape in ((16, 16), (64, 16), (64, 16)))
    out = np.full((16, 16), -1.0, np.float32)
    run_kernel(module, (1, 1, 1), [a, b, v, out, lo, hi])
    return out


def _chain(lo: int, hi: int, **flags: Any) -> Module:
    consts = {"N": 16, "STEP": 8, "UNROLL": None, "READ_EARLY": False, "CARRIED_B": False, "WS": True, **flags}
    z = np.zeros((64, 16), np.float16)
    return module_of(chain, (z, z, z, np.zeros((16, 16), np.float32), lo, hi), consts)


@pytest.mark.parametrize(("lo", "hi"), [(0, 40), (8, 9), (0, 0), (24, 8), (3, 50)])
def test_the_deferred_loop_computes_what_the_loop_computes(lo: int, hi: int) -> None:
    module = _chain(lo, hi)
    later, said = deferred(module)
    assert said == ["yes: its second product runs in the next iteration, beside the first"]
    np.testing.assert_array_equal(_chain_run(later, lo, hi), _chain_run(module, lo, hi))


@pytest.mark.parametrize(("flags", "reason"), [
    ({"WS": False}, "the loop is not warp-specialized (with a CTA barrier every iteration, deferring is slower)"),
    ({"UNROLL": 2}, "the loop is unrolled (loop_unroll_factor)"),
    ({"READ_EARLY": True}, "an op before the first product reads the accumulator"),
    ({"CARRIED_B": True}, "the second product's B reads a value the loop carries"),
])
def test_a_loop_that_does_not_fit_stays_and_says_why(flags: dict[str, Any], reason: str) -> None:
    module = _chain(0, 40, **flags)
    later, said = deferred(module)
    assert said[-1] == f"no: {reason}"
    np.testing.assert_array_equal(_chain_run(later, 0, 40), _chain_run(module, 0, 40))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n_ctx", [64, 100])
def test_deferred_attention_computes_what_attention_computes(causal: bool, n_ctx: int) -> None:
    rng = np.random.default_rng(n_ctx)
    q, k, v = (rng.standard_normal((2, n_ctx, 16)).astype(np.float16) for _ in range(3))
    out = np.zeros_like(q)
    consts = {"HEAD_DIM": 16, "BLOCK_M": 32, "BLOCK_N": 16, "CAUSAL": causal}
    args = (q, k, v, out, 0.25, n_ctx * 16, 16, n_ctx)
    module = module_of(flash_attention.attention_fwd, args, consts)
    later, said = deferred(module, specialize=True)
    assert said == ["yes: its second product runs in the next iteration, beside the first"]
    results = []
    for m in (module, later):
        o = np.zeros_like(q)
        run_kernel(m, (-(-n_ctx // 32), 2, 1), [q, k, v, o, 0.25, n_ctx * 16, 16, n_ctx])
        results.append(o.astype(np.float32))
    np.testing.assert_allclose(results[1], results[0], rtol=0, atol=2e-3)
