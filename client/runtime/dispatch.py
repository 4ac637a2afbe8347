"""The GPU launch path of a JITFunction: `kernel[grid](...)` in a few microseconds.

`kernel[grid]` is the kernel's generated `launch` (made by the generated `bind(grid)`, which reads
a grid that cannot change once). A launch is straight-line code: it binds the call itself (usual
calls; others go through a function of the kernel's signature), calls cuCtxGetCurrent straight
through ctypes, and reads each argument once: its classification (`pointers.classify`, with torch
tensors, ints and floats inlined: its kind and what specialization reads from it) into the key
and its launch value (a device address or a scalar) into a local. The key finds the thread's
ready launch in a per-thread dict, filled from the kernel's `entries` (a LaunchEntry per call
signature): the LaunchEntry, its launcher's frame for this thread and that frame's prebuilt ctypes
arguments. The launch is then one `struct.pack_into` into the frame (the launcher's `pack_into`: for
a kernel with TMA tensor maps, a cache lookup of their bytes first) and one cuLaunchKernelEx. A host
TensorDescriptor is classified as one argument whose launch value is a tuple (its base address, shape
and strides but the last); the LaunchEntry of a call with descriptors packs through a generated
wrapper (`flattening_pack`) that passes their parts where the launcher's parameters take them.
Everything else (binding errors, specialization, compilation, loading, clear errors) happens on
the slow path through the JITFunction, which stays the owner of specialization; the slow path
files the call's key (computed by the generated `scan`, the same code as the launch's) so that
the next call like it is fast.
"""

from __future__ import annotations

import ctypes
import inspect
import struct
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from despina import arguments
from despina.language.core import constexpr, unwrap
from despina.language.descriptors import DescriptorArg
from despina.specialization import LAUNCH_OPTIONS, Specialization
from despina.tools.tensor_descriptor import TensorDescriptor, expand

from . import driver, env, libcuda, pointers
from .driver import LastLaunch
from .launcher import Launcher, grid_dims, stream_handle, torch_stream_getter
from .pointers import device_pointer, is_torch

if TYPE_CHECKING:
    from despina.compiler.ir.core import Module
    from despina.compiler.options import CompileOptions
    from despina.jit import JITFunction


class _Addressed:
    """An array as `specialize` sees it on a GPU launch: its dtype, shape and device address (which
    `arguments.data_ptr` cannot read from a DLPack-only array)."""

    def __init__(self, array: Any, pointer: int) -> None:
        self.dtype = array.dtype
        self.shape = tuple(getattr(array, "shape", ()))
        self.pointer = pointer

    def data_ptr(self) -> int:
        return self.pointer


class LaunchEntry:
    """A call signature's ready launch: the launcher, which of the call's values are its parameters
    (`pick`, None when all of them in order), where the stream comes from, and the globals it was
    compiled with (None when it uses none). `pack_into` is the launcher's, or given (a call with
    descriptors: `flattening_pack` of it, with `pick` None)."""

    __slots__ = ("launcher", "pack_into", "launch_ex", "handle", "threads", "shared", "local", "name", "pick",
                 "torch_device", "torch_stream", "globals")

    def __init__(self, launcher: Launcher, pick: list[int] | None, torch_device: int | None,
                 globals_: dict[str, Any] | None, pack_into: Callable[..., None] | None = None) -> None:
        self.launcher = launcher
        self.pack_into = pack_into or launcher.pack_into
        self.launch_ex, self.handle = launcher.launch_ex, launcher.handle
        self.threads, self.shared, self.local, self.name = launcher.threads, launcher.shared, launcher.local, launcher.name
        self.pick = pick
        self.torch_device = torch_device
        self.torch_stream: Callable[[int], int] | None = torch_stream_getter() if torch_device is not None else None
        self.globals = globals_


class _Ready(dict):
    """One thread's ready launches of one kernel, by call key: the tuples of `Dispatcher.ready`,
    filled on first use from the kernel's entries (KeyError when the key has no LaunchEntry)."""

    __slots__ = ("dispatcher",)

    def __init__(self, dispatcher: Dispatcher) -> None:
        super().__init__()
        self.dispatcher = dispatcher

    def __missing__(self, key: tuple[Any, ...]) -> tuple[Any, ...]:
        found = self[key] = self.dispatcher.ready(key)
        return found


