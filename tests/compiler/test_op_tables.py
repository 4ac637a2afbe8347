"""Every op of the catalogue is answered for by every stage, and the language writes only what the schemas allow.

Each stage keeps its rules in an `OpRegistry` (compiler/ir/registry.py). A stage that must handle
every op (the interpreter, axis analysis, layout assignment, the NVPTX lowering) has, for each op
of its catalogues, a rule or a stated reason for having none; the reasons are printed here. The
kernels of the examples and of benchmarks/kernels.py are traced through the frontend and every
attribute of every op is checked against its op's schema, as the daemon checks what it decodes.
"""

from __future__ import annotations

import importlib
import importlib.util
import runpy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import benchmark_kernels
import numpy as np
import pytest

import despina
import despina.language as tl
from despina.compiler.backends.gpuir.assign import RULES as ASSIGNMENT
from despina.compiler.backends.gpuir.axis import RULES as AXIS
from despina.compiler.interpreter import RULES as INTERPRETER
from despina.compiler.ir.attrs import attrs_error
from despina.compiler.ir.codec import decode, encode
from despina.compiler.ir.core import Module
from despina.compiler.ir.ops import OPS
from despina.compiler.ir.registry import OpRegistry
from despina.compiler.ir.verifier import verify
from despina.jit import JITFunction

ROOT = Path(__file__).resolve().parents[2]


def stages() -> list[OpRegistry[Any]]:
    found: list[OpRegistry[Any]] = [INTERPRETER, AXIS, ASSIGNMENT]
    if importlib.util.find_spec("llvmlite") is not None:
        from despina.compiler.backends.nvptx.lower import RULES as LOWERING

        found.append(LOWERING)
    found.append(importlib.import_module("despina.compiler.passes.canonicalize").PATTERNS)
    found.append(importlib.import_module("despina.compiler.passes.fold").RULES)
    return found


@pytest.mark.parametrize("stage", stages(), ids=lambda s: s.stage)
def test_every_op_has_a_rule_or_a_reason(stage: OpRegistry[Any]) -> None:
    missing = stage.missing()
    assert not missing, (
        f"{stage.stage} has no rule for {', '.join(missing)}: register one, or declare why not with "
        f"`builtin(reason, ...)` or `unsupported(reason, ...)` next to the stage's registry"
    )


def test_the_backend_catalogue_adds_only_gpu_ops() -> None:
    from despina.compiler.backends.gpuir.ops import GPU_OPS

    assert not set(GPU_OPS) & set(OPS)


def test_the_stages_without_rules_are_printed(capsys: pytest.CaptureFixture[str]) -> None:
    """The ops each complete stage handles without a rule of its own, and why (for the record)."""
    lines = []
    for stage in stages():
        if not stage.complete:
            continue
        for title, table in (("unsupported", stage.unsupported_ops), ("built in", stage.builtins)):
            by_reason: dict[str, list[str]] = {}
            for op, reason in table.items():
                by_reason.setdefault(reason, []).append(op)
            for reason, ops in by_reason.items():
                lines.append(f"{stage.stage} | {title} | {', '.join(sorted(ops))} | {reason}")
    assert any("unsupported | call" in line for line in lines)
    with capsys.disabled():
        print("\nops without a rule, per stage (stage | kind | ops | reason):\n" + "\n".join(lines))


# ---- attributes: what the language writes, against the schemas ---------------------------------


def schema_errors(module: Module) -> list[str]:
    """Every op attribute of `module` that its op's schema refuses (unknown, wrong kind or value, missing)."""
    errors = []
    for fn in module.functions:
        for op in fn.walk():
            opdef = OPS.get(op.name)
            err = f"unknown op '{op.name}'" if opdef is None else attrs_error(opdef.attrs, op.attrs)
            if err:
                errors.append(f"{fn.name}: '{op.name}': {err}")
    return errors


