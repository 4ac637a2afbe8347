"""The TMA tensor maps a kernel takes after its own parameters: 128-byte `CUtensorMap`s passed by
value, made on the host from the launch's values.

The backend's metadata lists them, one entry per extra parameter, in order:

    metadata["tensor_maps"] = [
        {"dtype": "fp16", "base": {"arg": 0}, "shape": [{"arg": 3}, {"arg": 4}], "strides": [{"arg": 5}],
         "box": [64, 64], "swizzle": 128, "fill": "zero"}]

A source is `{"arg": i}`, the value the launch passes for the kernel's i-th parameter (an address or an
int), or `{"value": n}`. `shape` and `box` are outermost first; `strides` are in elements, one per
dimension but the last (whose stride is 1); `swizzle` is 0, 32, 64 or 128 bytes; `fill`, what reads
outside the tensor give, "zero" or "nan". `"clamp": true` marks the map of a pointer load that TMA copies
(gpuir/pointer_tiles.py): a size there is the bound of the load's mask, and a negative one excludes every
element, as a size of 0 does, so it maps as 0; a descriptor's negative size is an error.

A tensor with a size of 0 (a matmul launched with K = 0, whose A is M x 0) has nothing TMA could map:
its map is made over a fill buffer instead (`fill_buffer`, `driver.fill_buffer`: 16 bytes of the
launch's context, made once, holding the fill's bits for the map's dtype: 0, or the dtype's quiet
NaN, NAN_BITS), with
every dimension 1, the smallest strides TMA takes (16 bytes) and the same box and swizzle. Element
(0, 0, ...) is then the only one in bounds and reads the fill, and TMA fills every other element of
a box itself: every read of the map gives the fill, as the same kernel's masked loads (without TMA,
or in the interpreter) read an empty tensor. The tensor's base and strides are not used (an empty
tensor's may be any). A negative size is an error.

`TensorMaps.pack_into` stands for the launch struct's `pack_into` (`packing.ArgLayout`): it adds the
maps' bytes, found in a small cache by the values they are made from, so that a launch with the same
tensors as an earlier one costs a dict lookup; a new set is checked against what TMA requires and
encoded by cuTensorMapEncodeTiled (`libcuda.LibCuda.encode_tiled`).
"""

from __future__ import annotations

import operator
import struct
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from despina.compiler.ir.types import SCALAR_NAMES, PointerType, ScalarType, Type

from .errors import TensorMapError, error_name
from .packing import CONFIG_VALUES

# (data type, address, dims innermost first, byte strides of dims 1.., box innermost first, swizzle, fill)
# -> (CUresult, the map's 128 bytes): LibCuda.encode_tiled.
Encode = Callable[[int, int, Sequence[int], Sequence[int], Sequence[int], int, int], tuple[int, bytes]]
# The fill's bits (little-endian) -> the device address of a 16-byte-aligned buffer, in the launch's
# context, that starts with them: driver.fill_buffer.
FillBuffer = Callable[[bytes], int]

# CUtensorMapDataType of each IR element type: a load copies bits, so a signed type may take an unsigned
# map of its size, and fp8 takes UINT8's. fp32 is FLOAT32, not TFLOAT32 (which rounds).
DATA_TYPES: dict[str, int] = {
    "int8": 0, "uint8": 0, "fp8e4nv": 0, "fp8e5": 0, "int16": 1, "uint16": 1, "uint32": 2, "int32": 3,
    "uint64": 4, "int64": 5, "fp16": 6, "fp32": 7, "fp64": 8, "bf16": 9,
}
SWIZZLES = {0: 0, 32: 1, 64: 2, 128: 3}  # bytes -> CUtensorMapSwizzle
FILLS = {"zero": 0, "nan": 1}  # -> CUtensorMapFloatOOBfill (NONE reads zeros; NAN_REQUEST_ZERO_FMA)
MAX_RANK = 5
MAX_BOX = 256
MAX_DIM = 2**32
MAX_STRIDE_BYTES = 2**40
EMPTY_STRIDE = 16  # bytes: each stride of an empty tensor's map, over its fill buffer
# The bits of fill "nan" (a quiet NaN) of each floating-point dtype, little-endian; "zero" is all zero bits.
NAN_BITS: dict[str, bytes] = {
    "fp16": struct.pack("<H", 0x7E00), "bf16": struct.pack("<H", 0x7FC0), "fp32": struct.pack("<I", 0x7FC00000),
    "fp64": struct.pack("<Q", 0x7FF8000000000000), "fp8e4nv": b"\x7f", "fp8e5": b"\x7e",
}
MAX_CACHED = 256  # sets of maps kept per launcher; past this, the oldest goes

Source = tuple[int | None, int]  # (the parameter's index, None for a constant; the constant)