class _PerThread(threading.local):
    """A dispatcher's state in each thread, `s`: cuCtxGetCurrent's out-argument (byref'd, and the
    c_size_t it fills) and the thread's `_Ready` dict, one attribute read away."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        out = ctypes.c_size_t()
        self.s = (ctypes.byref(out), out, _Ready(dispatcher))


class Dispatcher:
    """`kernel[grid](...)` on the GPU for one JITFunction. `entries` maps call keys to ready launches;
    `launchers` maps (specialization key, context) to loaded kernels; `slow_calls` counts slow paths.
    `bind(grid)` is the `launch(*args, **kwargs)` that `kernel[grid]` returns."""

    def __init__(self, fn: JITFunction, lib: libcuda.LibCuda | None = None) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.lib = lib or libcuda.get()
        self.entries: dict[tuple[Any, ...], LaunchEntry] = {}
        self.launchers: dict[tuple[Any, ...], Launcher] = {}
        self.adopted: set[tuple[Any, ...]] = set()  # specialization keys whose launchers were `adopt`ed
        self.slow_calls = 0
        self.local = _PerThread(self)
        self.namespace: dict[str, Any] = {}  # the generated code's globals
        # The generated code is made (`make`) by the first `kernel[grid]`, or by a second `launch`: a kernel
        # launched once through `launch` (a tuning's winner in a short process) never needs it.
        self.scan: Callable[..., Any] | None = None
        self.meta: Callable[..., Any] | None = None
        self.bind: Callable[[Any], Callable[..., Any]] = self._first_bind

    def launch(self, args: tuple[Any, ...], kwargs: dict[str, Any], grid: Any) -> None:
        """Launch the kernel for this call (what `kernel[grid](*args, **kwargs)` does)."""
        if self.scan is None and not self.slow_calls:
            return self.slow(args, kwargs, grid)
        return self.bind(grid)(*args, **kwargs)

    def make(self) -> None:
        """Generate the fast path's code (`make_launch`) and launch through it from now on, here and in the
        kernel's `kernel[grid]`."""
        if self.scan is None:
            self.scan, self.meta, self.bind = make_launch(self)
            if self.fn._bind == self._first_bind:
                self.fn._bind = self.bind

    def _first_bind(self, grid: Any) -> Callable[..., Any]:
        self.make()
        return self.bind(grid)

    def learn(self, values: Any) -> None:
        """Inline the first torch tensor class among `values` (a call's arguments) in the generated
        code, before the slow path files the call's key: keys are then made as the launch makes them."""
        if self.namespace.get("_d_tensor") is _UNSEEN:
            for value in values:
                try:
                    classifier = pointers.CLASSIFIERS.get(type(value)) or pointers.classifier_for(value)
                except Exception:
                    continue
                if classifier is pointers._torch_array:
                    self.namespace["_d_tensor"] = type(value)
                    return

    def ready(self, key: tuple[Any, ...]) -> tuple[Any, ...]:
        """What the generated launch reads for `key` in this thread: the LaunchEntry, what it launches with,
        this thread's frame of its launcher and that frame's `launch_ex` arguments."""
        e = self.entries[key]
        frame = e.launcher.frame()
        if isinstance(self.lib, libcuda.LibCuda) and e.launch_ex is self.lib.launch_ex:
            args = libcuda.launch_args(frame, e.handle.value or 0)
        else:  # a wrapped launch (CheckedLaunch) or a stand-in: the Frame's own c_void_p objects
            args = (frame.config, e.handle, frame.params, None)
        return (e, e.globals, e.pick, e.pack_into, frame.buffer, e.threads, e.shared, e.torch_stream,
                e.torch_device, e.launch_ex, args, e.name)

    # ---- the slow path -------------------------------------------------------------------------

    def slow(self, args: tuple[Any, ...], kwargs: dict[str, Any], grid: Any) -> None:
        """Bind, specialize, compile and load as needed, launch, and file the call for the fast path."""
        self.slow_calls += 1
        fn = self.fn
        call_kwargs = dict(kwargs)
        launch = {k: call_kwargs.pop(k) for k in LAUNCH_OPTIONS if k in call_kwargs and k not in fn.arg_names}
        stream = launch.get("stream")
        options = fn.options(launch, interpret=False)
        bound = fn.bind(args, call_kwargs)
        flat = expand(bound)  # a TensorDescriptor as its base, shape and strides
        addresses = {name: device_pointer(unwrap(v), name, self.name) for name, v in flat.items()
                     if name not in fn.constexpr_names and arguments.is_array(unwrap(v))}
        spec = fn.specialize({n: _Addressed(unwrap(v), addresses[n]) if n in addresses else v for n, v in flat.items()},
                             options)
        dims = fn._grid(grid, bound, launch)
        module = None if spec.key in self.adopted else fn.ir(spec, options)
        context = driver.current_context()  # only now: the errors above need no GPU
        device = driver.context_device(context)
        if module is None and (spec.key, context) not in self.launchers:  # adopted in another context
            module = fn.ir(spec, options)
        launcher = self.launcher(spec, module, options, context, device)
        torch_device = device.ordinal if any(is_torch(unwrap(v)) for v in flat.values()) else None
        entry = self.file(args, kwargs, launcher, torch_device)
        if 0 in dims:
            return
        if stream is None and entry.torch_stream is not None:
            stream = entry.torch_stream(device.ordinal)
        values = {n: addresses[n] if n in addresses else unwrap(flat[n]) for n in launcher.arg_names}
        launcher.launch(dims, values, stream_handle(stream))

    def launcher(self, spec: Specialization, module: Module | None, options: CompileOptions, context: int,
                 device: driver.Device) -> Launcher:
        """The loaded kernel of `spec` in `context`: compiled (or found in a cache) and loaded once;
        `module` may be None when it is loaded already (`adopt`)."""
        key = (spec.key, context)
        found = self.launchers.get(key)
        if found is None:
            from . import kernels  # here: a launch of an adopted kernel imports no cache

            assert module is not None
            binary = kernels.binary(module, options, device.target)
            meta = binary.metadata
            function = device.load(binary.cubin, binary.name, int(meta.get("shared", 0)),
                                   driver.block_warps(meta, options.num_warps), context)
            kernel = module.kernel
            found = self.launchers[key] = Launcher(function, kernel.arg_names, [a.type for a in kernel.args], self.lib,
                                                   meta)
        return found

    def adopt(self, spec: Specialization, name: str, image: bytes, meta: Mapping[str, Any], context: int,
              device: driver.Device) -> None:
        """Load kernel `name` from `image` (a cubin, or PTX), compiled elsewhere from the kernel as `spec`
        specializes it (the daemon's tuned winner; `meta` its backend's metadata), as the launch of `spec` in
        `context`: a launch that specializes to it neither traces the kernel nor compiles it. Its parameters
        are `spec`'s run-time ones, as tracing makes them."""
        function = device.load(image, name, int(meta.get("shared", 0)), driver.block_warps(meta, spec.attrs["num_warps"]),
                               context)
        params = [(n, p) for n, p in spec.params if not isinstance(p, constexpr)]
        self.launchers[(spec.key, context)] = Launcher(function, [n for n, _ in params], [p for _, p in params],
                                                       self.lib, meta)
        self.adopted.add(spec.key)

    def file(self, args: tuple[Any, ...], kwargs: dict[str, Any], launcher: Launcher,
             torch_device: int | None) -> LaunchEntry:
        """The LaunchEntry of this call, stored under its key unless the call has none (an unhashable constant)."""
        fn = self.fn
        globals_ = fn._current_globals() if fn.used_globals else None
        if self.scan is None:  # no fast path made yet (the first `launch`): nothing to file the call for
            return LaunchEntry(launcher, None, torch_device, globals_)
        self.learn((*args, *kwargs.values()))
        try:
            key, values, _ = self.scan(*args, **kwargs)
            hash(key)
        except Exception:  # no key: calls like this one always take the slow path
            return LaunchEntry(launcher, None, torch_device, globals_)
        runtime = [n for n in fn.arg_names if n not in fn.constexpr_names]
        if any(v.__class__ is tuple for v in values):  # host TensorDescriptors: their parts flattened
            sources = self.sources(args, kwargs, runtime, values)
            if sources is None or not all(n in sources for n in launcher.arg_names):
                return LaunchEntry(launcher, None, torch_device, globals_)
            pack = flattening_pack(launcher.pack_into, [sources[n] for n in launcher.arg_names], len(values))
            entry = self.entries[key] = LaunchEntry(launcher, None, torch_device, globals_, pack)
            self.local.s[2].pop(key, None)
            return entry
        pick: list[int] | None = [runtime.index(n) for n in launcher.arg_names]
        if pick == list(range(len(values))):
            pick = None
        entry = self.entries[key] = LaunchEntry(launcher, pick, torch_device, globals_)
        self.local.s[2].pop(key, None)  # this thread's ready launch of the key, if any, was another LaunchEntry's
        return entry

    def sources(self, args: tuple[Any, ...], kwargs: dict[str, Any], runtime: list[str],
                values: list[Any]) -> dict[str, tuple[int, int | None]] | None:
        """Where each run-time parameter of this call (`expand`'s names) is among `values`, the launch
        values `scan` made of it: (i, None) for values[i] itself, (i, j) for part j of a host
        TensorDescriptor's values[i]. None when the call's descriptors are not what `values` say."""
        assert self.meta is not None
        named = self.meta(*args, **kwargs)
        out: dict[str, tuple[int, int | None]] = {}
        for i, (name, value) in enumerate(zip(runtime, values)):
            d = unwrap(named[name])
            if isinstance(d, TensorDescriptor):
                parts = DescriptorArg(tuple(d.block_shape), d.padding).names(name)
                if value.__class__ is not tuple or len(value) != len(parts):
                    return None
                out.update((part, (i, j)) for j, part in enumerate(parts))
            else:
                out[name] = (i, None)
        return out