@pytest.fixture()
def traced(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Module]]:
    """Every module the JIT builds while the test runs (kernels run in the interpreter)."""
    modules: list[Module] = []
    build = JITFunction.ir

    def record(self: JITFunction, spec: Any, options: Any) -> Module:
        module = build(self, spec, options)
        modules.append(module)
        return module

    monkeypatch.setenv("DESPINA_INTERPRET", "1")
    monkeypatch.setattr(JITFunction, "ir", record)
    yield modules


def check_modules(modules: list[Module]) -> None:
    assert modules
    for module in modules:
        # As the daemon sees it: through the wire form, then the verifier.
        back = decode(encode(module))
        verify(back)
        assert schema_errors(module) == schema_errors(back) == []


@pytest.mark.parametrize("name", ["flash_attention", "fused_softmax", "layer_norm", "libdevice", "matmul", "dropout"])
def test_the_examples_write_only_attributes_of_their_schemas(name: str, traced: list[Module],
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    runpy.run_path(str(ROOT / "examples" / f"{name}.py"), run_name="__main__")
    capsys.readouterr()
    check_modules(traced)


def test_the_benchmark_kernels_write_only_attributes_of_their_schemas(traced: list[Module]) -> None:
    """benchmarks/kernels.py as benchmarks/gpu.py loads it, each kernel launched once on small inputs."""
    k: Any = benchmark_kernels.load()
    x, h = np.ones(256, np.float32), np.ones(256, np.float16)
    k.add_kernel[(1,)](x, x, np.empty_like(x), 8, BLOCK_SIZE=16)
    k.softmax_kernel[(1,)](np.empty_like(x), x, 8, 8, 8, BLOCK_SIZE=16)
    k.layer_norm_kernel[(1,)](h, np.empty_like(h), h, h, 8, 8, 1e-5, BLOCK_SIZE=16)
    k.tiny_kernel[(1,)](x)
    k.matmul_kernel[(1, 1)](h, h, np.empty_like(h), 16, 16, 16, 16, 1, 16, 1, 16, 1, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16)
    m16 = np.ones((16, 16), np.float16)
    c16 = np.empty_like(m16)
    k.matmul_tma_kernel[(1, 1)](*(k.TensorDescriptor.from_tensor(t, [16, 16]) for t in (m16, m16, c16)), 16, 16, 16,
                                BLOCK_M=16, BLOCK_N=16, BLOCK_K=16)
    np.testing.assert_array_equal(c16, np.full((16, 16), 16, np.float16))
    assert {"descriptor_load", "descriptor_store"} <= {op.name for m in traced for op in m.kernel.walk()}
    check_modules(traced)


def test_every_float_max_and_min_of_the_language_fits_its_schema(traced: list[Module]) -> None:
    """The shape of issue 10's bug: `propagate_nan` as the language writes it, for each way of writing it."""

    @despina.jit
    def k(x_ptr: Any, out_ptr: Any, BLOCK: tl.constexpr) -> None:
        x = tl.load(x_ptr + tl.arange(0, BLOCK))
        y = tl.maximum(x, 1.0, propagate_nan=tl.PropagateNan.ALL) + tl.minimum(x, 0.0)
        y += tl.clamp(x, 0.0, 1.0) + tl.max(x, axis=0) + tl.min(x, axis=0)
        tl.store(out_ptr + tl.arange(0, BLOCK), y)

    x = np.arange(8, dtype=np.float32)
    k[(1,)](x, np.empty_like(x), BLOCK=8)
    assert any(op.attrs.get("propagate_nan") == "all" for m in traced for op in m.kernel.walk())
    check_modules(traced)


def test_a_wrong_attribute_is_reported() -> None:
    """The check above can fail: an attribute written as the verifier of issue 10 wanted it is refused."""
    from despina.compiler.ir.core import Block, Function, Op
    from despina.compiler.ir.types import float32

    x = Op("constant", [], [float32], {"value": 1.0, "type": float32})
    m = Op("maximum", [x.result, x.result], [float32], {"propagate_nan": False})
    body = Block()
    body.ops.extend([x, m, Op("return", [], [])])
    module = Module([Function("k", body, [], [], True)], {})
    assert schema_errors(module) == ["k: 'maximum': attribute 'propagate_nan' must be str, got False"]
