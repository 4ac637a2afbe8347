"""`@despina.autotune`, `@despina.heuristics` and `despina.Config`, with Triton's signatures.

    @despina.autotune(configs=[despina.Config({"BLOCK": 128}, num_warps=4),
                               despina.Config({"BLOCK": 1024}, num_warps=8)], key=["n"])
    @despina.jit
    def kernel(x_ptr, n, BLOCK: tl.constexpr): ...

The first launch for each value of the `key` arguments (and the argument dtypes) runs every
surviving config, keeps the fastest, and later launches with that key reuse it. On the GPU the configs
are compiled at once and the choice is kept beyond the process: on the daemon (DESPINA_SERVER), which
tunes for the whole cluster, or on disk (`despina tune ls`); see `despina.tuning`.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any

from despina.compiler.options import DEFAULTS

from . import tuning
from .arguments import copy_buffer, restore_buffer, zero_buffer
from .testing import do_bench


class Config:
    """One point of an autotuning space: meta-parameters plus launch options."""

    def __init__(self, kwargs: dict[str, Any], num_warps: int = DEFAULTS.num_warps,
                 num_stages: int = DEFAULTS.num_stages, num_ctas: int = DEFAULTS.num_ctas,
                 maxnreg: int | None = DEFAULTS.maxnreg, pre_hook: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.kwargs = dict(kwargs)
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.num_ctas = num_ctas
        self.maxnreg = maxnreg
        self.pre_hook = pre_hook

    def all_kwargs(self) -> dict[str, Any]:
        options = {"num_warps": self.num_warps, "num_stages": self.num_stages, "num_ctas": self.num_ctas}
        if self.maxnreg is not None:
            options["maxnreg"] = self.maxnreg
        return {**self.kwargs, **options}

    def __repr__(self) -> str:
        meta = ", ".join(f"{k}: {v}" for k, v in self.kwargs.items())
        return f"Config({meta}, num_warps: {self.num_warps}, num_stages: {self.num_stages})"


class _Wrapper:
    """Shared shape of decorators stacked on a kernel: `kernel[grid](...)` and `.run`."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.arg_names: list[str] = list(fn.arg_names)
        self.__name__ = getattr(fn, "__name__", "kernel")

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return lambda *args, **kwargs: self.run(*args, grid=grid, **kwargs)

    def named_args(self, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        named = dict(zip(self.arg_names, args))
        named.update(kwargs)
        return named

    def run(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


class Autotuner(_Wrapper):
    def __init__(self, fn: Any, configs: Sequence[Config], key: Sequence[str], prune_configs_by: dict[str, Any] | None,
                 reset_to_zero: Sequence[str] | None, restore_value: Sequence[str] | None,
                 do_bench: Callable[..., float] | None, warmup: int, rep: int) -> None:
        super().__init__(fn)
        if not configs:
            raise ValueError("autotune needs at least one Config")
        self.configs = list(configs)
        self.key = list(key)
        for name in self.key + list(reset_to_zero or []) + list(restore_value or []):
            if name not in self.arg_names:
                raise ValueError(f"autotune names '{name}', which is not a parameter of '{self.__name__}'")
        for i, config in enumerate(self.configs):
            unknown = [k for k in config.kwargs if k not in self.arg_names]
            if unknown:
                raise ValueError(f"autotune of '{self.__name__}': config {i} ({config}) sets {', '.join(map(repr, unknown))}"
                                 f", which {'is not a parameter' if len(unknown) == 1 else 'are not parameters'} of the "
                                 f"kernel ({', '.join(self.arg_names)})")
        prune = prune_configs_by or {}
        self.early_config_prune = prune.get("early_config_prune")
        self.perf_model = prune.get("perf_model")
        self.top_k = prune.get("top_k", 1.0)
        self.reset_to_zero = list(reset_to_zero or [])
        self.restore_value = list(restore_value or [])
        self.bench = do_bench
        self.warmup = warmup
        self.rep = rep
        self.cache: dict[tuple[Any, ...], Config] = {}
        self.best_config: Config | None = None
        self.configs_timings: dict[Config, float] = {}

    def _key(self, named: dict[str, Any]) -> tuple[Any, ...]:
        values = [named.get(k) for k in self.key]
        dtypes = [str(v.dtype) for v in named.values() if hasattr(v, "dtype") and hasattr(v, "shape")]
        return tuple(v if isinstance(v, (int, float, str, bool, type(None))) else repr(v) for v in values) + tuple(dtypes)

    def prune_configs(self, named: dict[str, Any]) -> list[Config]:
        configs = self.configs
        if self.early_config_prune is not None:
            configs = list(self.early_config_prune(configs, named))
        if self.perf_model is not None and len(configs) > 1:
            top_k = self.top_k
            if isinstance(top_k, float) and top_k <= 1.0:
                top_k = builtins.max(1, int(len(configs) * top_k))
            estimates = {c: self.perf_model(**named, **c.all_kwargs()) for c in configs}
            configs = sorted(configs, key=lambda c: estimates[c])[: int(top_k)]
        if not configs:
            raise ValueError(f"autotune of '{self.__name__}': every config was pruned")
        return configs

    def _bench(self, config: Config, args: Sequence[Any], kwargs: dict[str, Any], grid: Any, named: dict[str, Any]) -> float:
        saved = {n: copy_buffer(named[n]) for n in self.restore_value}

        def call() -> None:
            for n in self.reset_to_zero:
                zero_buffer(named[n])
            if config.pre_hook is not None:
                config.pre_hook({**named, **config.all_kwargs()})
            self.fn.run(*args, grid=grid, **kwargs, **config.all_kwargs())

        try:
            bench = self.bench or (lambda f: do_bench(f, warmup=self.warmup, rep=self.rep))
            return float(bench(call))
        finally:
            for n, value in saved.items():
                restore_buffer(named[n], value)

    def run(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        named = self.named_args(args, kwargs)
        key = self._key(named)
        config = self.cache.get(key)
        if config is None:
            configs = self.prune_configs(named)
            if len(configs) == 1:
                config = configs[0]
            elif tuning.supported(self):
                config = tuning.choose(self, configs, args, kwargs, grid, named)
            else:
                self.configs_timings = {c: self._bench(c, args, kwargs, grid, named) for c in configs}
                config = builtins.min(self.configs_timings, key=lambda c: self.configs_timings[c])
                for n in self.reset_to_zero:
                    zero_buffer(named[n])
            self.cache[key] = config
        self.best_config = config
        if config.pre_hook is not None:
            config.pre_hook({**named, **config.all_kwargs()})
        return self.fn.run(*args, grid=grid, **kwargs, **config.all_kwargs())


def autotune(configs: Sequence[Config], key: Sequence[str], prune_configs_by: dict[str, Any] | None = None,
             reset_to_zero: Sequence[str] | None = None, restore_value: Sequence[str] | None = None,
             warmup: int = 25, rep: int = 100, do_bench: Callable[..., float] | None = None,
             use_cuda_graph: bool = False) -> Callable[[Any], Autotuner]:
    """Pick the fastest of `configs` per value of the `key` arguments (see the module docstring)."""

    def decorate(fn: Any) -> Autotuner:
        return Autotuner(fn, configs, key, prune_configs_by, reset_to_zero, restore_value, do_bench, warmup, rep)

    return decorate


class Heuristics(_Wrapper):
    def __init__(self, fn: Any, values: dict[str, Callable[[dict[str, Any]], Any]]) -> None:
        super().__init__(fn)
        self.values = values

    def run(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        named = self.named_args(args, kwargs)
        for name, rule in self.values.items():
            kwargs[name] = rule(named)
            named[name] = kwargs[name]
        return self.fn.run(*args, grid=grid, **kwargs)


def heuristics(values: dict[str, Callable[[dict[str, Any]], Any]]) -> Callable[[Any], Heuristics]:
    """Compute meta-parameters from the other arguments:
    `@despina.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})`."""

    def decorate(fn: Any) -> Heuristics:
        return Heuristics(fn, values)

    return decorate
