"""Argument packing: every parameter type lands in its frame as the driver will read it."""

from __future__ import annotations

import ctypes
import struct

import numpy as np
import pytest

from despina.compiler.ir import types as t
from despina.runtime.packing import CONFIG_BYTES, ArgLayout, bf16_bits

# (type, value, the bytes the kernel reads: 4 bytes for the sub-32-bit types, extended)
CASES = [
    (t.int1, True, np.uint32(1).tobytes()),
    (t.int1, False, np.uint32(0).tobytes()),
    (t.int8, -3, np.int32(-3).tobytes()),
    (t.int16, -300, np.int32(-300).tobytes()),
    (t.int32, -(2**31), np.int32(-(2**31)).tobytes()),
    (t.int64, -(2**40) - 7, np.int64(-(2**40) - 7).tobytes()),
    (t.uint8, 255, np.uint32(255).tobytes()),
    (t.uint16, 65535, np.uint32(65535).tobytes()),
    (t.uint32, 2**32 - 1, np.uint32(2**32 - 1).tobytes()),
    (t.uint64, 2**64 - 1, np.uint64(2**64 - 1).tobytes()),
    (t.float16, 1.5, np.float16(1.5).tobytes() + b"\0\0"),
    (t.bfloat16, 1.5, np.uint16(0x3FC0).tobytes() + b"\0\0"),
    (t.float32, 0.1, np.float32(0.1).tobytes()),
    (t.float64, 0.1, np.float64(0.1).tobytes()),
    (t.PointerType(t.float32), 0x7F00_1234_5670, np.uint64(0x7F00_1234_5670).tobytes()),
]


def param_bytes(layout: ArgLayout, frame: object, index: int, size: int) -> bytes:
    """The bytes at the address the frame's params array holds for parameter `index`."""
    address = (ctypes.c_void_p * len(layout.offsets)).from_address(frame.params.value)[index]  # type: ignore[attr-defined]
    return ctypes.string_at(address or 0, size)


@pytest.mark.parametrize("ty, value, expected", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_every_type_lands_as_the_driver_reads_it(ty: t.ElemType, value: object, expected: bytes) -> None:
    layout = ArgLayout([t.int32, ty, t.int8])  # neighbours on both sides check the offsets too
    frame = layout.frame()
    layout.pack(frame, (1, 1, 1), 128, 0, 0, [7, value, -1])
    assert param_bytes(layout, frame, 1, len(expected)) == expected
    assert param_bytes(layout, frame, 0, 4) == np.int32(7).tobytes()
    assert param_bytes(layout, frame, 2, 4) == np.int32(-1).tobytes()
    assert layout.offsets[1] % min(len(expected), 8) == 0


def test_launch_config_is_a_cu_launch_config() -> None:
    layout = ArgLayout([t.PointerType(t.float32)])
    frame = layout.frame()
    layout.pack(frame, (7, 8, 9), 256, 65536, 0xABCDEF, [0x1000])
    raw = ctypes.string_at(frame.config.value, 56)
    assert struct.unpack_from("=7I", raw) == (7, 8, 9, 256, 1, 1, 65536)
    assert struct.unpack_from("=QQI", raw, 32) == (0xABCDEF, 0, 0)  # stream, attrs = NULL, numAttrs = 0
    assert layout.offsets == [CONFIG_BYTES]


def test_config_matches_cuda_bindings_cu_launch_config() -> None:
    driver = pytest.importorskip("cuda.bindings.driver")
    config = driver.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = 7, 8, 9
    config.blockDimX, config.blockDimY, config.blockDimZ = 256, 1, 1
    config.sharedMemBytes, config.hStream, config.numAttrs = 1024, driver.CUstream(0xABC), 0
    layout = ArgLayout([])
    frame = layout.frame()
    layout.pack(frame, (7, 8, 9), 256, 1024, 0xABC, [])
    assert ctypes.string_at(config.getPtr(), 52) == ctypes.string_at(frame.config.value, 52)


def test_no_parameters_gives_a_null_params_array() -> None:
    layout = ArgLayout([])
    frame = layout.frame()
    layout.pack(frame, (1, 1, 1), 32, 0, 0, [])
    assert frame.params.value is None


def test_frames_are_independent() -> None:
    layout = ArgLayout([t.int64])
    a, b = layout.frame(), layout.frame()
    layout.pack(a, (1, 1, 1), 32, 0, 0, [1])
    layout.pack(b, (1, 1, 1), 32, 0, 0, [2])
    assert param_bytes(layout, a, 0, 8) == np.int64(1).tobytes()
    assert param_bytes(layout, b, 0, 8) == np.int64(2).tobytes()


@pytest.mark.parametrize("types, first", [
    ([], CONFIG_BYTES), ([t.int8], 128), ([t.PointerType(t.float16), t.int32, t.int32, t.int64, t.int32], 128)],
    ids=["alone", "after-4-bytes", "after-28-bytes"])
def test_tensor_maps_follow_the_parameters_on_64_byte_boundaries(types: list[t.ElemType], first: int) -> None:
    layout = ArgLayout(types, tensor_maps=2)
    assert layout.offsets[len(types):] == [first, first + 128] and layout.values_end == first + 256
    maps = bytes(range(128)) + bytes(range(128, 256))
    for frame in [layout.frame() for _ in range(4)]:  # wherever the allocator puts them
        layout.pack(frame, (1, 1, 1), 32, 0, 0, [1] * len(types) + [maps])
        base = ctypes.addressof(frame.buffer)
        assert base % 64 == 0 and frame.config.value == base
        # the kernelParams pointers: every parameter's address, the maps' 64-byte aligned
        pointers = list((ctypes.c_void_p * len(layout.offsets)).from_address(frame.params.value or 0))
        assert [(p or 0) - base for p in pointers] == layout.offsets
        assert all((p or 0) % 64 == 0 for p in pointers[len(types):])
        assert param_bytes(layout, frame, len(types), 128) == maps[:128]
        assert param_bytes(layout, frame, len(types) + 1, 128) == maps[128:]
        assert all(param_bytes(layout, frame, i, 4) == np.int32(1).tobytes() for i in range(len(types)))


def test_a_layout_without_tensor_maps_is_unchanged() -> None:
    layout = ArgLayout([t.int8, t.int64])
    assert layout.struct.format == ArgLayout([t.int8, t.int64], tensor_maps=0).struct.format == "=7I4xQ24xi4xq"
    assert layout.offsets == [CONFIG_BYTES, CONFIG_BYTES + 8] and layout.values_end == CONFIG_BYTES + 16


def test_out_of_range_values_are_errors_not_wrapped() -> None:
    layout = ArgLayout([t.int32])
    with pytest.raises(struct.error):
        layout.pack(layout.frame(), (1, 1, 1), 32, 0, 0, [2**31])


@pytest.mark.parametrize("value", [1.0, -2.5, 3.0e38, 1.0e-40, float("inf"), 1.00390625, 1.01171875])
def test_bf16_bits_round_to_nearest_even(value: float) -> None:
    bits = np.float32(value).view(np.uint32).astype(np.uint64)
    expected = int((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16)
    assert bf16_bits(value) == expected
    assert bf16_bits(float("nan")) == 0x7FC0
