"""The GPU IR's verifier: the IR the passes make verifies (every kernel the backend compiles is checked
after each pass), and each invariant, broken by hand, is an error (a `BackendError`, so
`despina.CompilationError`) that names the kernel, the op, the pass that ran last and what is wrong."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from despina.compiler.backends.gpuir import passes
from despina.compiler.backends.gpuir.assign import GpuFunction
from despina.compiler.backends.gpuir.encodings import Blocked
from despina.compiler.backends.gpuir.ops import CONVERT
from despina.compiler.backends.gpuir.passes import build_gpuir
from despina.compiler.backends.gpuir.shared import SwizzledShared
from despina.compiler.backends.gpuir.verifier import GpuIRError, verify_gpuir
from despina.compiler.ir.core import Op, Value
from despina.compiler.ir.types import TileType
from despina.compiler.options import CompileOptions

from . import kernels


def _gpu(name: str = "vector_add", warps: int = 4) -> GpuFunction:
    return build_gpuir(kernels.ALL[name](), CompileOptions(num_warps=warps))


def _first(gpu: GpuFunction, name: str) -> Op:
    return next(op for op in gpu.fn.walk() if op.name == name)


def _retype(v: Value, **changes: object) -> None:
    assert isinstance(v.type, TileType)
    v.type = replace(v.type, **changes)


@pytest.mark.parametrize("name", sorted(kernels.ALL))
@pytest.mark.parametrize("warps", [1, 4, 8])
def test_what_the_passes_make_verifies(name: str, warps: int) -> None:
    verify_gpuir(_gpu(name, warps))


def _no_encoding(gpu: GpuFunction) -> None:
    _retype(_first(gpu, "arange").result, encoding=None)


def _wrong_rank(gpu: GpuFunction) -> None:
    _retype(_first(gpu, "arange").result, encoding=Blocked((1, 1), (1, 32), (1, 4), (1, 0)))


def _wrong_warps(gpu: GpuFunction) -> None:
    _retype(_first(gpu, "arange").result, encoding=Blocked((4,), (32,), (8,), (0,)))


def _shared_layout(gpu: GpuFunction) -> None:
    _retype(_first(gpu, "arange").result, encoding=SwizzledShared(8, 1, 8, (1, 0)))


def _mixed_operands(gpu: GpuFunction) -> None:
    add = next(op for op in gpu.fn.walk() if op.name == "add" and isinstance(op.result.type, TileType))
    _retype(add.operands[1], encoding=Blocked((1,), (32,), (4,), (0,)))


def _loop_result(gpu: GpuFunction) -> None:
    _retype(_first(gpu, "for").results[0], encoding=Blocked((1,), (32,), (4,), (0,)))


def _wrong_shape(gpu: GpuFunction) -> None:
    _retype(_first(gpu, "arange").result, shape=(256,))


def _unknown_attribute(gpu: GpuFunction) -> None:
    _first(gpu, "load").attrs["async"] = True


def _convert_changes_element(gpu: GpuFunction) -> None:
    load = _first(gpu, "load")
    conv = Op(CONVERT, [load.result], [replace(load.result.type, element_ty=kernels.f16p.element_ty)])
    body = gpu.fn.body
    body.ops.insert(body.ops.index(load) + 1, conv)


@pytest.mark.parametrize(("name", "breaks", "message"), [
    ("vector_add", _no_encoding, "op 'arange': result 0 tile<1024xint32> names no layout encoding"),
    ("vector_add", _wrong_rank, "an encoding of rank 2 on a tile of rank 1"),
    ("vector_add", _wrong_warps, "spreads over 32 lanes and 8 warps, not 32 and 4"),
    ("vector_add", _shared_layout, "names SwizzledShared, which is no register layout"),
    ("vector_add", _mixed_operands, "op 'add'"),
    ("loop_carry", _loop_result, "a carried value's init, argument, yield and result must share one layout"),
    ("vector_add", _wrong_shape, "by the op's type rule"),
    ("vector_add", _unknown_attribute, "unknown attribute 'async'"),
    ("vector_add", _convert_changes_element, "op 'convert_layout'"),
])
def test_a_broken_invariant_is_named(name: str, breaks: Callable[[GpuFunction], None], message: str) -> None:
    gpu = _gpu(name)
    breaks(gpu)
    with pytest.raises(GpuIRError) as info:
        verify_gpuir(gpu, "a test")
    text = str(info.value)
    assert text.startswith(f"kernel '{gpu.fn.name}': GPU IR after a test, op '")
    assert message in text


def test_the_pass_that_breaks_the_ir_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(passes, "GPU_PASSES", [*passes.GPU_PASSES, ("careless", lambda gpu, o: _no_encoding(gpu))])
    with pytest.raises(GpuIRError, match="kernel 'add_kernel': GPU IR after careless, op 'arange'"):
        _gpu()
