"""Kernel arguments packed once per specialization, written by one `struct.pack_into` per launch.

A launch's memory is one `Frame`: the `CUlaunchConfig` that cuLaunchKernelEx reads (grid, block,
shared memory, stream), then every parameter's value at its natural alignment, then the
`void *params[]` array pointing at those values. `ArgLayout.struct` covers the config and the
values, so a launch is `struct.pack_into(frame.buffer, 0, x, y, z, threads, 1, 1, shared, stream,
*values)`: one C call, nothing allocated. Each thread gets its own frame, so launches from several
threads never see each other's values.

A kernel that copies with TMA takes, after its own parameters, 128-byte `CUtensorMap`s by value: the
layout puts them on a 64-byte boundary (a frame starts on one), one after the other, and the struct
takes their bytes as one more value (`tensor_maps.TensorMaps` makes them).

    layout = ArgLayout([PointerType(float32), int32])
    frame = layout.frame()
    layout.struct.pack_into(frame.buffer, 0, 4, 1, 1, 128, 1, 1, 0, 0, x.data_ptr(), n)
    cuLaunchKernelEx(frame.config, function, frame.params, None)
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from despina.compiler.ir.types import PointerType, ScalarType, Type

# CUlaunchConfig: gridDim x/y/z, blockDim x/y/z, sharedMemBytes (7 x u32), pad, hStream (u64),
# attrs (NULL) and numAttrs (0) as zeroed padding; the parameter values start at byte 64.
CONFIG = "=7I4xQ24x"
CONFIG_BYTES = 64
CONFIG_VALUES = 8  # the values the struct takes before the parameters'
STREAM_OFFSET = 32
TENSOR_MAP_BYTES = 128
TENSOR_MAP_ALIGN = 64


def config_stream(config: ctypes.c_void_p) -> int:
    """The stream of the launch packed at `config` (a Frame's `config`)."""
    return ctypes.c_uint64.from_address((config.value or 0) + STREAM_OFFSET).value

# Each parameter: its struct code and the bytes it occupies. Parameters narrower than 32 bits take
# 4 bytes holding the value sign- or zero-extended: the driver copies as many bytes as the PTX
# parameter has (.u8 for an i1 or i8, or .u32 where LLVM widened it) and, little-endian, both
# read the right value.
_CODES: dict[str, tuple[str, int]] = {
    "int1": ("I", 4), "int8": ("i", 4), "int16": ("i", 4), "int32": ("i", 4), "int64": ("q", 8),
    "uint8": ("I", 4), "uint16": ("I", 4), "uint32": ("I", 4), "uint64": ("Q", 8),
    "fp16": ("e2x", 4), "bf16": ("H2x", 4), "fp32": ("f", 4), "fp64": ("d", 8),
}


def bf16_bits(value: float) -> int:
    """The bf16 bit pattern of `value`, rounded to nearest even (NaN stays a quiet NaN)."""
    if value != value:
        return 0x7FC0
    bits = int(np.float32(value).view(np.uint32))
    return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16


def _code(ty: Type) -> tuple[str, int]:
    if isinstance(ty, PointerType):
        return "Q", 8
    if not isinstance(ty, ScalarType):
        raise TypeError(f"a kernel parameter is a scalar or a pointer, not {ty}")
    return _CODES[ty.name]


class Frame:
    """One thread's launch memory: `buffer`, starting on a 64-byte boundary, and the addresses
    cuLaunchKernelEx takes."""

    __slots__ = ("buffer", "config", "params")

    def __init__(self, layout: ArgLayout) -> None:
        words = (layout.values_end + 7) // 8 + max(len(layout.offsets), 1)
        memory = (ctypes.c_uint64 * (words + TENSOR_MAP_ALIGN // 8 - 1))()
        self.buffer = (ctypes.c_uint64 * words).from_buffer(memory, -ctypes.addressof(memory) % TENSOR_MAP_ALIGN)
        base = ctypes.addressof(self.buffer)
        pointers = (ctypes.c_void_p * max(len(layout.offsets), 1)).from_address(base + 8 * ((layout.values_end + 7) // 8))
        for i, offset in enumerate(layout.offsets):
            pointers[i] = base + offset
        self.config = ctypes.c_void_p(base)
        self.params = ctypes.c_void_p(ctypes.addressof(pointers) if layout.offsets else None)


class ArgLayout:
    """Where each parameter of a kernel signature lives in a Frame, and the struct that writes them:
    `types`' values, then the bytes of `tensor_maps` CUtensorMaps (one value, `bytes`, when there are
    any). `convert(values)` turns Python values into what the struct takes (only bf16 needs it)."""

    def __init__(self, types: Sequence[Type], tensor_maps: int = 0) -> None:
        self.types = list(types)
        self.tensor_maps = tensor_maps
        fmt, offset, self.offsets = CONFIG, CONFIG_BYTES, []
        for ty in self.types:
            code, size = _code(ty)
            pad = -offset % min(size, 8)
            fmt += f"{pad}x" * bool(pad) + code
            offset += pad
            self.offsets.append(offset)
            offset += size
        if tensor_maps:
            pad = -offset % TENSOR_MAP_ALIGN
            fmt += f"{pad}x" * bool(pad) + f"{TENSOR_MAP_BYTES * tensor_maps}s"
            offset += pad
            self.offsets += [offset + TENSOR_MAP_BYTES * i for i in range(tensor_maps)]
            offset += TENSOR_MAP_BYTES * tensor_maps
        self.values_end = offset
        self.struct = struct.Struct(fmt)
        self.converters: list[tuple[int, Callable[[Any], Any]]] = [
            (i, bf16_bits) for i, ty in enumerate(self.types) if isinstance(ty, ScalarType) and ty.name == "bf16"]

    def frame(self) -> Frame:
        return Frame(self)

    def convert(self, values: Sequence[Any]) -> list[Any]:
        out = list(values)
        for i, convert in self.converters:
            out[i] = convert(out[i])
        return out

    def pack(self, frame: Frame, grid: tuple[int, int, int], block: int, shared: int, stream: int,
             values: Sequence[Any], pack_into: Callable[..., None] | None = None) -> None:
        """Write a whole launch into `frame` (the general path; the JIT's fast path calls the struct itself),
        with the struct's `pack_into` or one that adds the tensor maps' bytes (`Launcher.pack_into`): then
        `values` are the parameters' alone, else the parameters', then the tensor maps' bytes if the layout
        has any."""
        (pack_into or self.struct.pack_into)(frame.buffer, 0, *grid, block, 1, 1, shared, stream, *self.convert(values))

    def raw(self, frame: Frame, index: int) -> bytes:
        """The 8 bytes from parameter `index`'s address in `frame`, as the driver would read them."""
        return ctypes.string_at(ctypes.addressof(frame.buffer) + self.offsets[index], 8)