# The code that reads runtime argument {i} (the local _d_p{i}) into its key part _d_k{i} and launch
# value _d_v{i}: `pointers.classify`, with the kinds most launches take inlined and keyed by values
# that hash at once (no classifier's key equals one of them, so a key part still tells the kinds
# apart): a torch tensor of the class the kernel met first (`_d_tensor`, set by `Dispatcher.learn`)
# keys on its dtype, or on (_MISALIGNED, dtype) off a 16-byte boundary; an int (exactly) in int32's
# range on 1, 16 (a positive multiple of 16), -16 (another multiple: 0 or negative) or 0, as `pointers._int`
# tells them apart; a float on "f32+" when it
# is greater than 0, else "f32".
_CLASSIFY = """\
_d_c = _d_type(_d_p{i})
if _d_c is _d_tensor:
    if not _d_p{i}.is_cuda:
        raise _d_Slow
    _d_v{i} = _d_p{i}.data_ptr()
    _d_k{i} = _d_p{i}.dtype if not _d_v{i} & 15 else (_d_misaligned, _d_p{i}.dtype)
elif _d_c is _d_int_type and -0x80000000 <= _d_p{i} <= 0x7FFFFFFF:
    _d_k{i} = 1 if _d_p{i} == 1 else 0 if _d_p{i} & 15 else 16 if _d_p{i} > 0 else -16
    _d_v{i} = _d_p{i}
elif _d_c is _d_float_type:
    _d_k{i} = "f32+" if _d_p{i} > 0 else "f32"
    _d_v{i} = _d_p{i}
else:
    _d_k{i}, _d_v{i} = (_d_get(_d_c) or _d_new(_d_p{i}))(_d_p{i})
"""

