"""How `@despina.autotune` picks a config on the GPU, once per tuning key for every process.

With a daemon (DESPINA_SERVER), one request asks it for the tuning (a lookup: a hit costs no compile
and no benchmark); on a miss a second carries every config's IR, launch options and grid, and the
arguments (zeros of the right dtype and size on the daemon's GPU, or copies for `restore_value`; the
`reset_to_zero` ones zeroed before every run), and the daemon compiles them at once, measures them
and keeps the winner for the cluster. A daemon that cannot measure for this GPU answers every
config's kernel: they are measured here and the record is sent back for the others.

Without a daemon, the configs are compiled at once in worker processes and each is measured here as its
compile lands (the GPU measures the quick compiles while the workers finish the slow ones); the
record is kept on disk (`$DESPINA_CACHE_DIR/tunings`, `despina tune ls`): the next process with the
same kernel, configs, key values, argument dtypes and alignment, GPU and driver reads it back.

A terminal shows a progress line (configs compiled, measured, the best so far); DESPINA_PRINT_AUTOTUNING=1
prints every config's time and the choice, as Triton does.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .arguments import zero_buffer
from .runtime import env
from .runtime.tunings import Tuning, TuningFiles, tuning_key
from .tuning_key import client_key

if TYPE_CHECKING:
    from despina.compiler.ir.core import Module
    from despina.compiler.options import CompileOptions

    from .autotuner import Autotuner, Config
    from .jit import JITFunction
    from .remote import RemoteKernel
    from .runtime.driver import Device
    from .specialization import Specialization


def supported(at: Autotuner) -> bool:
    """Whether `at` tunes through here: a @jit kernel under it (not another decorator), launched on the GPU."""
    from .jit import JITFunction, interpret_default

    fn = at.fn
    return isinstance(fn, JITFunction) and not (fn.interpret if fn.interpret is not None else interpret_default())


def choose(at: Autotuner, configs: Sequence[Config], args: Sequence[Any], kwargs: dict[str, Any], grid: Any,
           named: dict[str, Any]) -> Config:
    """The fastest of `configs` for this call (see the module docstring); sets `at.configs_timings`."""
    from . import remote
    from .runtime import driver

    start = time.perf_counter()
    fn: JITFunction = at.fn
    context = driver.current_context()
    device = driver.context_device(context)
    ckey = client_key(at, configs, named)
    labels = [repr(c) for c in configs]
    progress = Progress(at.__name__, len(configs))
    try:
        url = remote.server()
        tuning, kernel = None, None
        if url is not None:
            tuning, kernel = _on_daemon(url, at, configs, args, kwargs, grid, named, ckey, device, progress)
        if tuning is None:
            tuning = _here(at, configs, args, kwargs, grid, named, ckey, device, progress)
    finally:
        progress.close()
    if tuning.labels != labels:
        raise RuntimeError(f"autotune of '{fn.__name__}': the tuning record {tuning.key} names other configs than "
                           "the kernel's; clear it with `despina tune clear {tuning.key}`")
    at.configs_timings = {c: t for c, t in zip(configs, tuning.timings_ms) if t is not None}
    if env.flag("DESPINA_PRINT_AUTOTUNING"):
        print_table(at.__name__, at._key(named), configs, tuning, time.perf_counter() - start)
    if kernel is not None:
        adopt(fn, configs[tuning.winner], args, kwargs, grid, kernel, context, device)
    return configs[tuning.winner]


def adopt(fn: JITFunction, config: Config, args: Sequence[Any], kwargs: dict[str, Any], grid: Any,
          kernel: RemoteKernel, context: int, device: Device) -> None:
    """Load the daemon's kernel of the winner as the launch of its specialization here, so that the launch
    that follows neither traces the kernel nor asks the daemon to compile it: the tuning key covers all
    that the kernel's code depends on (`despina.tuning_key`), so it is the kernel this process would compile."""
    from .tuning_key import used_constexprs

    if not fn.cache:  # not traced yet: the constexpr globals a launch checks, as tracing would record them
        fn.used_globals.update(used_constexprs(fn))
    spec, _, _, _ = specialization(fn, config, args, kwargs, grid)
    dispatcher = fn._dispatcher or fn._gpu_dispatcher()
    dispatcher.adopt(spec, str(kernel.metadata.get("name", fn.__name__)), kernel.image, kernel.metadata, context, device)


# ---- one config as the launch would compile it ----------------------------------------------------------


def specialize(fn: JITFunction, config: Config, args: Sequence[Any], kwargs: dict[str, Any],
               grid: Any) -> tuple[Module, CompileOptions, tuple[int, int, int], dict[str, Any]]:
    """(module, compile options, grid, bound arguments) of `config` for this call, as the GPU launch makes them."""
    spec, options, dims, bound = specialization(fn, config, args, kwargs, grid)
    module = fn.ir(spec, options)
    return module, options, dims, bound


