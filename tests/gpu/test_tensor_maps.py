"""TMA tensor maps made by the driver: cuTensorMapEncodeTiled through libcuda, the checks before it,
and a kernel that receives the maps' bytes after its parameters exactly as the launch encoded them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from despina.compiler.ir import types as t
from despina.runtime import TensorMapError, driver, libcuda
from despina.runtime.launcher import Launcher
from despina.runtime.tensor_maps import TensorMaps

from .ptx import cubin

FP16, SWIZZLE_128B, FILL_ZERO = 6, 3, 0  # CUtensorMapDataType, CUtensorMapSwizzle, CUtensorMapFloatOOBfill

# out (16 words), x (rows of 64 fp16), n rows: the map of x in 64 x 64 boxes, swizzled by 128 bytes
NAMES = ["out", "x", "n"]
TYPES: list[t.Type] = [t.PointerType(t.uint64), t.PointerType(t.float16), t.int32]
X_MAP = {"dtype": "fp16", "base": {"arg": 1}, "shape": [{"arg": 2}, {"value": 64}], "strides": [{"value": 64}],
         "box": [64, 64], "swizzle": 128, "fill": "zero"}


def test_encode_a_2d_fp16_map(torch_cuda: Any) -> None:
    x = torch_cuda.zeros((256, 128), dtype=torch_cuda.float16, device="cuda")
    code, raw = libcuda.get().encode_tiled(FP16, x.data_ptr(), [128, 256], [256], [64, 64], SWIZZLE_128B, FILL_ZERO)
    assert code == 0 and len(raw) == 128
    assert sum(b != 0 for b in raw) >= 8  # an address, sizes and strides: not an empty map


def test_a_misaligned_base_is_refused_before_the_driver(torch_cuda: Any) -> None:
    x = torch_cuda.zeros((256, 64), dtype=torch_cuda.float16, device="cuda")
    maps = TensorMaps("k", NAMES, TYPES, [X_MAP], lambda *args: None, libcuda.get().encode_tiled)
    with pytest.raises(TensorMapError, match=r"kernel 'k': tensor map 0 \(fp16, shape \[n=255, 64\], strides \[64, 1\], "
                                             r"box \[64, 64\], swizzle 128\): its base address x=0x[0-9a-f]+ is not "
                                             "16-byte aligned, as TMA requires"):
        maps.pack_into(None, 0, 1, 1, 1, 32, 1, 1, 0, 0, 0, x.data_ptr() + 2, 255)


def test_the_kernel_receives_each_launchs_map(gpu_device: driver.Device, torch_cuda: Any) -> None:
    function = gpu_device.load(cubin("map_echo", gpu_device.target), "map_echo", 0, 1)
    launcher = Launcher(function, NAMES, TYPES, metadata={"tensor_maps": [X_MAP]})
    out = torch_cuda.zeros(16, dtype=torch_cuda.int64, device="cuda")
    seen = []
    for rows in (256, 128):
        x = torch_cuda.zeros((rows, 64), dtype=torch_cuda.float16, device="cuda")
        launcher.launch((1, 1, 1), {"out": out.data_ptr(), "x": x.data_ptr(), "n": rows}, 0)
        torch_cuda.cuda.synchronize()
        seen.append(out.cpu().numpy().tobytes())
        assert launcher.tensor_maps is not None
        assert seen[-1] == launcher.tensor_maps.cache[(x.data_ptr(), rows)]
    assert seen[0] != seen[1] and all(np.frombuffer(s, np.uint64).any() for s in seen)
