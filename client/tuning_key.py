"""The client's part of a tuning key: everything the tuned kernel's code depends on, computed without
tracing the kernel, so that a second process finds the daemon's tuning and launches its winner's
kernel as the daemon compiled it (`despina.tuning`), with no trace and no compile of its own.

    ckey = client_key(autotuner, configs, named_args)   # 64 hex digits; the GPU, driver and Despina join it

What a kernel's IR, and so its cubin, depends on, and the key covers:

- the source text of the kernel and of every @jit helper it names, where it lies (the file as the PTX's
  line table names it, `compiler/ir/filenames.py`, and the first line), so that the winner's cubin has
  the line table this process would have compiled, while two checkouts of one file share the key;
- the values those functions name at module level or in their closure, or as attributes of modules of
  the user's (`consts.BLOCK`, `helpers.combine`): numbers, strings, None and constexprs by value, plain
  Python functions by their code, @jit helpers as above;
- the configs (meta-parameters and compile options, maxnreg included), the values of the autotuner's
  `key` arguments, every argument's dtype and 16-byte alignment, each scalar's IR type (int32 or int64)
  and its specialization (== 1, a multiple of 16, a float > 0), the constexprs' and launch options' values, and
  whether the kernel is compiled with debug checks (DESPINA_DEBUG).

Despina's own code (the frontend, the language, the compiler) is covered by a digest of its sources
(`runtime.cache.frontend_digest`), so that two checkouts or installs that would trace a kernel apart
never share a winner's cubin.
"""

from __future__ import annotations

import hashlib
import json
import linecache
import types
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .runtime.cache import frontend_digest

if TYPE_CHECKING:
    from .autotuner import Autotuner, Config
    from .jit import JITFunction

# The rule's version: a record made under another rule is another key (its winner's cubin may have been
# compiled from code that this rule tells apart).
RULE = 4


def client_key(at: Autotuner, configs: Sequence[Config], named: dict[str, Any]) -> str:
    fn: JITFunction = at.fn
    header = {
        "v": RULE,
        "despina": frontend_digest(),
        "kernel": source_key(fn),
        "debug": fn.options({}, interpret=False).debug,
        "configs": [sorted((k, repr(v)) for k, v in c.all_kwargs().items()) for c in configs],  # maxnreg too
        "key": [repr(v) for v in at._key(named)],
        "args": _arguments(fn, named),
    }
    return hashlib.sha256(json.dumps(header, sort_keys=True).encode()).hexdigest()


def source_key(fn: JITFunction) -> str:
    """A hash of `fn`'s code, where it lies, and what it names (see the module docstring)."""
    from despina.compiler.ir.filenames import short_names

    reached = _reached(fn)
    files = short_names(f.fn.__code__.co_filename for f, _ in reached)
    index = {id(f): i for i, (f, _) in enumerate(reached)}
    parts = []
    for f, named in reached:
        code = f.fn.__code__
        parts.append(f"{files[code.co_filename]}:{code.co_firstlineno}:{f.fn.__qualname__}\n{_text(f)}")
        parts += [f"{name}={_value(value, index)}" for name, value in named]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def used_constexprs(fn: JITFunction) -> dict[str, Any]:
    """The constexpr globals (and closure values) that `fn` and its helpers name, by name and value, as
    tracing records them in `JITFunction.used_globals` for a launch to check."""
    from despina.language.core import constexpr

    return {name: value.value for _, named in _reached(fn) for name, value in named
            if isinstance(value, constexpr) and "." not in name}


def _reached(fn: JITFunction) -> list[tuple[JITFunction, list[tuple[str, Any]]]]:
    """`fn` and the @jit helpers it names (at any depth), each once, in a fixed order, with the values of
    the names it reads from its module and closure (those a key covers)."""
    from .jit import JITFunction

    out: list[tuple[JITFunction, list[tuple[str, Any]]]] = []
    seen: set[int] = set()
    todo = [fn]
    while todo:
        f = todo.pop(0)
        if id(f) in seen:
            continue
        seen.add(id(f))
        named = list(_names(f))
        out.append((f, named))
        todo += [v for _, v in named if isinstance(v, JITFunction)]
    return out


