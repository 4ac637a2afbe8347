"""Types of the tile IR: scalars, pointers and tiles (a shape over a scalar or pointer).

The same objects are the language's dtypes (`tl.float32` is `ScalarType("fp32")`), so there
is one definition of every type in the project.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# name -> (kind, bits, signed); kind is "int", "float" or "bool" ("int1" is a bool-like int).
_SCALARS: dict[str, tuple[str, int, bool]] = {
    "int1": ("int", 1, True),
    "int8": ("int", 8, True),
    "int16": ("int", 16, True),
    "int32": ("int", 32, True),
    "int64": ("int", 64, True),
    "uint8": ("int", 8, False),
    "uint16": ("int", 16, False),
    "uint32": ("int", 32, False),
    "uint64": ("int", 64, False),
    "fp16": ("float", 16, True),
    "bf16": ("float", 16, True),
    "fp32": ("float", 32, True),
    "fp64": ("float", 64, True),
    "fp8e4nv": ("float", 8, True),
    "fp8e5": ("float", 8, True),
}

SCALAR_NAMES: tuple[str, ...] = tuple(_SCALARS)


@dataclass(frozen=True)
class ScalarType:
    """A scalar element type, named as in Triton (`fp32`, `int32`, `uint8`, `bf16`, `int1`)."""

    name: str

    def __post_init__(self) -> None:
        if self.name not in _SCALARS:
            raise ValueError(f"unknown scalar type {self.name!r}; known: {', '.join(SCALAR_NAMES)}")

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return self.name

    @property
    def primitive_bitwidth(self) -> int:
        return _SCALARS[self.name][1]

    @property
    def itemsize(self) -> int:
        return max(1, self.primitive_bitwidth // 8)

    @property
    def scalar(self) -> ScalarType:
        return self

    def is_floating(self) -> bool:
        return _SCALARS[self.name][0] == "float"

    def is_int(self) -> bool:
        return _SCALARS[self.name][0] == "int"

    def is_bool(self) -> bool:
        return self.name == "int1"

    def is_int_signed(self) -> bool:
        return self.is_int() and _SCALARS[self.name][2]

    def is_int_unsigned(self) -> bool:
        return self.is_int() and not _SCALARS[self.name][2]

    def is_ptr(self) -> bool:
        return False

    def is_fp16(self) -> bool:
        return self.name == "fp16"

    def is_bf16(self) -> bool:
        return self.name == "bf16"

    def is_fp32(self) -> bool:
        return self.name == "fp32"

    def is_fp64(self) -> bool:
        return self.name == "fp64"

    def is_fp8(self) -> bool:
        """An 8-bit float: `fp8e4nv` (OCP e4m3fn) or `fp8e5` (e5m2). They are storage and `dot`
        operand types: arithmetic needs a cast to a wider float first, as in Triton."""
        return self.name in ("fp8e4nv", "fp8e5")

    def is_block(self) -> bool:
        return False

    @property
    def int_bitwidth(self) -> int:
        return self.primitive_bitwidth

    def with_signedness(self, signed: bool) -> ScalarType:
        if not self.is_int() or self.is_bool():
            return self
        return ScalarType(("int" if signed else "uint") + str(self.primitive_bitwidth))


@dataclass(frozen=True)
class PointerType:
    """A pointer to global memory (`address_space` 1) holding `element_ty` values."""

    element_ty: ElemType
    address_space: int = 1

    def __str__(self) -> str:
        return f"ptr<{self.element_ty}>" if self.address_space == 1 else f"ptr<{self.element_ty}, {self.address_space}>"

    __repr__ = __str__

    @property
    def name(self) -> str:
        return str(self)

    @property
    def scalar(self) -> PointerType:
        return self

    @property
    def primitive_bitwidth(self) -> int:
        return 64

    @property
    def itemsize(self) -> int:
        return 8

    def is_floating(self) -> bool:
        return False

    def is_int(self) -> bool:
        return False

    def is_bool(self) -> bool:
        return False

    def is_int_signed(self) -> bool:
        return False

    def is_int_unsigned(self) -> bool:
        return False

    def is_ptr(self) -> bool:
        return True

    def is_block(self) -> bool:
        return False


ElemType = ScalarType | PointerType


@dataclass(frozen=True)
class TileType:
    """A tile: a static `shape` (at least one dimension) of `element_ty` values.

    In the GPU IR every tile type also names its `encoding`: how its elements are spread over the
    threads of a block (a backend's layout object, hashable, printed by its `str`). Two tiles of one
    shape in different layouts are different types there. The tile IR, which the client sends and
    the daemon verifies, has none (`verifier.verify` refuses them)."""

    shape: tuple[int, ...]
    element_ty: ElemType
    encoding: Any = None

    def __post_init__(self) -> None:
        if not self.shape or any(not isinstance(d, int) or d <= 0 for d in self.shape):
            raise ValueError(f"tile shape must be non-empty positive integers, got {self.shape}")

    def __str__(self) -> str:
        layout = "" if self.encoding is None else f", {self.encoding}"
        return "tile<" + "x".join(str(d) for d in self.shape) + f"x{self.element_ty}{layout}>"

    def without_encoding(self) -> TileType:
        return TileType(self.shape, self.element_ty) if self.encoding is not None else self

    __repr__ = __str__

    @property
    def scalar(self) -> ElemType:
        return self.element_ty

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def is_block(self) -> bool:
        return True

    def is_ptr(self) -> bool:
        return False


@dataclass(frozen=True)
class BufferType:
    """GPU IR only: a tile of `shape` x `element_ty` held in shared memory, placed by `encoding` (the
    backend's shared-memory layout: which element each offset of the buffer holds). The tile IR has no
    buffers (`verifier.verify` refuses them)."""

    shape: tuple[int, ...]
    element_ty: ElemType
    encoding: Any = None

    def __str__(self) -> str:
        layout = "" if self.encoding is None else f", {self.encoding}"
        return "shared<" + "x".join(str(d) for d in self.shape) + f"x{self.element_ty}{layout}>"

    __repr__ = __str__

    def without_encoding(self) -> BufferType:
        return BufferType(self.shape, self.element_ty) if self.encoding is not None else self


Type = ScalarType | PointerType | TileType | BufferType


def shape_of(ty: Type) -> tuple[int, ...]:
    """The tile (or buffer) shape of `ty`, `()` for a scalar or pointer."""
    return ty.shape if isinstance(ty, (TileType, BufferType)) else ()


def elem_of(ty: Type) -> ElemType:
    return ty.element_ty if isinstance(ty, (TileType, BufferType)) else ty


def with_shape(elem: ElemType, shape: tuple[int, ...]) -> Type:
    """`elem` itself for shape `()`, else a tile of `elem`."""
    return TileType(tuple(shape), elem) if shape else elem


def with_elem(ty: Type, elem: ElemType) -> Type:
    return with_shape(elem, shape_of(ty))


int1 = ScalarType("int1")
int8 = ScalarType("int8")
int16 = ScalarType("int16")
int32 = ScalarType("int32")
int64 = ScalarType("int64")
uint8 = ScalarType("uint8")
uint16 = ScalarType("uint16")
uint32 = ScalarType("uint32")
uint64 = ScalarType("uint64")
float16 = ScalarType("fp16")
bfloat16 = ScalarType("bf16")
float32 = ScalarType("fp32")
float64 = ScalarType("fp64")
float8e4nv = ScalarType("fp8e4nv")
float8e5 = ScalarType("fp8e5")


def parse_type(text: str) -> Type:
    """Parse the printed form of a type: `fp32`, `ptr<fp16>`, `tile<64x32xptr<fp32>>`."""
    text = text.strip()
    if text.startswith("tile<") and text.endswith(">"):
        body = text[5:-1]
        dims: list[int] = []
        while True:
            head, sep, rest = body.partition("x")
            if not sep or not head.isdigit():
                break
            dims.append(int(head))
            body = rest
        return TileType(tuple(dims), _parse_elem(body))
    return _parse_elem(text)


def _parse_elem(text: str) -> ElemType:
    if text.startswith("ptr<") and text.endswith(">"):
        inner = text[4:-1]
        space = 1
        head, sep, tail = inner.rpartition(",")
        if sep and tail.strip().isdigit() and head.count("<") == head.count(">"):
            inner, space = head, int(tail)
        elem = parse_type(inner)
        if isinstance(elem, (TileType, BufferType)):
            raise ValueError(f"a pointer cannot point to a tile: {text!r}")
        return PointerType(elem, space)
    return ScalarType(text)
