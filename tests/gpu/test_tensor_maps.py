"""TMA tensor maps made by the driver: cuTensorMapEncodeTiled through libcuda, the checks before it,
a kernel that receives the maps' bytes after its parameters exactly as the launch encoded them, and
the maps of empty tensors, over the driver's fill buffers: encoded, the buffers' bits read back, and
descriptor matmuls with K = 0 or with an A of no rows, which read only the fill."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from despina.compiler.ir import types as t
from despina.runtime import TensorMapError, driver, libcuda, tensor_maps
from despina.runtime.launcher import Launcher
from despina.runtime.tensor_maps import TensorMaps
from despina.tools.tensor_descriptor import TensorDescriptor

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
    maps = TensorMaps("k", NAMES, TYPES, [X_MAP], lambda *args: None, libcuda.get().encode_tiled, driver.fill_buffer)
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


@pytest.mark.parametrize("dtype, fill, box, bits", [
    ("fp16", "zero", [64, 64], 0), ("fp16", "nan", [64, 64], 0x7E00), ("bf16", "nan", [64, 64], 0x7FC0),
    ("fp32", "nan", [64, 32], 0x7FC00000), ("fp64", "nan", [8, 16], 0x7FF8000000000000), ("int8", "zero", [64, 128], 0),
])
@pytest.mark.parametrize("rows", [0, 256])
@pytest.mark.parametrize("cols", [0, 64])
def test_an_empty_tensors_map_encodes_over_its_fill_buffer(gpu_device: driver.Device, dtype: str, fill: str,
                                                           box: list[int], bits: int, rows: int, cols: int) -> None:
    """A real encode of a map with a 0 among its sizes (any base and strides: those of an empty tensor are
    not read) succeeds, over a fill buffer holding the dtype's fill; a tensor of no size 0 is unchanged."""
    if gpu_device.capability < (9, 0):
        pytest.skip(f"TMA needs compute capability 9.0, not {gpu_device}")
    names, types = ["x", "n", "m", "s"], [t.PointerType(t.ScalarType(dtype)), t.int32, t.int32, t.int64]
    entry = {"dtype": dtype, "base": {"arg": 0}, "shape": [{"arg": 1}, {"arg": 2}], "strides": [{"arg": 3}],
             "box": box, "swizzle": 128, "fill": fill}
    calls: list[tuple[Any, ...]] = []

    def encode(*args: Any) -> tuple[int, bytes]:
        calls.append(args)
        return libcuda.get().encode_tiled(*args)

    packed: list[Any] = []
    maps = TensorMaps("k", names, types, [entry], lambda *args: packed.append(args), encode, driver.fill_buffer)
    itemsize = t.ScalarType(dtype).itemsize
    x = driver.alloc(gpu_device, 256 * 256 * itemsize)
    try:
        stride = 1 if 0 in (rows, cols) else 256  # an empty torch tensor's strides: (1, 1)
        maps.pack_into(None, 0, 1, 1, 1, 32, 1, 1, 0, 0, x, rows, cols, stride)
        assert len(packed) == 1 and len(packed[0][-1]) == 128
        address, dims, strides = calls[0][1:4]
        if 0 not in (rows, cols):
            assert (address, list(dims), list(strides)) == (x, [cols, rows], [stride * itemsize])
            return
        assert address == driver.fill_buffer(tensor_maps.NAN_BITS.get(dtype, b"") if fill == "nan" else b"")
        assert (list(dims), list(strides), address % 16) == ([1, 1], [16], 0)
        assert driver.read(address, 16) == bits.to_bytes(itemsize, "little").ljust(16, b"\0")
    finally:
        driver.free(gpu_device, x)


@pytest.fixture
def hopper(torch_cuda: Any, gpu_device: driver.Device, fresh_cache: Any) -> Any:
    if gpu_device.capability != (9, 0):
        pytest.skip(f"TMA is copied in wgmma loops on a compute-capability-9.0 device, not {gpu_device}")
    return torch_cuda


@pytest.mark.parametrize("empty", ["K", "A's rows"])
def test_a_descriptor_matmul_of_an_empty_tensor_reads_its_fill(hopper: Any, monkeypatch: pytest.MonkeyPatch,
                                                                empty: str) -> None:
    """K = 0 (A is M x 0, B 0 x N: the loop runs no iteration) or an A of no rows read for M = 128 rows
    (each of its boxes reads as zeros): C is zeros, and the launch made its empty maps."""
    from .test_tma import desc_matmul

    torch = hopper
    made: list[int] = []
    encode_empty = TensorMaps._encode_empty
    monkeypatch.setattr(TensorMaps, "_encode_empty",
                        lambda self, where, spec: made.append(1) or encode_empty(self, where, spec))
    m, n, k = 128, 128, 64
    a_full = torch.randn((m, k), device="cuda", dtype=torch.float16)
    b_full = torch.randn((k, n), device="cuda", dtype=torch.float16)
    a, b = (a_full[:, :0], b_full[:0]) if empty == "K" else (a_full[:0], b_full)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    for _ in range(2):  # the second launch finds the maps made
        desc_matmul[(1, 1)](TensorDescriptor.from_tensor(a, [128, 64]), TensorDescriptor.from_tensor(b, [64, 128]),
                            c, m, n, a.shape[1], c.stride(0), BM=128, BN=128, BK=64, B_NK=False, num_warps=8,
                            num_stages=3)
    torch.cuda.synchronize()
    assert torch.equal(c, torch.zeros_like(c))
    assert made == ([1, 1] if empty == "K" else [1])
