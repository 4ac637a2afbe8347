"""libcuda's cuTensorMapEncodeTiled call as `LibCuda.encode_tiled` makes it: the arguments the driver receives
(through a C callback standing in for it), and the 128 bytes it reads back from a 64-byte aligned map."""

from __future__ import annotations

import ctypes
from typing import Any

from despina.runtime import libcuda


def _driver_stand_in(calls: list[dict[str, Any]]) -> Any:
    """A C function of cuTensorMapEncodeTiled's type that records what it was passed and writes 0..127 into the
    map, returning CUDA_SUCCESS."""
    def encode(out: int, data_type: int, rank: int, address: int, dims: Any, strides: Any, box: Any,
               element_strides: Any, interleave: int, swizzle: int, promotion: int, fill: int) -> int:
        calls.append({"aligned": out % 64 == 0, "data_type": data_type, "rank": rank, "address": address,
                      "dims": dims[:rank], "strides": strides[:rank - 1], "box": box[:rank],
                      "element_strides": element_strides[:rank], "interleave": interleave, "swizzle": swizzle,
                      "promotion": promotion, "fill": fill})
        ctypes.memmove(out, bytes(range(libcuda.TENSOR_MAP_BYTES)), libcuda.TENSOR_MAP_BYTES)
        return 0
    return libcuda._ENCODE_TILED(encode)


def test_encode_tiled_passes_the_map_and_promotes_l2_fills_to_128_bytes() -> None:
    lib = libcuda.LibCuda.__new__(libcuda.LibCuda)
    calls: list[dict[str, Any]] = []
    lib._encode_tiled = _driver_stand_in(calls)
    code, raw = lib.encode_tiled(6, 0x7F0000001000, [64, 8192, 3], [16384, 16384 * 8192], [64, 128, 1], 3, 0)
    assert (code, raw) == (0, bytes(range(128)))
    assert calls == [{"aligned": True, "data_type": 6, "rank": 3, "address": 0x7F0000001000,
                      "dims": [64, 8192, 3], "strides": [16384, 16384 * 8192], "box": [64, 128, 1],
                      "element_strides": [1, 1, 1], "interleave": 0, "swizzle": 3,
                      "promotion": 2,  # CU_TENSOR_MAP_L2_PROMOTION_L2_128B: 256 bytes ran 9-10% slower on an H200
                      "fill": 0}]
