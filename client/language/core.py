"""The kernel language's values: `tensor`, `constexpr`, dtypes, and the tracing context.

A `tensor` wraps one IR value while a kernel is being traced; every `tl.*` builtin appends ops
to the current builder. Outside a `@despina.jit` kernel the builtins raise a clear error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from despina.compiler.ir import types as _t
from despina.compiler.ir.builder import Builder
from despina.compiler.ir.core import Value

dtype = _t.ScalarType
pointer_type = _t.PointerType
block_type = _t.TileType

int1 = _t.int1
int8 = _t.int8
int16 = _t.int16
int32 = _t.int32
int64 = _t.int64
uint8 = _t.uint8
uint16 = _t.uint16
uint32 = _t.uint32
uint64 = _t.uint64
float16 = _t.float16
bfloat16 = _t.bfloat16
float32 = _t.float32
float64 = _t.float64
float8e4nv = _t.float8e4nv
float8e5 = _t.float8e5
pi32_t = pointer_type(int32)


class constexpr:
    """A compile-time constant: as a parameter annotation (`BLOCK: tl.constexpr`) it makes the
    argument part of the specialization; as a wrapper (`X = tl.constexpr(4)`) it marks a global
    that kernels may read."""

    def __init__(self, value: Any) -> None:
        self.value: Any = value.value if isinstance(value, constexpr) else value

    def __repr__(self) -> str:
        return f"constexpr[{self.value!r}]"

    def __index__(self) -> int:
        return int(self.value)

    def __bool__(self) -> bool:
        return bool(self.value)

    def __int__(self) -> int:
        return int(self.value)

    def __eq__(self, other: object) -> bool:
        return self.value == (other.value if isinstance(other, constexpr) else other)

    def __hash__(self) -> int:
        return hash(self.value)


def unwrap(value: Any) -> Any:
    """The Python value inside a `constexpr`, or `value` itself."""
    return value.value if isinstance(value, constexpr) else value


class _Tracing:
    """What the frontend provides to builtins while it traces a kernel."""

    def __init__(self, builder: Builder, inline_jit: Callable[[Any, list[Any]], Any], debug: bool) -> None:
        self.builder = builder
        self.inline_jit = inline_jit
        self.debug = debug


_tracing: _Tracing | None = None


@contextmanager
def tracing(builder: Builder, inline_jit: Callable[[Any, list[Any]], Any], debug: bool = False) -> Iterator[None]:
    global _tracing
    saved = _tracing
    _tracing = _Tracing(builder, inline_jit, debug)
    try:
        yield
    finally:
        _tracing = saved


def current() -> _Tracing:
    if _tracing is None:
        raise RuntimeError("despina.language functions can only be called inside a @despina.jit kernel")
    return _tracing


def builder() -> Builder:
    return current().builder


F = TypeVar("F", bound=Callable[..., Any])


def builtin(fn: F) -> F:
    """Mark a language function: it runs at trace time and its constexpr arguments arrive unwrapped."""
    fn.__despina_builtin__ = True  # type: ignore[attr-defined]
    return fn


def is_builtin(fn: Any) -> bool:
    return getattr(fn, "__despina_builtin__", False)


class tensor:
    """A block of values inside a kernel (or a scalar: `shape == ()`)."""

    __slots__ = ("handle",)

    def __init__(self, handle: Value) -> None:
        self.handle = handle

    @property
    def type(self) -> _t.Type:
        return self.handle.type

    @property
    def dtype(self) -> _t.ElemType:
        return _t.elem_of(self.handle.type)

    @property
    def shape(self) -> tuple[int, ...]:
        return _t.shape_of(self.handle.type)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __repr__(self) -> str:
        return f"tensor({self.type})"

    def __bool__(self) -> bool:
        raise TypeError(
            "a tensor has no Python truth value at trace time; use it as a condition of `if`/`while` "
            "directly (scalars only) or use tl.where for tiles"
        )

    def __iter__(self) -> Any:
        raise TypeError("a tensor cannot be iterated or unpacked; use tl.split, tl.reshape or a reduction")

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a scalar tensor; use x.shape, which is () for a scalar")
        return self.shape[0]

    # Operators, methods and indexing are attached in `tensor_methods` to keep this file small;
    # the operators are declared here for type checkers only.
    if TYPE_CHECKING:
        def __add__(self, other: Any) -> tensor: ...
        def __radd__(self, other: Any) -> tensor: ...
        def __sub__(self, other: Any) -> tensor: ...
        def __rsub__(self, other: Any) -> tensor: ...
        def __mul__(self, other: Any) -> tensor: ...
        def __rmul__(self, other: Any) -> tensor: ...
        def __truediv__(self, other: Any) -> tensor: ...
        def __rtruediv__(self, other: Any) -> tensor: ...
        def __floordiv__(self, other: Any) -> tensor: ...
        def __rfloordiv__(self, other: Any) -> tensor: ...
        def __mod__(self, other: Any) -> tensor: ...
        def __rmod__(self, other: Any) -> tensor: ...
        def __pow__(self, other: Any) -> tensor: ...
        def __rpow__(self, other: Any) -> tensor: ...
        def __lshift__(self, other: Any) -> tensor: ...
        def __rlshift__(self, other: Any) -> tensor: ...
        def __rshift__(self, other: Any) -> tensor: ...
        def __rrshift__(self, other: Any) -> tensor: ...
        def __and__(self, other: Any) -> tensor: ...
        def __rand__(self, other: Any) -> tensor: ...
        def __or__(self, other: Any) -> tensor: ...
        def __ror__(self, other: Any) -> tensor: ...
        def __xor__(self, other: Any) -> tensor: ...
        def __rxor__(self, other: Any) -> tensor: ...
        def __lt__(self, other: Any) -> tensor: ...
        def __le__(self, other: Any) -> tensor: ...
        def __gt__(self, other: Any) -> tensor: ...
        def __ge__(self, other: Any) -> tensor: ...
        def __neg__(self) -> tensor: ...
        def __pos__(self) -> tensor: ...
        def __invert__(self) -> tensor: ...
        def __abs__(self) -> tensor: ...
        def __getitem__(self, index: Any) -> tensor: ...