def specialization(fn: JITFunction, config: Config, args: Sequence[Any], kwargs: dict[str, Any],
                   grid: Any) -> tuple[Specialization, CompileOptions, tuple[int, int, int], dict[str, Any]]:
    """(specialization, options, grid, bound arguments) of `config` for this call, as the GPU launch
    makes them; nothing traced."""
    from despina import arguments
    from despina.language.core import unwrap

    from .runtime.dispatch import _Addressed
    from .runtime.pointers import device_pointer
    from .specialization import LAUNCH_OPTIONS
    from .tools.tensor_descriptor import expand

    call_kwargs = {**kwargs, **config.all_kwargs()}
    launch = {k: call_kwargs.pop(k) for k in LAUNCH_OPTIONS if k in call_kwargs and k not in fn.arg_names}
    options = fn.options(launch, interpret=False)
    bound = fn.bind(args, call_kwargs)
    flat = expand(bound)  # a TensorDescriptor as its base, shape and strides
    addresses = {n: device_pointer(unwrap(v), n, fn.__name__) for n, v in flat.items()
                 if n not in fn.constexpr_names and arguments.is_array(unwrap(v))}
    spec = fn.specialize({n: _Addressed(unwrap(v), addresses[n]) if n in addresses else v for n, v in flat.items()},
                         options)
    return spec, options, fn._grid(grid, bound, launch), flat


# ---- here: compiled in worker processes, measured here, kept on disk ------------------------------------


def _here(at: Autotuner, configs: Sequence[Config], args: Sequence[Any], kwargs: dict[str, Any], grid: Any,
          named: dict[str, Any], ckey: str, device: Any, progress: Progress) -> Tuning:
    from .runtime import driver, kernels
    from .runtime.cache import cache_dir

    start = time.perf_counter()
    key = tuning_key(ckey, device.name, driver.version())
    files = TuningFiles(cache_dir() / "tunings")
    found = files.get(key)
    if found is not None:
        return found
    items = []
    for c in configs:
        module, options, _, _ = specialize(at.fn, c, args, kwargs, grid)
        items.append((module, options, device.target))
    timings: list[float | None] = [None for _ in configs]
    errors: list[str | None] = [None for _ in configs]

    def landed(i: int, error: str | None) -> None:
        progress.compiled()
        timings[i], errors[i] = _timed(at, configs[i], args, kwargs, grid, named, progress, error)

    kernels.prepare(items, landed)
    tuning = _record(at, configs, timings, errors, named, key, device, [], start)
    files.put(tuning)
    return tuning


def _timed(at: Autotuner, c: Config, args: Sequence[Any], kwargs: dict[str, Any], grid: Any, named: dict[str, Any],
           progress: Progress, error: str | None) -> tuple[float | None, str | None]:
    """`c`'s time in ms measured here (unless its compile failed with `error`), or why it was dropped."""
    ms = None
    if error is None:
        try:
            ms = at._bench(c, args, kwargs, grid, named)
        except Exception as e:
            error = f"{type(e).__name__}: {e}"
    progress.measured(ms, c)
    return ms, error


def _record(at: Autotuner, configs: Sequence[Config], timings: list[float | None], errors: list[str | None],
            named: dict[str, Any], key: str, device: Any, compile_keys: list[str], start: float) -> Tuning:
    """The record of `configs` measured (configs that fail are dropped with the reason)."""
    from .runtime import driver

    for n in at.reset_to_zero:
        zero_buffer(named[n])
    measured = [i for i, t in enumerate(timings) if t is not None]
    if not measured:
        raise RuntimeError(f"autotune of '{at.__name__}': none of its {len(configs)} configs could be compiled and "
                           "measured:\n" + "\n".join(f"  {c}: {e}" for c, e in zip(configs, errors)))
    winner = min(measured, key=lambda i: timings[i] or 0.0)
    return Tuning(key, at.__name__, [repr(c) for c in configs], timings, errors, winner, device.name, driver.version(),
                  "client", compile_keys, round(time.perf_counter() - start, 6))


# ---- on the daemon ------------------------------------------------------------------------------------


def _on_daemon(url: str, at: Autotuner, configs: Sequence[Config], args: Sequence[Any], kwargs: dict[str, Any],
               grid: Any, named: dict[str, Any], ckey: str, device: Any,
               progress: Progress) -> tuple[Tuning | None, RemoteKernel | None]:
    """The daemon's tuning and its winner's kernel (None when the daemon no longer holds it, or measured
    here); (None, None) when it cannot be reached (tuned here then, as a compile would be)."""
    from . import remote
    from .remote_tuning import CallCandidate, TuneCall, report, tune
    from .runtime import driver

    start = time.perf_counter()
    call = TuneCall(ckey, at.__name__, target=device.target, device=device.name, driver_version=driver.version(),
                    warmup_ms=float(at.warmup), rep_ms=float(at.rep))
    try:
        answer = tune(url, call)
    except remote.ServerUnavailable:
        if remote._required():
            raise
        return None, None
    except remote.RemoteError as e:
        if e.code != "NOT_FOUND":
            raise
        progress.remote(url)
        candidates = []
        for c in configs:
            module, options, dims, bound = specialize(at.fn, c, args, kwargs, grid)
            candidates.append(CallCandidate(remote._encode(module), options,
                                            tuple(d for d in dims), repr(c)))
        values, restore = _arguments_for(at, module, bound)
        answer = tune(url, dataclasses.replace(call, candidates=candidates, args=values, restore=restore))
    if answer.tuning is not None:
        return answer.tuning, answer.kernel
    # A daemon that cannot measure for this GPU: its kernels measured here, the record sent back.
    for _ in configs:
        progress.compiled()
    keys = [str(k.metadata.get("service", {}).get("key", "")) if k is not None else "" for k in answer.kernels]
    measured = [_timed(at, c, args, kwargs, grid, named, progress, e) for c, e in zip(configs, answer.errors)]
    tuning = _record(at, configs, [ms for ms, _ in measured], [e for _, e in measured], named, answer.key, device,
                     keys, start)
    return report(url, ckey, tuning), None


