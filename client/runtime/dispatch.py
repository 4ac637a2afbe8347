"""The GPU launch path of a JITFunction: `kernel[grid](...)` in a few microseconds.

The fast path is one generated function per kernel (`scan`, with the kernel's own signature, so
Python binds the arguments and applies defaults) that reads each argument once: its
classification (`pointers.classify`: type, and what specialization reads from it) goes into the
key, its launch value (device address or scalar) into a list. The key finds a ready Entry in a
per-kernel dict; the launch is then one `struct.pack_into` into this thread's frame and one
cuLaunchKernelEx. Everything else (binding errors, specialization, compilation, loading, clear
errors) happens on the slow path through the JITFunction, which stays the owner of
specialization; the slow path files the call's key so that the next call like it is fast.
"""

from __future__ import annotations

import inspect
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from despina import arguments
from despina.language.core import unwrap

from . import driver, env, kernels, libcuda, pointers
from .driver import LastLaunch
from .launcher import Launcher, grid_dims, stream_handle, torch_stream_getter
from .pointers import device_pointer, is_torch

if TYPE_CHECKING:
    from despina.compiler.ir.core import Module
    from despina.jit import JITFunction, Options, Specialization


class _Addressed:
    """An array as `specialize` sees it on a GPU launch: its dtype, shape and device address (which
    `arguments.data_ptr` cannot read from a DLPack-only array)."""

    def __init__(self, array: Any, pointer: int) -> None:
        self.dtype = array.dtype
        self.shape = tuple(getattr(array, "shape", ()))
        self.pointer = pointer

    def data_ptr(self) -> int:
        return self.pointer


class Entry:
    """A call signature's ready launch: the launcher, which of the call's values are its parameters
    (`pick`, None when all of them in order), where the stream comes from, and the globals it was
    compiled with (None when it uses none)."""

    __slots__ = ("launcher", "struct", "launch_ex", "handle", "threads", "shared", "local", "name", "pick",
                 "torch_device", "torch_stream", "globals")

    def __init__(self, launcher: Launcher, pick: list[int] | None, torch_device: int | None,
                 globals_: dict[str, Any] | None) -> None:
        self.launcher = launcher
        self.struct, self.launch_ex, self.handle = launcher.struct, launcher.launch_ex, launcher.handle
        self.threads, self.shared, self.local, self.name = launcher.threads, launcher.shared, launcher.local, launcher.name
        self.pick = pick
        self.torch_device = torch_device
        self.torch_stream: Callable[[int], int] | None = torch_stream_getter() if torch_device is not None else None
        self.globals = globals_