@dataclass(frozen=True)
class MapSpec:
    """One tensor map as the metadata describes it, its sources resolved to parameter indices."""

    dtype: str
    base: Source
    shape: tuple[Source, ...]
    strides: tuple[Source, ...]
    box: tuple[int, ...]
    swizzle: int
    fill: str
    clamp: bool = False

    @property
    def itemsize(self) -> int:
        return ScalarType(self.dtype).itemsize

    @property
    def fill_bits(self) -> bytes:
        """One element of the fill, as the map's dtype stores it."""
        return NAN_BITS[self.dtype] if self.fill == "nan" else bytes(self.itemsize)


class TensorMaps:
    """The tensor maps of kernel `kernel` (parameters `arg_names` of `arg_types`), as `entries`
    (metadata["tensor_maps"]) describes them. `pack_into(buffer, offset, *args)` takes what
    `struct_pack_into` takes less the maps' bytes (the config's values, then the parameters') and
    calls it with the bytes added; `encode` is LibCuda.encode_tiled, `fill_buffer` driver.fill_buffer
    (asked only for the map of an empty tensor). A malformed entry is a TensorMapError here, when the
    kernel is loaded."""

    def __init__(self, kernel: str, arg_names: Sequence[str], arg_types: Sequence[Type],
                 entries: Sequence[Mapping[str, Any]], struct_pack_into: Callable[..., None], encode: Encode,
                 fill_buffer: FillBuffer) -> None:
        self.kernel = kernel
        self.arg_names = list(arg_names)
        self.specs = [self._spec(i, entry, arg_types) for i, entry in enumerate(entries)]
        self.struct_pack_into = struct_pack_into
        self.encode = encode
        self.fill_buffer = fill_buffer
        used = sorted({i for s in self.specs for i, _ in (s.base, *s.shape, *s.strides) if i is not None})
        self.key: Callable[[Sequence[Any]], Any] = (
            operator.itemgetter(*(CONFIG_VALUES + i for i in used)) if used else _no_key)
        self.cache: dict[Any, bytes] = {}
        self.lock = threading.Lock()

    def pack_into(self, buffer: Any, offset: int, *args: Any) -> None:
        key = self.key(args)
        maps = self.cache.get(key)
        if maps is None:
            maps = self.make(key, args[CONFIG_VALUES:])
        self.struct_pack_into(buffer, offset, *args, maps)

    def make(self, key: Any, values: Sequence[Any]) -> bytes:
        """The bytes of every map for the launch of parameter values `values`, filed under `key`."""
        maps = b"".join(self._encode(i, spec, values) for i, spec in enumerate(self.specs))
        with self.lock:
            if len(self.cache) >= MAX_CACHED:
                del self.cache[next(iter(self.cache))]
            self.cache[key] = maps
        return maps

    def _encode(self, index: int, spec: MapSpec, values: Sequence[Any]) -> bytes:
        base = self._value(spec.base, values)
        shape = [max(self._value(s, values), 0) if spec.clamp else self._value(s, values) for s in spec.shape]
        strides = [self._value(s, values) for s in spec.strides]
        where = self._where(index, spec, values)
        empty = 0 in shape
        for source, dim in zip(spec.shape, shape):
            if dim < 0 or (dim > MAX_DIM and not empty):
                raise TensorMapError(f"{where}: dimension {self._named(source, values)} is outside 0..2^32, the sizes "
                                     "TMA maps (a size of 0, an empty tensor, makes a map whose every read gives "
                                     "the fill)")
        if empty:
            return self._encode_empty(where, spec)
        if base % 16:
            raise TensorMapError(f"{where}: its base address {self._named(spec.base, values, hex)} is not 16-byte "
                                 "aligned, as TMA requires; pass a tensor whose first element starts on a 16-byte "
                                 "boundary (a fresh allocation, or a view at an offset that is a multiple of 16 bytes)")
        for source, stride in zip(spec.strides, strides):
            nbytes = stride * spec.itemsize
            if not 0 < nbytes < MAX_STRIDE_BYTES or nbytes % 16:
                raise TensorMapError(f"{where}: stride {self._named(source, values)} is {nbytes} bytes of {spec.dtype}; "
                                     "TMA steps by positive multiples of 16 bytes below 2^40: pad the rows so that "
                                     "each starts on a 16-byte boundary (or make the tensor contiguous)")
        code, raw = self.encode(DATA_TYPES[spec.dtype], base, shape[::-1], [s * spec.itemsize for s in strides[::-1]],
                                list(spec.box[::-1]), SWIZZLES[spec.swizzle], FILLS[spec.fill])
        if code:
            raise TensorMapError(f"{where}: cuTensorMapEncodeTiled failed: {error_name(code)}; check that the shape "
                                 "and strides describe the tensor's own memory (each stride at least the extent of "
                                 "the dimensions inside it) and that the driver supports TMA (CUDA 12.0 or newer, "
                                 "a GPU of compute capability 9.0 or newer)", code)
        return raw

    def _encode_empty(self, where: str, spec: MapSpec) -> bytes:
        """The map of an empty tensor: every dimension 1 over a fill buffer whose first element is the
        fill, so that each element of every box reads the fill (see the module's docstring)."""
        rank = len(spec.shape)
        address = self.fill_buffer(spec.fill_bits)
        code, raw = self.encode(DATA_TYPES[spec.dtype], address, [1] * rank, [EMPTY_STRIDE] * (rank - 1),
                                list(spec.box[::-1]), SWIZZLES[spec.swizzle], FILLS[spec.fill])
        if code:
            raise TensorMapError(f"{where}: cuTensorMapEncodeTiled failed: {error_name(code)} for the map of this "
                                 f"empty tensor (every dimension 1, over a fill buffer at {address:#x}); check that "
                                 "the driver supports TMA (CUDA 12.0 or newer, a GPU of compute capability 9.0 or "
                                 "newer)", code)
        return raw

    def _value(self, source: Source, values: Sequence[Any]) -> int:
        index, constant = source
        if index is None:
            return constant
        try:
            return operator.index(values[index])
        except TypeError:
            raise TensorMapError(f"kernel '{self.kernel}': parameter {self.arg_names[index]} gives a tensor map its "
                                 f"address or size, so it must be an integer, not {type(values[index]).__name__}") from None

    def _named(self, source: Source, values: Sequence[Any], show: Callable[[int], str] = str) -> str:
        """`M=4096` for parameter M, the value alone for a constant."""
        value = show(self._value(source, values))
        return value if source[0] is None else f"{self.arg_names[source[0]]}={value}"

    def _where(self, index: int, spec: MapSpec, values: Sequence[Any]) -> str:
        shape = ", ".join(self._named(s, values) for s in spec.shape)
        strides = ", ".join([self._named(s, values) for s in spec.strides] + ["1"])
        return (f"kernel '{self.kernel}': tensor map {index} ({spec.dtype}, shape [{shape}], strides [{strides}], "
                f"box {list(spec.box)}, swizzle {spec.swizzle})")

    def _spec(self, index: int, entry: Mapping[str, Any], arg_types: Sequence[Type]) -> MapSpec:
        where = f"kernel '{self.kernel}': tensor map {index} of its metadata ({dict(entry)})"

        def bad(what: str) -> TensorMapError:
            return TensorMapError(f"{where}: {what}; the compiler described a map TMA cannot make: report it as a "
                                  "despina bug")

        def source(value: Any, pointer: bool) -> Source:
            if isinstance(value, Mapping) and set(value) == {"value"} and isinstance(value["value"], int):
                return None, int(value["value"])
            if not (isinstance(value, Mapping) and set(value) == {"arg"} and isinstance(value["arg"], int)
                    and 0 <= value["arg"] < len(arg_types)):
                raise bad(f"{value!r} is neither {{'arg': i}} for one of its {len(arg_types)} parameters nor "
                          "{'value': n}")
            i = int(value["arg"])
            ty = arg_types[i]
            if isinstance(ty, PointerType) != pointer or not (pointer or isinstance(ty, ScalarType) and ty.is_int()):
                raise bad(f"parameter {self.arg_names[i]} is {ty}, not {'a pointer' if pointer else 'an integer'}")
            return i, 0

        dtype = entry.get("dtype")
        if dtype not in DATA_TYPES:
            raise bad(f"dtype {dtype!r} is none of {', '.join(n for n in SCALAR_NAMES if n in DATA_TYPES)}")
        shape, strides, box = entry.get("shape") or [], entry.get("strides") or [], entry.get("box") or []
        if not 1 <= len(shape) <= MAX_RANK or len(strides) != len(shape) - 1 or len(box) != len(shape):
            raise bad(f"it needs rank 1 to {MAX_RANK}, with one box size per dimension and one stride per dimension "
                      "but the last")
        spec = MapSpec(str(dtype), source(entry.get("base"), True), tuple(source(s, False) for s in shape),
                       tuple(source(s, False) for s in strides), tuple(box), entry.get("swizzle", -1),
                       entry.get("fill", ""), entry.get("clamp", False))
        if spec.clamp not in (False, True):
            raise bad(f"clamp {spec.clamp!r} is not a bool")
        if spec.swizzle not in SWIZZLES:
            raise bad(f"swizzle {spec.swizzle!r} is none of 0, 32, 64, 128 (bytes)")
        if spec.fill not in FILLS or (spec.fill == "nan" and not ScalarType(spec.dtype).is_floating()):
            raise bad(f"fill {spec.fill!r} is not 'zero', or 'nan' for a floating-point dtype")
        if not all(isinstance(b, int) and 1 <= b <= MAX_BOX for b in box):
            raise bad(f"box {list(box)} has sizes outside 1..{MAX_BOX}")
        row = box[-1] * spec.itemsize
        if row % 16:
            raise bad(f"the box's rows are {row} bytes, not a multiple of 16")
        if spec.swizzle and row > spec.swizzle:
            raise bad(f"the box's rows are {row} bytes, more than its {spec.swizzle}-byte swizzle")
        return spec


def _no_key(args: Sequence[Any]) -> None:
    """The cache key of maps made of constants alone: one set for every launch."""
    return None