def _names(f: JITFunction) -> Iterator[tuple[str, Any]]:
    code = f.fn.__code__
    closure = dict(zip(code.co_freevars, (c.cell_contents for c in f.fn.__closure__ or ())))
    g = f.fn.__globals__
    names = _code_names(code)
    for name in sorted(names | set(closure)):
        table = closure if name in closure else g
        if name not in table:
            continue
        value = table[name]
        if isinstance(value, types.ModuleType):
            yield from _attributes(name, value, names, set())
        elif _keyed(value):
            yield name, value


def _keyed(value: Any) -> bool:
    from despina.language.core import constexpr

    from .jit import JITFunction

    return isinstance(value, (JITFunction, bool, int, float, str, constexpr, types.FunctionType)) or value is None


def _attributes(path: str, module: types.ModuleType, names: set[str], seen: set[int]) -> Iterator[tuple[str, Any]]:
    """What a kernel may read as `module.name` (`module.sub.name`, ...) for the names its code holds, from a
    module of the user's: Despina's own are covered by `frontend_digest`."""
    if module.__name__.split(".")[0] == "despina" or id(module) in seen:
        return
    seen.add(id(module))
    table = vars(module)
    for name in sorted(names & table.keys()):
        value = table[name]
        if isinstance(value, types.ModuleType):
            yield from _attributes(f"{path}.{name}", value, names, seen)
        elif value is not None and _keyed(value):
            yield f"{path}.{name}", value


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def _value(value: Any, index: dict[int, int]) -> str:
    from .jit import JITFunction

    if isinstance(value, JITFunction):
        return f"@jit {index[id(value)]}"
    if isinstance(value, types.FunctionType):
        return f"def {_code_digest(value.__code__)}"
    return repr(value)


def _code_digest(code: types.CodeType) -> str:
    """A plain function's code, not where it lies (a kernel calls it at trace time: its result is in the IR)."""
    parts = [code.co_code.hex(), repr(code.co_names), repr(code.co_varnames)]
    parts += [_code_digest(c) if isinstance(c, types.CodeType) else repr(c) for c in code.co_consts]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _text(f: JITFunction) -> str:
    """The function's source lines, from its first (decorators included) to the last of its code."""
    code = f.fn.__code__
    lines = linecache.getlines(code.co_filename)
    if not lines:
        f.source  # noqa: B018 (the error that says the kernel's source cannot be read)
    last = _last_line(code)
    return "".join(lines[code.co_firstlineno - 1 : last])


def _last_line(code: types.CodeType) -> int:
    last = code.co_firstlineno
    for _, _, line in code.co_lines():
        last = max(last, line or 0)
    positions = getattr(code, "co_positions", None)  # Python 3.11+: where each instruction's expression ends
    for _, end, _, _ in positions() if positions is not None else ():
        last = max(last, end or 0)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            last = max(last, _last_line(const))
    return last


def _arguments(fn: JITFunction, named: dict[str, Any]) -> list[Any]:
    from despina import arguments
    from despina.language.core import unwrap

    out: list[Any] = []
    for name, value in named.items():
        v = unwrap(value)
        if arguments.is_array(v):
            out.append([name, str(v.dtype), arguments.data_ptr(v) % 16 == 0])
        elif isinstance(v, bool) or name in fn.constexpr_names or not isinstance(v, (int, float)):
            out.append([name, repr(v)])
        elif isinstance(v, int):
            spec = name not in fn.do_not_specialize
            try:
                ty = arguments.scalar_type(v).name
            except OverflowError:  # the launch explains
                ty = repr(v)
            out.append([name, ty, spec and v == 1, spec and v % 16 == 0])
        else:
            out.append([name, "float", name not in fn.do_not_specialize and v > 0])
    return out
