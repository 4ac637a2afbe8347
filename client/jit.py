"""`@despina.jit`: a Python function compiled, per specialization, into a kernel.

    @despina.jit
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

    add[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
"""

from __future__ import annotations

import difflib
import inspect
import warnings
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, overload

from despina.compiler.errors import CompilationError
from despina.compiler.ir import types as _t
from despina.compiler.ir.core import Module
from despina.compiler.ir.verifier import VerificationError, verify
from despina.compiler.options import CompileOptions
from despina.compiler.passes.pipeline import run_pipeline
from despina.language.core import constexpr, tensor, unwrap
from despina.language.descriptors import DescriptorArg, flatten
from despina.language.semantic import to_tensor

from . import arguments
from .arguments import TensorWrapper, reinterpret
from .caller import user_stacklevel
from .frontend.callable import JitCallable
from .frontend.codegen import generate_module, is_constexpr_annotation
from .frontend.source import Source
from .runtime import env as _env
from .specialization import LAUNCH_OPTIONS, Specialization
from .tools.tensor_descriptor import expand

_INTERPRET = _env.key("DESPINA_INTERPRET")
_SERVER = _env.key("DESPINA_SERVER")
_ENVIRON = _env.STORE
_NO_GRID = object()


def interpret_default() -> bool:
    """Whether DESPINA_INTERPRET is on, read at each launch: one dict lookup while it is unset."""
    return _INTERPRET in _ENVIRON and _env.true(_ENVIRON[_INTERPRET])


def build_module(fn: JITFunction, params: list[tuple[str, Any]], attrs: dict[str, Any], debug: bool
                 ) -> tuple[Module, dict[str, Any]]:
    """The optimized tile IR of `fn` for `params` and the globals it read, verified as a daemon
    verifies what it receives, so that a kernel the daemon would refuse fails here the same way."""
    module, used = generate_module(fn, params, debug, attrs)
    module = run_pipeline(module)
    try:
        verify(module)
    except VerificationError as exc:
        raise VerificationError(f"kernel '{fn.__name__}': the IR failed verification: {exc}") from None
    return module, used


