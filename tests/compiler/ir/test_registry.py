"""OpRegistry: rules keyed by the op catalogue, and the ops a complete stage has not answered for."""

from __future__ import annotations

from typing import Any

import pytest

from despina.compiler.ir.ops import OPS, OpDef
from despina.compiler.ir.registry import OpRegistry


def catalogue(*names: str) -> dict[str, OpDef]:
    return {n: OpDef(n, lambda t, a, r: []) for n in names}


def test_a_rule_for_an_op_outside_the_catalogue_is_refused() -> None:
    stage: OpRegistry[Any] = OpRegistry("test stage")
    with pytest.raises(ValueError, match=r"test stage: op 'frobnicate' is not in the op catalogue.*compiler/ir/ops\.py"):
        stage.register("add", "frobnicate")
    assert "add" not in stage  # nothing of a refused registration is kept
    with pytest.raises(ValueError, match="'frobnicate' is not in the op catalogue"):
        stage.unsupported("no reason", "frobnicate")


def test_an_op_gets_one_rule_or_one_reason() -> None:
    stage: OpRegistry[Any] = OpRegistry("test stage")
    stage.register("add")(len)
    with pytest.raises(ValueError, match="'add' already has a rule"):
        stage.register("add")(len)
    stage.builtin("handled by the driver", "yield")
    with pytest.raises(ValueError, match="'yield' already has a rule"):
        stage.unsupported("refused", "yield")
    assert stage.get("add") is len and stage.get("yield") is None and stage.builtins == {"yield": "handled by the driver"}


def test_a_complete_stage_lists_the_ops_it_has_not_answered_for() -> None:
    ops = catalogue("a", "b", "c", "d")
    stage: OpRegistry[Any] = OpRegistry("test stage", (ops,))
    stage.register("a")(len)
    stage.builtin("driver", "b")
    assert stage.missing() == ["c", "d"]
    stage.unsupported("refused", "c")
    assert stage.missing() == ["d"]
    ops["e"] = OpDef("e", lambda t, a, r: [])  # an op added to the catalogue later is missing too
    assert stage.missing() == ["d", "e"]


def test_an_optional_stage_misses_nothing_and_several_catalogues_are_one() -> None:
    stage: OpRegistry[Any] = OpRegistry("rewrites", (OPS, catalogue("gpu_op")), complete=False)
    stage.register("gpu_op", "add")(len)
    assert stage.missing() == [] and "gpu_op" in stage.ops() and stage.opdef("add") is OPS["add"]
