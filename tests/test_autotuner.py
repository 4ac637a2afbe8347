"""`despina.autotune`, `despina.Config` and `despina.heuristics`, run in the interpreter."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import despina
import despina.language as tl


class FakeBench:
    """A `do_bench` that runs the call once and reports preset timings, in order of the configs."""

    def __init__(self, timings: dict[int, float]) -> None:
        self.timings = timings
        self.calls: list[int] = []
        self.block = 0

    def __call__(self, fn) -> float:
        fn()
        self.calls.append(self.block)
        return self.timings[self.block]

    def hook(self, meta) -> None:
        self.block = meta["BLOCK"]


def make_kernel(bench: FakeBench, key=("n",), **autotune_kwargs):
    configs = [despina.Config({"BLOCK": b}, num_warps=4 if b < 64 else 8, pre_hook=bench.hook) for b in (16, 32, 64)]

    @despina.autotune(configs=configs, key=list(key), do_bench=bench, **autotune_kwargs)
    @despina.jit
    def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)

    return scale_kernel


def grid(meta):
    return (despina.cdiv(meta["n"], meta["BLOCK"]),)


def test_autotune_runs_every_config_and_keeps_the_fastest(device):
    bench = FakeBench({16: 3.0, 32: 1.0, 64: 2.0})
    kernel = make_kernel(bench)
    x = np.arange(100, dtype=np.float32)
    out = device.zeros(100, "fp32")
    kernel[grid](device.put(x), out, 100)
    np.testing.assert_array_equal(device.get(out), x * 2)
    assert sorted(bench.calls) == [16, 32, 64]
    assert kernel.best_config.kwargs == {"BLOCK": 32} and kernel.best_config.num_warps == 4
    assert set(kernel.configs_timings.values()) == {1.0, 2.0, 3.0}


def test_tuning_is_cached_per_key(device):
    bench = FakeBench({16: 3.0, 32: 1.0, 64: 2.0})
    kernel = make_kernel(bench)
    x = np.arange(200, dtype=np.float32)
    out = device.zeros(200, "fp32")
    kernel[grid](device.put(x), out, 100)
    kernel[grid](device.put(x), out, 100)
    assert len(bench.calls) == 3
    bench.timings = {16: 0.5, 32: 1.0, 64: 2.0}
    kernel[grid](device.put(x), out, 200)
    assert len(bench.calls) == 6 and kernel.best_config.kwargs == {"BLOCK": 16}
    np.testing.assert_array_equal(device.get(out), x * 2)
    kernel[grid](device.put(x), out, 100)
    assert len(bench.calls) == 6 and kernel.best_config.kwargs == {"BLOCK": 32}


def test_argument_dtypes_are_part_of_the_tuning_key(device):
    bench = FakeBench({16: 3.0, 32: 1.0, 64: 2.0})
    kernel = make_kernel(bench)
    kernel[grid](device.put(np.ones(64, np.float32)), device.zeros(64, "fp32"), 64)
    kernel[grid](device.put(np.ones(64, np.float64)), device.zeros(64, "fp64"), 64)
    assert len(bench.calls) == 6


def test_prune_configs_by_early_prune_and_perf_model(device):
    bench = FakeBench({16: 3.0, 32: 1.0, 64: 2.0})
    seen = {}

    def early(configs, named):
        seen["n"] = named["n"]
        return [c for c in configs if c.kwargs["BLOCK"] != 32]

    def perf_model(**meta):
        return {16: 1.0, 32: 0.0, 64: 5.0}[meta["BLOCK"]]

    kernel = make_kernel(bench, prune_configs_by={"early_config_prune": early, "perf_model": perf_model, "top_k": 1})
    out = device.zeros(64, "fp32")
    kernel[grid](device.put(np.ones(64, np.float32)), out, 64)
    assert seen["n"] == 64
    assert bench.calls == [] and kernel.best_config.kwargs == {"BLOCK": 16}
    np.testing.assert_array_equal(device.get(out), 2)


def test_prune_top_k_fraction(device):
    bench = FakeBench({16: 3.0, 32: 1.0, 64: 2.0})
    kernel = make_kernel(bench, prune_configs_by={"perf_model": lambda **meta: -meta["BLOCK"], "top_k": 0.67})
    kernel[grid](device.put(np.ones(64, np.float32)), device.zeros(64, "fp32"), 64)
    assert sorted(bench.calls) == [32, 64]
    assert kernel.best_config.kwargs == {"BLOCK": 32}


@despina.jit
def accumulate_kernel(out_ptr, x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.atomic_add(out_ptr + offs % 4, tl.load(x_ptr + offs, mask=mask), mask=mask)


@despina.jit
def increment_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)


CONFIGS = [despina.Config({"BLOCK": 16}), despina.Config({"BLOCK": 32})]


def test_reset_to_zero_leaves_only_the_real_launch_in_the_output(device):
    tuned = despina.autotune(CONFIGS, key=["n"], reset_to_zero=["out_ptr"], warmup=1, rep=1)(accumulate_kernel)
    out = device.zeros(4, "fp32")
    tuned[grid](out, device.put(np.ones(64, np.float32)), 64)
    np.testing.assert_array_equal(device.get(out), 16)


def test_restore_value_undoes_the_trials(device):
    tuned = despina.autotune(CONFIGS, key=["n"], restore_value=["x_ptr"], warmup=1, rep=1)(increment_kernel)
    x = device.put(np.zeros(40, np.int32))
    tuned[grid](x, 40)
    np.testing.assert_array_equal(device.get(x), 1)
    tuned[grid](x, 40)
    np.testing.assert_array_equal(device.get(x), 2)


def test_without_restore_value_the_trials_show(device):
    tuned = despina.autotune(CONFIGS, key=["n"], warmup=1, rep=1)(increment_kernel)
    x = device.put(np.zeros(40, np.int32))
    tuned[grid](x, 40)
    assert device.get(x)[0] > 1


def test_single_config_runs_without_benchmarking(device):
    bench = FakeBench({})
    tuned = despina.autotune([despina.Config({"BLOCK": 64}, num_warps=2)], key=[], do_bench=bench)(increment_kernel)
    x = device.put(np.zeros(10, np.int32))
    tuned[grid](x, 10)
    np.testing.assert_array_equal(device.get(x), 1)
    assert bench.calls == [] and tuned.best_config.num_warps == 2


def test_autotune_errors():
    with pytest.raises(ValueError, match="autotune names 'm', which is not a parameter of 'increment_kernel'"):
        despina.autotune(CONFIGS, key=["m"])(increment_kernel)
    with pytest.raises(ValueError, match="autotune needs at least one Config"):
        despina.autotune([], key=["n"])(increment_kernel)
    tuned = despina.autotune(CONFIGS, key=["n"], prune_configs_by={"early_config_prune": lambda c, a: []})(
        increment_kernel)
    with pytest.raises(ValueError, match="every config was pruned"):
        tuned[grid](np.zeros(4, np.int32), 4)


def test_config():
    config = despina.Config({"BLOCK": 128, "GROUP": 8}, num_warps=8, num_stages=2)
    assert config.all_kwargs() == {"BLOCK": 128, "GROUP": 8, "num_warps": 8, "num_stages": 2, "num_ctas": 1}
    assert despina.Config({}, maxnreg=64).all_kwargs()["maxnreg"] == 64
    assert repr(config) == "Config(BLOCK: 128, GROUP: 8, num_warps: 8, num_stages: 2)"


@despina.heuristics({"BLOCK": lambda args: despina.next_power_of_2(args["n"]),
                     "EVEN": lambda args: args["n"] % 2 == 0})
@despina.jit
def heuristic_kernel(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.full((BLOCK,), 2 if EVEN else 1, tl.int32), mask=offs < n)


@pytest.mark.parametrize("n", [5, 8])
def test_heuristics_compute_meta_parameters(device, n):
    x = device.zeros(8, "int32")
    heuristic_kernel[(1,)](x, n)
    np.testing.assert_array_equal(device.get(x)[:n], 2 if n % 2 == 0 else 1)
    np.testing.assert_array_equal(device.get(x)[n:], 0)


def test_heuristics_under_autotune(device):
    bench = FakeBench({16: 2.0, 32: 1.0})

    @despina.autotune([despina.Config({"BLOCK": 16}, pre_hook=bench.hook), despina.Config({"BLOCK": 32}, pre_hook=bench.hook)],
                      key=["n"], do_bench=bench)
    @despina.heuristics({"SCALE": lambda args: args["BLOCK"] // 16})
    @despina.jit
    def kernel(x_ptr, n, BLOCK: tl.constexpr, SCALE: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.full((BLOCK,), SCALE, tl.int32), mask=offs < n)

    x = device.zeros(64, "int32")
    kernel[grid](x, 64)
    assert kernel.best_config.kwargs == {"BLOCK": 32}
    np.testing.assert_array_equal(device.get(x), 2)


def test_a_config_naming_a_parameter_the_kernel_lacks_is_refused_up_front():
    @despina.jit
    def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    configs = [despina.Config({"BLOCK": 32}), despina.Config({"BLOCK": 64, "BLOCK_N": 8})]
    with pytest.raises(ValueError, match=r"config 1 \(Config\(BLOCK: 64, BLOCK_N: 8.*sets 'BLOCK_N', which is not a "
                                         r"parameter of the kernel \(x_ptr, out_ptr, n, BLOCK\)"):
        despina.autotune(configs=configs, key=["n"])(copy_kernel)


def test_no_configs_is_refused():
    with pytest.raises(ValueError, match="at least one Config"):
        despina.autotune(configs=[], key=[])(despina.jit(lambda x: None))


@pytest.mark.parametrize("value, shown", [(None, True), ("1", False), ("0", True)])
def test_progress_line_gives_way_to_the_printed_table(value: str | None, shown: bool,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal the progress line shows unless DESPINA_PRINT_AUTOTUNING=1 prints the table instead
    (the setting read as the environment stores it: a str here once crashed the GPU path)."""
    from despina import tuning

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    if value is None:
        monkeypatch.delenv("DESPINA_PRINT_AUTOTUNING", raising=False)
    else:
        monkeypatch.setenv("DESPINA_PRINT_AUTOTUNING", value)
    assert tuning.Progress("k", 3).on is shown
