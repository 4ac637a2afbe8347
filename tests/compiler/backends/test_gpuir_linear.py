"""The linear-layout algebra: named inputs, inverse, composition and product (Hypothesis)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from despina.compiler.backends.gpuir import Blocked
from despina.compiler.backends.gpuir.linear import LinearLayout
from despina.compiler.backends.gpuir.mma import Mma, MmaOperand
from despina.compiler.backends.gpuir.shared import operand_swizzle


@st.composite
def bijections(draw: st.DrawFn) -> LinearLayout:
    """A random invertible layout: a random GF(2) basis of a 2-D tile split over named inputs."""
    rows, cols = draw(st.integers(0, 4)), draw(st.integers(0, 4))
    n = rows + cols
    rng = random.Random(draw(st.integers(0, 2**32)))
    vectors: list[int] = []
    while len(vectors) < n:
        v = rng.randrange(1, 1 << n)
        span = {0}
        for w in vectors:
            span |= {x ^ w for x in span}
        if v not in span:
            vectors.append(v)
    bases = [(v >> cols, v & ((1 << cols) - 1)) for v in vectors]
    cut = sorted(draw(st.lists(st.integers(0, n), min_size=2, max_size=2)))
    ins = (("reg", tuple(bases[: cut[0]])), ("lane", tuple(bases[cut[0] : cut[1]])), ("warp", tuple(bases[cut[1] :])))
    return LinearLayout((1 << rows, 1 << cols), ins)


def _inputs(ll: LinearLayout) -> list[dict[str, int]]:
    out = [{}]
    for name, bases in ll.ins:
        out = [dict(d, **{name: v}) for d in out for v in range(1 << len(bases))]
    return out


@settings(max_examples=60, deadline=None)
@given(bijections())
def test_inverse_undoes_the_layout(ll: LinearLayout) -> None:
    inv = ll.invert()
    for inputs in _inputs(ll):
        index = ll.apply(**inputs)
        back = inv.apply(**{f"dim{d}": x for d, x in enumerate(index)})
        assert back == tuple(inputs.get(n, 0) for n in ll.names)


@settings(max_examples=60, deadline=None)
@given(bijections())
def test_a_registers_index_is_the_layouts_value_at_it(ll: LinearLayout) -> None:
    """`reg_index` (a table made once per layout) agrees with `apply`, which XORs the bases each time,
    and, as `apply` does, ignores register bits beyond the layout's."""
    for r in range(2 * ll.num_regs):
        assert ll.reg_index(r) == ll.apply(reg=r)
    assert ll.reg_of_index == {ll.apply(reg=r): r for r in range(ll.num_regs)}


@settings(max_examples=60, deadline=None)
@given(bijections())
def test_composing_with_the_inverse_is_the_identity(ll: LinearLayout) -> None:
    ident = ll.compose(ll.invert())
    for inputs in _inputs(ll):
        assert ident.apply(**inputs) == tuple(inputs.get(n, 0) for n in ll.names)


@settings(max_examples=40, deadline=None)
@given(bijections(), bijections())
def test_product_places_layouts_side_by_side(a: LinearLayout, b: LinearLayout) -> None:
    p = a.product(b)
    assert p.shape == a.shape + b.shape
    for name in p.names:
        na, nb = len(a.bases(name)), len(b.bases(name))
        for i in range(1 << na):
            for j in range(1 << nb):
                assert p.apply(**{name: i | (j << na)}) == a.apply(**{name: i}) + b.apply(**{name: j})
    assert p.is_bijective()


def test_not_a_bijection_has_no_inverse() -> None:
    ll = Blocked((1,), (32,), (4,), (0,)).linear((64,))  # warps replicate
    assert not ll.is_bijective()
    with pytest.raises(ValueError, match="not a bijection"):
        ll.invert()


def test_registers_to_shared_offsets_by_composition() -> None:
    """A dot operand's registers composed with the inverse of its swizzled buffer give each
    register's offset: the addresses an ldmatrix or a vector store uses."""
    shape = (64, 64)
    reg = MmaOperand(0, Mma(2, (4, 2)), 2).linear(shape)
    smem = operand_swizzle(shape, (1, 0), 2).linear(shape)
    to_offset = reg.compose(smem.invert())
    inv = smem.invert()
    for r in range(reg.num_regs):
        for lane in (0, 5, 31):
            for w in range(8):
                idx = reg.index(r, lane, w)
                assert to_offset.apply(reg=r, lane=lane, warp=w) == inv.apply(dim0=idx[0], dim1=idx[1])