class Dispatcher:
    """`kernel[grid](...)` on the GPU for one JITFunction. `entries` maps call keys to ready launches;
    `launchers` maps (specialization key, context) to loaded kernels; `slow_calls` counts slow paths."""

    def __init__(self, fn: JITFunction, lib: libcuda.LibCuda | None = None) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.lib = lib or libcuda.get()
        self.scan, self.meta = make_scan(fn, self.lib.current_context)
        self.entries: dict[tuple[Any, ...], Entry] = {}
        self.launchers: dict[tuple[Any, ...], Launcher] = {}
        self.slow_calls = 0

    def launch(self, args: tuple[Any, ...], kwargs: dict[str, Any], grid: Any) -> None:
        """Launch the kernel for this call: the hot path, kept to straight-line code on purpose."""
        try:
            key, values, stream = self.scan(*args, **kwargs)
            e = self.entries[key]
        except Exception:  # a new signature, or an argument only the slow path takes or explains
            return self.slow(args, kwargs, grid)
        if e.globals is not None and e.globals != self.fn._current_globals():
            return self.slow(args, kwargs, grid)
        if grid.__class__ is tuple and len(grid) == 1:
            x, y, z = grid[0], 1, 1
        else:
            x, y, z = grid_dims(grid(self.meta(*args, **kwargs)) if callable(grid) else grid)
        if not (x and y and z):
            return
        if stream is None:
            stream = 0 if e.torch_stream is None else e.torch_stream(e.torch_device)  # type: ignore[arg-type]
        elif stream.__class__ is not int:
            stream = stream_handle(stream)
        if e.pick is not None:
            values = [values[i] for i in e.pick]
        try:
            frame = e.local.frame
        except AttributeError:
            frame = e.launcher.frame()
        try:
            e.struct.pack_into(frame.buffer, 0, x, y, z, e.threads, 1, 1, e.shared, stream, *values)
        except struct.error:  # a grid of negative, float or huge values: the slow path explains or converts
            return self.slow(args, kwargs, grid)
        code = e.launch_ex(frame.config, e.handle, frame.params, None)
        LastLaunch.kernel = e.name
        if code:
            raise e.launcher.error(code, (x, y, z))

    # ---- the slow path -------------------------------------------------------------------------

    def slow(self, args: tuple[Any, ...], kwargs: dict[str, Any], grid: Any) -> None:
        """Bind, specialize, compile and load as needed, launch, and file the call for the fast path."""
        from despina.jit import LAUNCH_OPTIONS

        self.slow_calls += 1
        fn = self.fn
        call_kwargs = dict(kwargs)
        launch = {k: call_kwargs.pop(k) for k in LAUNCH_OPTIONS if k in call_kwargs and k not in fn.arg_names}
        stream = launch.get("stream")
        options = fn.options(launch, interpret=False)
        bound = fn.bind(args, call_kwargs)
        addresses = {name: device_pointer(unwrap(v), name, self.name) for name, v in bound.items()
                     if name not in fn.constexpr_names and arguments.is_array(unwrap(v))}
        spec = fn.specialize({n: _Addressed(unwrap(v), addresses[n]) if n in addresses else v for n, v in bound.items()},
                             options)
        dims = fn._grid(grid, bound, launch)
        module = fn.ir(spec, options)
        context = driver.current_context()  # only now: the errors above need no GPU
        device = driver.context_device(context)
        launcher = self.launcher(spec, module, options, context, device)
        torch_device = device.ordinal if any(is_torch(unwrap(v)) for v in bound.values()) else None
        entry = self.file(args, kwargs, launcher, torch_device)
        if 0 in dims:
            return
        if stream is None and entry.torch_stream is not None:
            stream = entry.torch_stream(device.ordinal)
        values = {n: addresses[n] if n in addresses else unwrap(bound[n]) for n in launcher.arg_names}
        launcher.launch(dims, values, stream_handle(stream))

    def launcher(self, spec: Specialization, module: Module, options: Options, context: int,
                 device: driver.Device) -> Launcher:
        """The loaded kernel of `spec` in `context`: compiled (or found in a cache) and loaded once."""
        key = (spec.key, context)
        found = self.launchers.get(key)
        if found is None:
            opts = {"num_warps": options.num_warps, "num_stages": options.num_stages, "debug": options.debug}
            binary = kernels.binary(module, opts, device.target)
            meta = binary.metadata
            function = device.load(binary.cubin, binary.name, int(meta.get("shared", 0)),
                                   int(meta.get("num_warps", options.num_warps)), context)
            kernel = module.kernel
            found = self.launchers[key] = Launcher(function, kernel.arg_names, [a.type for a in kernel.args], self.lib)
        return found

    def file(self, args: tuple[Any, ...], kwargs: dict[str, Any], launcher: Launcher, torch_device: int | None) -> Entry:
        """The Entry of this call, stored under its key unless the call has none (an unhashable constant)."""
        fn = self.fn
        globals_ = fn._current_globals() if fn.used_globals else None
        try:
            key, values, _ = self.scan(*args, **kwargs)
            hash(key)
        except Exception:  # no key: calls like this one always take the slow path
            return Entry(launcher, None, torch_device, globals_)
        runtime = [n for n in fn.arg_names if n not in fn.constexpr_names]
        pick: list[int] | None = [runtime.index(n) for n in launcher.arg_names]
        if pick == list(range(len(values))):
            pick = None
        entry = self.entries[key] = Entry(launcher, pick, torch_device, globals_)
        return entry


def make_scan(fn: JITFunction, current_context: Callable[[], int]) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """`scan(*args, **kwargs) -> (key, values, stream)` for `fn`, generated with fn's own signature
    plus the launch options as keyword-only parameters, so that Python itself binds each call; and
    `meta(*args, **kwargs)`, the dict a grid function gets (arguments by name and launch options)."""
    from despina.jit import LAUNCH_OPTIONS

    names = fn.arg_names
    if any(p.kind not in (p.POSITIONAL_OR_KEYWORD, p.POSITIONAL_ONLY) for p in fn.params) or any(
            n.startswith("_d_") for n in names):
        return _no_scan, _no_scan
    namespace: dict[str, Any] = {"_d_get": pointers.CLASSIFIERS.get, "_d_new": pointers.classifier_for,
                                 "_d_ctx": current_context, "_d_env": env.raw, "_d_debug": env.key("DESPINA_DEBUG")}
    by_name = ", ".join(f"{n!r}: {n}" for n in names)
    params, key, values = [], ["_d_ctx()", "_d_env(_d_debug)" if fn.debug is None else "None"], []
    for i, p in enumerate(fn.params):
        if p.default is not inspect.Parameter.empty:
            namespace[f"_d_default{i}"] = p.default
        params.append(p.name + (f"=_d_default{i}" if p.default is not inspect.Parameter.empty else ""))
        if p.name in fn.constexpr_names:
            key += [f"{p.name}.__class__", p.name]
        else:
            key.append(f"_d_k{i}")
            values.append(f"_d_v{i}")
    options = [o for o in LAUNCH_OPTIONS if o not in names]
    body = [f"    _d_k{i}, _d_v{i} = (_d_get({p.name}.__class__) or _d_new({p.name}))({p.name})"
            for i, p in enumerate(fn.params) if p.name not in fn.constexpr_names]
    key += [o for o in options if o != "stream"]
    source = (f"def scan({', '.join(params + ['*'] + [f'{o}=None' for o in options])}):\n" + "\n".join(body) +
              f"\n    return ({', '.join(key)},), [{', '.join(values)}], {'stream' if 'stream' in options else 'None'}\n"
              f"def meta({', '.join(params)}, **_d_launch):\n    return {{{by_name}, **_d_launch}}\n")
    exec(compile(source, f"<despina scan of {fn.__name__}>", "exec"), namespace)
    return namespace["scan"], namespace["meta"]


def _no_scan(*args: Any, **kwargs: Any) -> Any:
    raise TypeError("this kernel's signature has no fast path")