# The calling thread's current context, as `_d_ctxv`: cuCtxGetCurrent called here (LibCuda), or a
# stand-in's `current_context()`. A failure raises: the slow path then explains it.
_CONTEXT_RAW = """\
_d_ref, _d_out, _d_ready = _d_local.s
if _d_get_current(_d_ref):
    raise _d_Slow
_d_ctxv = _d_out.value
"""
_CONTEXT_CALL = """\
_d_ready = _d_local.s[2]
_d_ctxv = _d_ctx()
"""

_LAUNCH = """\
def bind(_d_grid):
    _d_dims = _d_static_grid(_d_grid)
    def launch(*_d_args, **_d_kwargs):
        try:
{bind}
{context}
{classify}
            (_d_e, _d_globals, _d_pick, _d_pack, _d_buffer, _d_threads, _d_shared, _d_torch_stream, _d_torch_device,
             _d_launch, _d_launch_args, _d_name) = _d_ready[{key}]
        except _d_Exception:  # a new signature, or an argument only the slow path takes or explains
            return _d_slow(_d_args, _d_kwargs, _d_grid)
        if _d_globals is not None and _d_globals != _d_current_globals():
            return _d_slow(_d_args, _d_kwargs, _d_grid)
        if _d_dims is not None:
            _d_x, _d_y, _d_z = _d_dims
        else:
            _d_x, _d_y, _d_z = _d_grid_dims(_d_grid(_d_meta_of({meta})) if _d_callable(_d_grid) else _d_grid)
        if not (_d_x and _d_y and _d_z):
            return None
        if _d_stream is None:
            _d_stream = 0 if _d_torch_stream is None else _d_torch_stream(_d_torch_device)
        elif _d_type(_d_stream) is not _d_int_type:
            _d_stream = _d_stream_handle(_d_stream)
        try:
            if _d_pick is None:
                _d_pack(_d_buffer, 0, _d_x, _d_y, _d_z, _d_threads, 1, 1, _d_shared, _d_stream{values})
            else:
                _d_pack(_d_buffer, 0, _d_x, _d_y, _d_z, _d_threads, 1, 1, _d_shared, _d_stream,
                        *_d_map([{value_list}].__getitem__, _d_pick))
        except _d_struct_error:  # a grid of negative, float or huge values: the slow path explains or converts
            return _d_slow(_d_args, _d_kwargs, _d_grid)
        _d_code = _d_launch(*_d_launch_args)
        if _d_last.kernel is not _d_name:
            _d_last.kernel = _d_name
        if _d_code:
            raise _d_e.launcher.error(_d_code, (_d_x, _d_y, _d_z))
        return None
    return launch
"""


