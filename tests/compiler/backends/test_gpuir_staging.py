"""wgmma operands that no ring, hoisted buffer or register holds are stored into shared memory in the
GPU IR (gpuir/staging.py): an empty `local_alloc` at the kernel's entry, a `local_store` where the
operand's conversion was, a `local_load` for the dot; in a loop the store is every iteration's and
the dot waits for its group before the next. The verifier keeps `local_store` to empty buffers."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

import despina  # noqa: E402
import despina.language as tl  # noqa: E402
from despina.compiler.backends.gpuir.parser import parse_gpuir  # noqa: E402
from despina.compiler.backends.gpuir.printer import print_gpuir  # noqa: E402
from despina.compiler.backends.gpuir.verifier import GpuIRError, verify_gpuir  # noqa: E402
from despina.compiler.ir.core import IRError, Op  # noqa: E402
from despina.compiler.ir.types import TileType, float16  # noqa: E402


@despina.jit
def lone_dot(a_ptr, b_ptr, c_ptr):
    rm, rn, rk = tl.arange(0, 128), tl.arange(0, 128), tl.arange(0, 64)
    a = tl.load(a_ptr + rm[:, None] * 64 + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * 128 + rn[None, :])
    tl.store(c_ptr + rm[:, None] * 128 + rn[None, :], tl.dot(a, b))


@despina.jit
def scaled_a(a_ptr, b_ptr, c_ptr, n):
    rm, rn, rk = tl.arange(0, 128), tl.arange(0, 128), tl.arange(0, 64)
    acc = tl.zeros((128, 128), tl.float32)
    for k in range(0, n):
        a = (tl.load(a_ptr + k * 64 + rm[:, None] * 64 + rk[None, :]) * 2).to(tl.float16)  # computed: no ring
        b = tl.load(b_ptr + k * 8192 + rk[:, None] * 128 + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * 128 + rn[None, :], acc)


def _compile(fn: Any, sig: str) -> Any:
    return despina.compile(fn, sig, {}, num_warps=8, num_stages=3, target="sm_90a")


def test_a_lone_dot_s_operands_are_stored_at_the_dot() -> None:
    k = _compile(lone_dot, "*fp16:16,*fp16:16,*fp32:16")
    gpuir = k.asm["gpuir"]
    layouts = dict(re.findall(r"^(#L\d+) = (.*)$", gpuir, re.M))
    allocs = re.findall(r'^  (%\d+) = local_alloc\(\) \{dtype = type\(fp16\), shape = \[(\d+), (\d+)\]\} : '
                        r"shared<\2x\3xfp16> (#L\d+)$", gpuir, re.M)
    assert [(m, n) for _, m, n, _ in allocs] == [("128", "64"), ("64", "128")]
    for _, _, _, layout in allocs:  # swizzle atoms of 64 fp16 columns, as the descriptors read them
        assert layouts[layout].startswith("swizzled_shared<vec=8, perPhase=1, maxPhase=8") and "block=64" in layouts[layout]
    body = gpuir[gpuir.index("func @"):]
    for buf, *_ in allocs:
        assert len(re.findall(rf"^  local_store\({buf}, %\d+\)$", body, re.M)) == 1
        assert len(re.findall(rf"= local_load\({buf}\) : tile<", body, re.M)) == 1
    assert "convert_layout(" not in [line for line in body.splitlines() if " dot(" in line][0]
    ptx = k.asm["ptx"]
    assert ptx.count("fence.proxy.async.shared::cta;") == 2 and ptx.count("wgmma.mma_async") == 4
    assert k.metadata["spill_stores"] == 0 and k.metadata["ptxas_warnings"] == []


def test_a_loop_stores_its_computed_operand_every_iteration_and_waits_for_the_dot() -> None:
    k = _compile(scaled_a, "*fp16:16,*fp16:16,*fp32:16,i32")
    gpuir = k.asm["gpuir"]
    (buf,) = re.findall(r"^  (%\d+) = local_alloc\(\) \{dtype = type\(fp16\), shape = \[128, 64\]\}", gpuir, re.M)
    loop = gpuir[gpuir.index("= for("):]
    assert re.search(rf"^      local_store\({buf}, %\d+\)$", loop, re.M)  # in the loop body
    assert 'pipeline = "3 stages, 1 loads by cp.async' in gpuir  # B alone goes through the ring
    ptx = k.asm["ptx"]
    body = ptx[ptx.index("cp.async.wait_group"):]
    body = body[: body.index("bra")]
    # B's slot is read in place; A is stored after a barrier (the last iteration's readers are done),
    # fenced for the async proxy, and the dot waits for its group: the next iteration writes A again.
    assert "st.shared" in body and "fence.proxy.async.shared::cta;" in body
    assert "wgmma.wait_group.sync.aligned 0;" in body and "wgmma.wait_group.sync.aligned 1;" not in body
    assert k.metadata["ptxas_warnings"] == []


def _gpuir(fn: Any, sig: str) -> Any:
    return parse_gpuir(_compile(fn, sig).asm["gpuir"])


def test_the_staged_gpu_ir_round_trips_as_text() -> None:
    text = _compile(scaled_a, "*fp16:16,*fp16:16,*fp32:16,i32").asm["gpuir"]
    assert print_gpuir(parse_gpuir(text)) == text


def test_local_store_writes_only_into_an_empty_buffer_of_its_tile_s_type() -> None:
    gpu = _gpuir(lone_dot, "*fp16:16,*fp16:16,*fp32:16")
    ops = list(gpu.fn.walk())
    store = next(o for o in ops if o.name == "local_store")
    alloc = store.operands[0].owner
    assert isinstance(alloc, Op)
    alloc.operands, shape = [store.operands[1]], alloc.attrs.pop("shape")
    dtype = alloc.attrs.pop("dtype")
    with pytest.raises(GpuIRError, match="local_store writes only into a buffer that an empty local_alloc made"):
        verify_gpuir(gpu)
    alloc.operands, alloc.attrs["shape"], alloc.attrs["dtype"] = [], shape, dtype
    verify_gpuir(gpu)
    tile = store.operands[1]
    assert isinstance(tile.type, TileType)
    other = Op("local_load", [next(o for o in ops if o.name == "local_alloc" and o is not alloc).result],
               [TileType((64, 128), float16, tile.type.encoding)])
    store.operands[1] = other.result
    with pytest.raises(GpuIRError, match="'local_store' takes a shared-memory buffer and a tile of its shape and type"):
        verify_gpuir(gpu)


def test_local_alloc_takes_a_tile_or_a_shape_and_dtype() -> None:
    from despina.compiler.backends.gpuir.ops import infer_gpu

    tile = TileType((128, 64), float16)
    assert infer_gpu("local_alloc", [], {"shape": [128, 64], "dtype": float16})[0].shape == (128, 64)
    assert infer_gpu("local_alloc", [tile], {})[0].shape == (128, 64)
    for operands, attrs in (([], {}), ([], {"shape": [128, 64]}), ([tile], {"shape": [128, 64], "dtype": float16}),
                            ([], {"shape": [128, 64], "dtype": tile})):
        with pytest.raises(IRError, match="'local_alloc' takes 1 tile, or none and the buffer's shape and scalar dtype"):
            infer_gpu("local_alloc", operands, attrs)
