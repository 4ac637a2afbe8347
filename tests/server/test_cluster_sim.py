"""benchmarks/cluster.py in small (3 daemons, 24 clients): exactly one compile per key cluster-wide, the
hit ratio and Redis round trips of hits, and a daemon killed mid-run costing no request and no entry."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

CLUSTER = Path(__file__).resolve().parents[2] / "benchmarks" / "cluster.py"


def cluster() -> ModuleType:
    spec = importlib.util.spec_from_file_location("despina_benchmark_cluster", CLUSTER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def figures() -> dict[str, Any]:
    if shutil.which("redis-server") is None:
        message = "redis-server is not installed (apt-get install -y redis-server)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    result: dict[str, Any] = cluster().simulate(daemons=3, clients=24, shared=8, warmup=4, seconds=4.0, rate=150.0,
                                                fresh=0.003, backend="fake", compile_ms=50.0)
    return result


def test_exactly_one_compile_per_key_cluster_wide(figures: dict[str, Any]) -> None:
    assert figures["unique_keys"] == 8 + 24 + figures["fresh_kernels"]
    assert figures["compiles"] == figures["unique_keys"], figures["compiles_by_daemon"]
    assert figures["keys_compiled_by_several_daemons"] == 0
    warm = figures["phases"]["warm-up"]
    assert warm["requests"] == 24 * 5 and warm["errors"] == 0


def test_hits_after_warm_up(figures: dict[str, Any]) -> None:
    steady = figures["phases"]["steady"]
    assert figures["hit_ratio_after_warmup"] >= 0.99
    assert steady["tiers"]["compiled"] == 0 and steady["errors"] == 0 and steady["requests"] > 0
    assert steady["redis_round_trips_per_request"] <= 2, steady  # every request of the phase is a hit


def test_a_daemon_killed_mid_run_loses_no_request_and_no_entry(figures: dict[str, Any]) -> None:
    kill = figures["kill"]
    assert kill["daemon"] and kill["clients"] >= 1
    assert kill["requests_failed"] == 0, kill["errors"]
    assert kill["failed_over"] >= 1 and kill["first_answer_after_kill_max_ms"] < 5000
    assert kill["stored_before"] >= 8 + 24
    assert kill["retrievable_after"] == kill["in_redis_after"] == kill["stored_before"]