class JITFunction(JitCallable):
    """A kernel (or a helper called from kernels). Launch with `kernel[grid](*args, **meta)`."""

    def __init__(self, fn: Callable[..., Any], do_not_specialize: Sequence[int | str] = (), interpret: bool | None = None,
                 debug: bool | None = None, noinline: bool = False) -> None:
        self.fn = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.__module__ = fn.__module__
        self.__wrapped__ = fn
        self.signature = inspect.signature(fn)
        self.params = list(self.signature.parameters.values())
        self.arg_names = [p.name for p in self.params]
        self.constexpr_names = {p.name for p in self.params if is_constexpr_annotation(p.annotation)}
        self.do_not_specialize = {self.arg_names[d] if isinstance(d, int) else d for d in do_not_specialize}
        self.interpret = interpret
        self.debug = debug
        self.noinline = noinline
        self._source: Source | None = None
        self.cache: dict[tuple[Any, ...], Module] = {}
        self.used_globals: dict[str, Any] = {}
        self._dispatcher: Any = None
        self._bind: Callable[[Any], Callable[..., None]] | None = None  # the dispatcher's, once made
        self._last: tuple[Any, Callable[..., None] | None] = (_NO_GRID, None)  # the last grid and its launch
        self._warned_strided: set[str] = set()  # arguments warned of as non-contiguous in the interpreter
        if _SERVER in _ENVIRON and not (interpret if interpret is not None else interpret_default()):
            from . import remote

            remote.prepare_ahead()  # the daemon's client is made while the program prepares its data

    @property
    def source(self) -> Source:
        if self._source is None:
            self._source = Source.of(self.fn)
        return self._source

    def __repr__(self) -> str:
        return f"JITFunction({self.fn.__module__}:{self.fn.__qualname__})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"'{self.__name__}' is a @despina.jit function: launch it as {self.__name__}[grid](...) "
                           "or call it from inside another kernel")

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        """The launch of this kernel on `grid`. On the GPU, the dispatcher's generated launch itself
        (the one made for the last grid while `grid` is that very object, as a literal grid is at a
        call site); in the interpreter (`interpret=True`, or DESPINA_INTERPRET on, read here at each
        `kernel[grid]`), `run`."""
        interpret = self.interpret
        if interpret is None:
            interpret = _INTERPRET in _ENVIRON and _env.true(_ENVIRON[_INTERPRET])
        if interpret:
            return self._interpreted(grid)
        last = self._last
        if last[0] is grid:
            return last[1]  # type: ignore[return-value]
        launch = (self._bind or self._gpu_dispatcher().bind)(grid)
        self._last = (grid, launch)  # one assignment: another thread sees the old pair or the new one
        return launch

    @property
    def run_remote(self) -> Any:
        """`kernel.run_remote[grid](*args, **constexprs)`: specialize and lower the kernel here, as
        `kernel[grid]` does, and run it on the GPU of the daemon that DESPINA_SERVER (or
        `despina.set_server`) names. NumPy arrays among the arguments (bf16 as
        `despina.reinterpret(uint16 bits, tl.bfloat16)`) are copied there, and what the kernel left in
        them is written back into them, in place. See `despina.remote.run_remote`."""
        from .remote import RemoteLauncher

        return RemoteLauncher(self)

    def _interpreted(self, grid: Any) -> Callable[..., None]:
        # Its own function: a closure made in __getitem__ would cost every launch two cells.
        return lambda *args, **kwargs: self.run(*args, grid=grid, **kwargs)

    # ---- binding -----------------------------------------------------------------------------

    def bind(self, args: Sequence[Any], kwargs: dict[str, Any], launch: bool = True) -> dict[str, Any]:
        """Arguments by parameter name, defaults applied; a clear error on a mismatch. `launch`: the
        arguments of a launch (its launch options already taken out), not of a call inside a kernel."""
        what = "kernel" if launch else "@jit function"
        unknown = [k for k in kwargs if k not in self.arg_names]
        if unknown and not any(p.kind is p.VAR_KEYWORD for p in self.params):
            raise TypeError(self._unknown_keywords(what, unknown, launch))
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            expected = ", ".join(self.arg_names)
            raise TypeError(f"{what} '{self.__name__}' takes ({expected}): {exc}") from None
        bound.apply_defaults()
        return dict(bound.arguments)

    def _unknown_keywords(self, what: str, unknown: list[str], launch: bool) -> str:
        """Each keyword that names no parameter, with the closest parameter (or launch option) to it."""
        options = [o for o in LAUNCH_OPTIONS if o not in self.arg_names] if launch else []
        named = []
        for name in unknown:
            close = difflib.get_close_matches(name, self.arg_names + options, n=1)
            named.append(f"'{name}'" + (f" (did you mean '{close[0]}'?)" if close else ""))
        text = f"{what} '{self.__name__}' has no parameter {' or '.join(named)}; it takes ({', '.join(self.arg_names)})"
        return text + (f" and the launch options {', '.join(options)}" if options else "")

    def bind_call(self, args: Sequence[Any], kwargs: dict[str, Any]) -> list[tuple[str, Any]]:
        """Parameters of a call from inside a kernel: `constexpr(value)` or a tensor."""
        out: list[tuple[str, Any]] = []
        for name, value in self.bind(args, kwargs, launch=False).items():
            value = unwrap(value)
            parts = flatten(name, value)
            if parts is not None:  # a tensor descriptor: its DescriptorArg, then its tensors
                out += [(n, constexpr(v) if isinstance(v, DescriptorArg) else v) for n, v in parts]
            elif name in self.constexpr_names:
                if isinstance(value, tensor):
                    raise TypeError(f"parameter '{name}' of '{self.__name__}' is a tl.constexpr but got a run-time tensor")
                out.append((name, constexpr(value)))
            elif isinstance(value, tensor):
                out.append((name, value))
            elif isinstance(value, (bool, int, float)):
                out.append((name, to_tensor(value)))
            else:
                out.append((name, constexpr(value)))
        return out

    # ---- specialization ----------------------------------------------------------------------

    def specialize(self, bound: dict[str, Any], options: CompileOptions) -> Specialization:
        """The specialization of a launch with arguments `bound` (by name; TensorDescriptors as they are or
        already `expand`ed)."""
        key: list[Any] = []
        params: list[tuple[str, Any]] = []
        runtime: list[Any] = []
        divisible: list[int] = []
        equal_to_1: list[int] = []
        positive: list[int] = []
        parts: set[str] = set()  # a descriptor's sizes and strides, which specialize on 1 and 16 alone
        for name, value in expand(bound).items():
            value = unwrap(value)
            if isinstance(value, DescriptorArg):
                parts.update(value.names(name))
            spec = name not in self.do_not_specialize
            if name in self.constexpr_names or value is None or isinstance(value, (str, _t.ScalarType, tuple,
                                                                                   DescriptorArg)):
                key.append(("c", name, value))
                params.append((name, constexpr(value)))
                continue
            index = len(runtime)
            if arguments.is_array(value):
                elem = arguments.element_type(value.dtype)
                if elem is None:
                    raise TypeError(f"argument '{name}' of kernel '{self.__name__}' has unsupported dtype {value.dtype}")
                aligned = spec and arguments.data_ptr(value) % 16 == 0
                key.append(("p", elem.name, aligned))
                params.append((name, _t.PointerType(elem)))
                if aligned:
                    divisible.append(index)
            elif isinstance(value, (bool, int, float)) or getattr(value, "shape", None) == ():  # NumPy scalars too
                try:
                    ty = arguments.scalar_type(value)
                except (TypeError, OverflowError) as exc:
                    raise TypeError(f"argument '{name}' of kernel '{self.__name__}': {exc}") from None
                one = spec and ty.is_int() and not ty.is_bool() and int(value) == 1
                div16 = spec and ty.is_int() and not ty.is_bool() and int(value) % 16 == 0
                # a float > 0 (passes/scales.py), an int that is a positive multiple of 16 (a stride TMA can step
                # by: gpuir/pointer_tiles.py)
                plus = spec and (float(value) > 0 if ty.is_floating() else div16 and int(value) > 0 and name not in parts)
                key.append(("s", ty.name, one, div16, plus))
                params.append((name, ty))
                if one:
                    equal_to_1.append(index)
                if div16:
                    divisible.append(index)
                if plus:
                    positive.append(index)
            else:
                raise TypeError(f"argument '{name}' of kernel '{self.__name__}' is a {type(value).__name__}; "
                                "kernels take arrays/tensors, TensorDescriptors, numbers, None and constexprs")
            runtime.append(value)
        key.append(("o", options))
        key.append(("g", tuple(sorted((k, repr(v)) for k, v in self._current_globals().items()))))
        attrs = {"divisibility": divisible, "equal_to_1": equal_to_1, "positive": positive,
                 "num_warps": options.num_warps, "num_stages": options.num_stages}
        return Specialization(tuple(key), params, runtime, attrs)

    def _current_globals(self) -> dict[str, Any]:
        g = self.fn.__globals__
        return {name: unwrap(g.get(name)) for name in self.used_globals}

    def ir(self, spec: Specialization, options: CompileOptions) -> Module:
        """The optimized tile IR for `spec`, cached in memory by its key."""
        module = self.cache.get(spec.key)
        if module is None:
            module, used = build_module(self, spec.params, spec.attrs, options.debug)
            if set(used) - set(self.used_globals):
                self.used_globals.update(used)
                spec.key = spec.key[:-1] + (("g", tuple(sorted((k, repr(v)) for k, v in self._current_globals().items()))),)
            self.cache[spec.key] = module
        return module

    # ---- launching ---------------------------------------------------------------------------

    def run(self, *args: Any, grid: Any, **kwargs: Any) -> None:
        interpret = self.interpret if self.interpret is not None else interpret_default()
        if not interpret:
            return (self._dispatcher or self._gpu_dispatcher()).launch(args, kwargs, grid)
        launch = {k: kwargs.pop(k) for k in LAUNCH_OPTIONS if k in kwargs and k not in self.arg_names}
        options = self.options(launch, interpret)
        bound = self.bind(args, kwargs)
        spec = self.specialize(bound, options)
        grid_dims = self._grid(grid, bound, launch)
        module = self.ir(spec, options)
        if 0 in grid_dims:
            return
        from despina.compiler.interpreter import run_kernel

        names = [n for n, p in spec.params if not isinstance(p, constexpr)]
        buffers = [self._host_buffer(n, a) if arguments.is_array(a) else a for n, a in zip(names, spec.runtime_args)]
        run_kernel(module, grid_dims, buffers)

    def _host_buffer(self, name: str, value: Any) -> Any:
        """The interpreter's buffer for array argument `name`: its memory from its first element. A
        non-contiguous array warns, once per kernel and argument: its strides are not what the kernel reads."""
        arr = arguments.host_array(value.base if isinstance(value, TensorWrapper) else value)
        if "." not in name and name not in self._warned_strided:  # a descriptor's base ('d.base') has its strides
            message = arguments.strided_warning(self.__name__, name, arr)
            if message is not None:
                self._warned_strided.add(name)
                warnings.warn(message, RuntimeWarning, stacklevel=user_stacklevel())
        return arguments.host_buffer(arr)

    def options(self, launch: dict[str, Any], interpret: bool) -> CompileOptions:
        """The compile options of a launch, checked (`CompileOptions.make`): those among its launch options,
        the defaults for the others; debug from the kernel, else on in the interpreter or with DESPINA_DEBUG=1."""
        debug = self.debug if self.debug is not None else (interpret or _env.get("DESPINA_DEBUG") == "1")
        given = {k: v for k, v in launch.items() if k != "stream"}
        return CompileOptions.make(self.__name__, given, debug=bool(debug))

    def _gpu_dispatcher(self) -> Any:
        """The GPU launch path (`despina.runtime.dispatch`): specializations to ready launchers."""
        from .runtime.dispatch import Dispatcher

        self._dispatcher = Dispatcher(self)
        self._bind = self._dispatcher.bind
        return self._dispatcher

    def _grid(self, grid: Any, bound: dict[str, Any], launch: dict[str, Any]) -> tuple[int, int, int]:
        if callable(grid):
            grid = grid({**bound, **launch})
        if isinstance(grid, int):
            grid = (grid,)
        dims = tuple(int(unwrap(g)) for g in grid)
        if not 1 <= len(dims) <= 3 or any(d < 0 for d in dims):
            raise ValueError(f"kernel '{self.__name__}': grid must be 1 to 3 non-negative ints, got {grid!r}")
        return dims + (1,) * (3 - len(dims))  # type: ignore[return-value]


T = TypeVar("T")


@overload
def jit(fn: Callable[..., Any]) -> JITFunction: ...


@overload
def jit(fn: None = None, *, do_not_specialize: Sequence[int | str] = (), interpret: bool | None = None,
        debug: bool | None = None, noinline: bool = False) -> Callable[[Callable[..., Any]], JITFunction]: ...


def jit(fn: Callable[..., Any] | None = None, *, do_not_specialize: Sequence[int | str] = (),
        interpret: bool | None = None, debug: bool | None = None, noinline: bool = False) -> Any:
    """Compile `fn` as a kernel (or a helper kernels call). See the module docstring."""

    def decorate(f: Callable[..., Any]) -> JITFunction:
        return JITFunction(f, do_not_specialize, interpret, debug, noinline)

    return decorate(fn) if fn is not None else decorate


__all__ = ["JITFunction", "jit", "CompilationError", "CompileOptions", "TensorWrapper", "reinterpret"]