class _Slow(Exception):
    """Raised in the generated launch for a call only the slow path takes (it explains errors)."""


_MISALIGNED = object()
_UNSEEN = object()  # `_d_tensor` before the kernel met a torch tensor: no class is it
_MISSING = object()  # the value of a launch option not passed (in the key)


def static_grid(grid: Any) -> tuple[Any, Any, Any] | None:
    """The (x, y, z) of `grid` computed once for all launches on it, when it cannot change: a tuple
    of one value (taken as it is: packing checks it, and the slow path explains a bad one), another
    tuple or an int (as `grid_dims` reads them); None for a grid read at each launch (a callable, a
    list, or a grid that `grid_dims` rejects, whose launch then raises)."""
    cls = grid.__class__
    if cls is tuple and len(grid) == 1:
        return (grid[0], 1, 1)
    if cls is tuple or cls is int:
        try:
            return grid_dims(grid)
        except Exception:
            return None
    return None


def make_launch(dispatcher: Dispatcher) -> tuple[Callable[..., Any], Callable[..., Any], Callable[[Any], Any]]:
    """The generated functions of `dispatcher`'s kernel fn:

    - `scan(*args, **kwargs) -> (key, values, stream)`, with fn's own signature plus the launch
      options as keyword-only parameters, so that Python itself binds the call;
    - `meta(*args, **kwargs)`, the dict a grid function gets (arguments by name and launch options);
    - `bind(grid)`, the `launch(*args, **kwargs)` of `kernel[grid]`: straight-line code that binds
      the call, computes the key as `scan` does, and launches. It binds the usual calls itself
      (arguments by position, constexpr and defaulted parameters and launch options by keyword);
      any other call (a runtime argument by keyword, an unknown keyword, a missing or twice-given
      argument) goes through `_d_bind`, fn's signature, and a call it rejects to the slow path,
      which explains."""
    fn, lib = dispatcher.fn, dispatcher.lib
    names = fn.arg_names
    if any(p.kind not in (p.POSITIONAL_OR_KEYWORD, p.POSITIONAL_ONLY) for p in fn.params) or any(
            n.startswith("_d_") for n in names):
        return _no_scan, _no_scan, lambda grid: lambda *args, **kwargs: dispatcher.slow(args, kwargs, grid)
    get_current = getattr(lib, "get_current", None) if isinstance(lib, libcuda.LibCuda) else None
    namespace: dict[str, Any] = {
        "_d_get": pointers.CLASSIFIERS.get, "_d_new": pointers.classifier_for, "_d_tensor": _UNSEEN,
        "_d_misaligned": _MISALIGNED, "_d_missing": _MISSING, "_d_Slow": _Slow, "_d_local": dispatcher.local,
        "_d_get_current": get_current, "_d_ctx": lib.current_context, "_d_environ": env.STORE,
        "_d_debug": env.key("DESPINA_DEBUG"), "_d_slow": dispatcher.slow, "_d_current_globals": fn._current_globals,
        "_d_static_grid": static_grid, "_d_grid_dims": grid_dims, "_d_stream_handle": stream_handle,
        "_d_struct_error": struct.error, "_d_last": LastLaunch,
        # builtins, by names no parameter can shadow
        "_d_len": len, "_d_type": type, "_d_callable": callable, "_d_int_type": int, "_d_float_type": float, "_d_map": map,
        "_d_Exception": Exception,
    }
    n = len(names)
    p = [f"_d_p{i}" for i in range(n)]
    options = [o for o in LAUNCH_OPTIONS if o not in names]
    stream = "stream" in options
    keyed = [o for o in options if o != "stream"]  # the options in the key: None, or a tuple when passed
    namespace["_d_no_options"] = (_MISSING,) * len(keyed)
    debug = "_d_debug in _d_environ and _d_environ[_d_debug]"  # DESPINA_DEBUG's stored value, False when unset
    params, key, values, classify = [], ["_d_ctxv", f"({debug})" if fn.debug is None else "None"], [], []
    for i, q in enumerate(fn.params):
        if q.default is not inspect.Parameter.empty:
            namespace[f"_d_default{i}"] = q.default
        params.append(q.name + (f"=_d_default{i}" if q.default is not inspect.Parameter.empty else ""))
        if q.name in fn.constexpr_names:
            key += [f"_d_type({p[i]})", p[i]]
        else:
            key.append(f"_d_k{i}")
            values.append(f"_d_v{i}")
            classify.append(_CLASSIFY.format(i=i))
    key.append("_d_options")
    option_params = [f"{o}=_d_missing" for o in keyed] + (["stream=None"] if stream else [])
    signature = ", ".join(params + (["*"] + option_params if option_params else []))
    context = _CONTEXT_RAW if get_current is not None else _CONTEXT_CALL
    options_tuple = f"_d_options_of({''.join(o + ', ' for o in keyed)})"
    general = [f"    {''.join(v + ', ' for v in p)}_d_options, _d_stream = _d_bind(*_d_args, **_d_kwargs)"]
    has_default = [q.default is not inspect.Parameter.empty for q in fn.params]
    # The launch binds the usual calls itself. With no keywords: all the arguments, or the first
    # ones with the rest defaulted. With keywords: the parameters before the trailing run of
    # constexpr or defaulted parameters by position, and only (some of) those and launch options
    # by keyword. Any other call goes through `_d_bind`, fn's signature.
    bind = ["_d_options = _d_stream = None", "if not _d_kwargs:"]
    count = n
    while True:
        bind.append(f"    {'if' if count == n else 'elif'} _d_len(_d_args) == {count}:")
        bind.append(f"        {''.join(v + ', ' for v in p[:count])}= _d_args" if count else "        pass")
        bind += [f"        {p[i]} = _d_default{i}" for i in range(count, n)]
        if count == 0 or not has_default[count - 1]:
            break
        count -= 1
    bind += ["    else:", "    " + general[0]]
    first = n
    while first > 0 and fn.params[first - 1].kind is not inspect.Parameter.POSITIONAL_ONLY and (
            names[first - 1] in fn.constexpr_names or has_default[first - 1]):
        first -= 1
    if first < n or options:
        namespace["_d_by_keyword"] = frozenset(names[first:] + options)
        namespace["_d_option_names"] = frozenset(options)
        bind.append(f"elif _d_len(_d_args) == {first} and _d_by_keyword.issuperset(_d_kwargs):")
        if first:
            bind.append(f"    {''.join(v + ', ' for v in p[:first])}= _d_args")
        for i in range(first, n):
            bind.append(f"    {p[i]} = _d_kwargs.get({names[i]!r}, _d_default{i})" if has_default[i] else
                        f"    {p[i]} = _d_kwargs[{names[i]!r}]")
        if options:  # present when there are more keywords than required parameters to take
            required = sum(1 for i in range(first, n) if not has_default[i])
            bind.append(f"    if _d_len(_d_kwargs) > {required} and not _d_option_names.isdisjoint(_d_kwargs):")
            if keyed:
                bind.append(f"        _d_options = ({''.join(f'_d_kwargs.get({o!r}, _d_missing), ' for o in keyed)})")
                bind.append("        if _d_options == _d_no_options:\n            _d_options = None")
            if stream:
                bind.append("        _d_stream = _d_kwargs.get('stream')")
    bind += ["else:", *general]
    source = (
        f"def scan({signature}):\n"
        + (f"    {''.join(v + ', ' for v in p)}= {''.join(m + ', ' for m in names)}\n" if names else "")
        + f"    _d_options = {options_tuple}\n" + _indent(context + "".join(classify), 4) +
        f"    return ({', '.join(key)},), [{', '.join(values)}], {'stream' if stream else 'None'}\n"
        f"def _d_options_of(*_d_options):\n    return None if _d_options == _d_no_options else _d_options\n"
        f"def _d_bind({signature}):\n"
        f"    return {''.join(m + ', ' for m in names)}{options_tuple}, {'stream' if stream else 'None'}\n"
        f"def meta({', '.join(params + ['**_d_launch'])}):\n"
        f"    return {{{''.join(f'{m!r}: {m}, ' for m in names)}**_d_launch}}\n"
        f"def _d_meta_of({''.join(v + ', ' for v in p)}_d_kwargs):\n"
        f"    _d_meta = {{{', '.join(f'{m!r}: {v}' for m, v in zip(names, p))}}}\n"
        f"    for _d_option in {tuple(options)!r}:\n"
        "        if _d_option in _d_kwargs:\n            _d_meta[_d_option] = _d_kwargs[_d_option]\n"
        "    return _d_meta\n" +
        _LAUNCH.format(bind=_indent("\n".join(bind), 12), context=_indent(context, 12),
                       classify=_indent("".join(classify), 12), key=f"({', '.join(key)},)",
                       meta="".join(v + ", " for v in p) + "_d_kwargs",
                       values="".join(f", {v}" for v in values), value_list=", ".join(values)))
    exec(compile(source, f"<despina launch of {fn.__name__}>", "exec"), namespace)
    dispatcher.namespace = namespace
    return namespace["scan"], namespace["meta"], namespace["bind"]


def flattening_pack(pack_into: Callable[..., None], sources: list[tuple[int, int | None]],
                    count: int) -> Callable[..., None]:
    """`pack_into` taking a call's `count` launch values as the generated launch passes them (with
    `pick` None), a host TensorDescriptor's as one tuple, and passing it the launcher's parameters:
    `sources[k]` says where parameter k is, (i, None) for value i, (i, j) for part j of value i."""
    params = "".join(f", _v{i}" for i in range(count))
    picked = "".join(f", _v{i}" if j is None else f", _v{i}[{j}]" for i, j in sources)
    config = "_b, _o, _x, _y, _z, _t, _u, _w, _s, _st"
    namespace: dict[str, Any] = {"_pack": pack_into}
    exec(f"def pack({config}{params}):\n    return _pack({config}{picked})\n", namespace)
    pack: Callable[..., None] = namespace["pack"]
    return pack


def _indent(code: str, spaces: int) -> str:
    return "".join(" " * spaces + line + "\n" if line else "\n" for line in code.splitlines())


def _no_scan(*args: Any, **kwargs: Any) -> Any:
    raise TypeError("this kernel's signature has no fast path")