def _arguments_for(at: Autotuner, module: Module, bound: dict[str, Any]) -> tuple[list[Any], list[int]]:
    """The kernel's runtime arguments as a tuning request carries them: a copy of each `restore_value`
    buffer, zeros of the right dtype and size for the others (put back before every run for
    `reset_to_zero`), and the numbers."""
    from despina.compiler.ir.types import PointerType, ScalarType
    from despina.language.core import unwrap

    from .remote import RemoteBuffer
    from .remote_tuning import Synthetic
    from .runtime import driver
    from .runtime.pointers import pointer_of

    values: list[Any] = []
    restore: list[int] = []
    kernel = module.kernel
    for i, (name, param) in enumerate(zip(kernel.arg_names, kernel.args)):
        v = unwrap(bound[name])
        if isinstance(param.type, PointerType):
            elem = param.type.element_ty
            count = _span(v)
            if name in at.restore_value:
                data = driver.read(pointer_of(v), count * elem.itemsize) if count else b""
                values.append(RemoteBuffer(data, str(elem), (count,)))
            else:
                values.append(Synthetic(str(elem), (count,)))
            if name in at.restore_value or name in at.reset_to_zero:
                restore.append(i)
        elif isinstance(param.type, ScalarType) and param.type.is_floating():
            values.append(float(v))
        else:
            n = int(v)
            values.append(n - (1 << 64) if n >= 1 << 63 else n)
    return values, restore


def _span(array: Any) -> int:
    """Elements from an array's first to its last (all of a contiguous one)."""
    shape = tuple(int(s) for s in getattr(array, "shape", ()))
    if any(s == 0 for s in shape):
        return 0
    strides = array.stride() if callable(getattr(array, "stride", None)) else None
    if strides is None:
        count = 1
        for s in shape:
            count *= s
        return count
    return 1 + sum((s - 1) * abs(int(st)) for s, st in zip(shape, strides))


# ---- what the user sees ---------------------------------------------------------------------------------


class Progress:
    """One line on a terminal (stderr), rewritten as configs are compiled and measured; nothing otherwise."""

    def __init__(self, kernel: str, total: int) -> None:
        self.kernel, self.total = kernel, total
        self.on = sys.stderr.isatty() and not env.flag("DESPINA_PRINT_AUTOTUNING")
        self.done_compiling = self.done_measuring = 0
        self.best: tuple[float, str] | None = None
        self.where = ""
        self.shown = False

    def compiled(self) -> None:
        self.done_compiling += 1
        self._show()

    def measured(self, ms: float | None, config: Any) -> None:
        self.done_measuring += 1
        if ms is not None and (self.best is None or ms < self.best[0]):
            self.best = (ms, repr(config))
        self._show()

    def remote(self, url: str) -> None:
        self.where = f" on {url}"
        self._show()

    def _show(self) -> None:
        if not self.on:
            return
        best = f", best {self.best[0]:.4f} ms {self.best[1]}" if self.best else ""
        if self.where and not self.done_compiling:
            line = f"autotune {self.kernel}: {self.total} configs compiling and measuring{self.where}"
        else:
            line = (f"autotune {self.kernel}: compiled {self.done_compiling}/{self.total}, measured "
                    f"{self.done_measuring}/{self.total}{best}")
        sys.stderr.write("\r\x1b[K" + line[:200])
        sys.stderr.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def print_table(kernel: str, key: Any, configs: Sequence[Config], tuning: Tuning, seconds: float) -> None:
    """Every config's time (or why it was dropped) and the choice, on stdout as Triton prints them."""
    for c, ms, error in zip(configs, tuning.timings_ms, tuning.errors):
        shown = f"{ms:.4f} ms" if ms is not None else f"dropped: {error}"
        print(f"Autotuning kernel {kernel} with config {_plain(c)}: {shown}")
    print(f"Despina autotuning for function {kernel},\nwith key as {tuple(key)},\nfinished after {seconds:.2f}s "
          f"(measured by the {tuning.measured_by}{' on ' + tuning.device if tuning.device else ''}),\n"
          f"best config selected: {_plain(configs[tuning.winner])};")


def _plain(c: Config) -> str:
    meta = ", ".join(f"{k}: {v}" for k, v in c.kwargs.items())
    return f"{meta}, num_warps: {c.num_warps}, num_ctas: {c.num_ctas}, num_stages: {c.num_stages}, maxnreg: {c.maxnreg}"
