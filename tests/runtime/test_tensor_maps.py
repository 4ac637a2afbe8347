"""TMA tensor maps on the host: metadata entries checked, sources resolved from a launch's values,
the driver's arguments (innermost first, strides in bytes), the cache of encoded maps, the errors,
and the maps in launches through `Launcher.launch` and the JIT's fast path (on the fake GPU)."""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable
from typing import Any

import pytest

import despina
import despina.language as tl
from despina.compiler.ir import types as t
from despina.compiler.ir.core import Module
from despina.compiler.options import CompileOptions
from despina.runtime import LaunchError, TensorMapError, driver, kernels, tensor_maps
from despina.runtime.cache import Binary
from despina.runtime.launcher import Launcher
from despina.runtime.tensor_maps import TensorMaps

from .conftest import CudaArray, FakeDevice, FakeGPU, FakeLib, map_bytes

NAMES = ["a_ptr", "M", "K", "stride_am", "scale"]
TYPES: list[t.Type] = [t.PointerType(t.float16), t.int32, t.int32, t.int64, t.float32]
CONFIG = (1, 1, 1, 128, 1, 1, 0, 0)  # what the launch struct takes before the parameters


def entry(**changes: Any) -> dict[str, Any]:
    """A 2-D fp16 map of a_ptr (M x K, rows stride_am apart) in 64 x 64 boxes, changed by `changes`."""
    return {"dtype": "fp16", "base": {"arg": 0}, "shape": [{"arg": 1}, {"arg": 2}], "strides": [{"arg": 3}],
            "box": [64, 64], "swizzle": 128, "fill": "zero", **changes}


FILL_ADDRESS = 0x7E00_0000_1200  # where Recorder's fill buffers are


class Recorder:
    """The struct's `pack_into`, the driver's `encode` and its `fill_buffer` for a TensorMaps: records
    their calls (`fill_buffer` the bits it is asked for, and answers FILL_ADDRESS)."""

    def __init__(self, code: int = 0) -> None:
        self.packed: list[tuple[Any, ...]] = []
        self.encoded: list[tuple[Any, ...]] = []
        self.fills: list[bytes] = []
        self.code = code

    def fill_buffer(self, bits: bytes) -> int:
        self.fills.append(bits)
        return FILL_ADDRESS

    def pack_into(self, buffer: Any, offset: int, *args: Any) -> None:
        self.packed.append(args)

    def encode(self, *args: Any) -> tuple[int, bytes]:
        call = (args[0], args[1], list(args[2]), list(args[3]), list(args[4]), args[5], args[6])
        self.encoded.append(call)
        return self.code, map_bytes(call)


def maps_of(entries: list[dict[str, Any]], recorder: Recorder) -> TensorMaps:
    return TensorMaps("matmul", NAMES, TYPES, entries, recorder.pack_into, recorder.encode, recorder.fill_buffer)


def launch(maps: TensorMaps, values: list[Any]) -> None:
    maps.pack_into(None, 0, *CONFIG, *values)


VALUES = [0x7F00_0000_0000, 1000, 200, 256, 1.5]


def test_sources_reach_the_driver_innermost_first_with_strides_in_bytes() -> None:
    rec = Recorder()
    three_d = entry(shape=[{"value": 4}, {"arg": 1}, {"arg": 2}], strides=[{"value": 1000 * 256}, {"arg": 3}],
                    box=[1, 32, 64], swizzle=0, fill="nan", dtype="bf16")
    maps = maps_of([entry(), three_d], rec)
    launch(maps, VALUES)
    assert rec.encoded == [(6, 0x7F00_0000_0000, [200, 1000], [512], [64, 64], 3, 0),
                           (9, 0x7F00_0000_0000, [200, 1000, 4], [512, 512000], [64, 32, 1], 0, 1)]
    # the struct gets the launch's own values, then both maps' bytes as one value
    assert rec.packed == [(*CONFIG, *VALUES, map_bytes(rec.encoded[0]) + map_bytes(rec.encoded[1]))]


def test_the_data_types_are_the_drivers() -> None:
    driver = pytest.importorskip("cuda.bindings.driver")
    names = {"int8": "UINT8", "uint8": "UINT8", "fp8e4nv": "UINT8", "fp8e5": "UINT8", "int16": "UINT16",
             "uint16": "UINT16", "uint32": "UINT32", "int32": "INT32", "uint64": "UINT64", "int64": "INT64",
             "fp16": "FLOAT16", "fp32": "FLOAT32", "fp64": "FLOAT64", "bf16": "BFLOAT16"}
    assert {k: driver.CUtensorMapDataType(v).name for k, v in tensor_maps.DATA_TYPES.items()} == {
        k: f"CU_TENSOR_MAP_DATA_TYPE_{v}" for k, v in names.items()}
    assert {k: driver.CUtensorMapSwizzle(v).name for k, v in tensor_maps.SWIZZLES.items()} == {
        0: "CU_TENSOR_MAP_SWIZZLE_NONE", 32: "CU_TENSOR_MAP_SWIZZLE_32B", 64: "CU_TENSOR_MAP_SWIZZLE_64B",
        128: "CU_TENSOR_MAP_SWIZZLE_128B"}
    assert {k: driver.CUtensorMapFloatOOBfill(v).name for k, v in tensor_maps.FILLS.items()} == {
        "zero": "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE", "nan": "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA"}


def test_the_same_tensors_reuse_the_encoded_bytes() -> None:
    rec = Recorder()
    maps = maps_of([entry()], rec)
    launch(maps, VALUES)
    launch(maps, [*VALUES[:4], 2.5])  # scale: no map reads it
    assert len(rec.encoded) == 1 and rec.packed[0][-1] is rec.packed[1][-1]
    launch(maps, [VALUES[0] + 4096, *VALUES[1:]])
    launch(maps, VALUES)
    assert len(rec.encoded) == 2 and rec.encoded[1][1] == VALUES[0] + 4096 and rec.packed[3][-1] is rec.packed[0][-1]


def test_the_cache_keeps_the_newest_sets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tensor_maps, "MAX_CACHED", 2)
    rec = Recorder()
    maps = maps_of([entry()], rec)
    for base in (0x1000, 0x2000, 0x3000, 0x3000, 0x2000, 0x1000):
        launch(maps, [base, *VALUES[1:]])
    assert [call[1] for call in rec.encoded] == [0x1000, 0x2000, 0x3000, 0x1000]
    assert len(maps.cache) == 2


def test_maps_of_constants_are_encoded_once() -> None:
    rec = Recorder()
    constant = entry(base={"value": 0x5000}, shape=[{"value": 8}, {"value": 64}], strides=[{"value": 64}])
    maps = maps_of([constant], rec)
    launch(maps, VALUES)
    launch(maps, [0x9000, 1, 2, 3, 4.0])
    assert rec.encoded == [(6, 0x5000, [64, 8], [128], [64, 64], 3, 0)]


WHERE = "kernel 'matmul': tensor map 0 (fp16, shape [M={M}, K=200], strides [stride_am={stride}, 1], box [64, 64], swizzle 128)"


@pytest.mark.parametrize("change, message", [
    ({0: 0x7F00_0000_0002}, "its base address a_ptr=0x7f0000000002 is not 16-byte aligned, as TMA requires; pass a tensor"),
    ({1: -1}, "dimension M=-1 is outside 0..2^32, the sizes TMA maps (a size of 0, an empty tensor, makes a map "
              "whose every read gives the fill)"),
    ({1: 2**32 + 1}, "dimension M=4294967297 is outside 0..2^32"),
    ({3: 100}, "stride stride_am=100 is 200 bytes of fp16; TMA steps by positive multiples of 16 bytes below 2^40: "
               "pad the rows"),
    ({3: 2**39}, "stride stride_am=549755813888 is 1099511627776 bytes of fp16"),
    ({3: -256}, "stride stride_am=-256 is -512 bytes"),
])
def test_what_tma_cannot_map_is_a_clear_error(change: dict[int, int], message: str) -> None:
    rec = Recorder()
    values = [change.get(i, v) for i, v in enumerate(VALUES)]
    with pytest.raises(TensorMapError) as error:
        launch(maps_of([entry()], rec), values)
    assert str(error.value) == f"{WHERE.format(M=values[1], stride=values[3])}: " + str(error.value).split(": ", 2)[2]
    assert message in str(error.value)
    assert isinstance(error.value, LaunchError) and error.value.code == 0 and rec.encoded == [] == rec.packed
    assert rec.fills == []


# ---- empty tensors -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype, fill, box, bits", [
    ("fp16", "zero", [64, 64], b"\0\0"),
    ("fp16", "nan", [64, 64], bytes.fromhex("007e")),  # 0x7E00, little-endian
    ("bf16", "nan", [64, 64], bytes.fromhex("c07f")),  # 0x7FC0
    ("fp32", "zero", [64, 32], b"\0" * 4),
    ("fp32", "nan", [64, 32], bytes.fromhex("0000c07f")),  # 0x7FC00000
    ("fp64", "nan", [8, 16], bytes.fromhex("000000000000f87f")),  # 0x7FF8000000000000
    ("fp64", "zero", [8, 16], b"\0" * 8),
    ("int8", "zero", [64, 128], b"\0"),
    ("int32", "zero", [64, 32], b"\0" * 4),
])
@pytest.mark.parametrize("empty", [{1: 0}, {2: 0}, {1: 0, 2: 0}])
def test_an_empty_tensors_map_is_all_ones_over_a_fill_buffer(dtype: str, fill: str, box: list[int], bits: bytes,
                                                              empty: dict[int, int]) -> None:
    """M = 0 or K = 0: every dimension 1, strides of 16 bytes, the box, swizzle and fill kept, over the
    fill buffer of the dtype's fill; the tensor's base and strides are not looked at (an empty tensor's
    may be anything: torch's M x 0 tensor has strides (1, 1))."""
    rec = Recorder()
    maps = maps_of([entry(dtype=dtype, fill=fill, box=box)], rec)
    values = [VALUES[0] + 2, *VALUES[1:3], 1, VALUES[4]]  # a misaligned base, a stride of 2 bytes
    launch(maps, [empty.get(i, v) for i, v in enumerate(values)])
    assert rec.fills == [bits]
    assert rec.encoded == [(tensor_maps.DATA_TYPES[dtype], FILL_ADDRESS, [1, 1], [16], box[::-1], 3,
                            tensor_maps.FILLS[fill])]
    assert rec.packed[0][-1] == map_bytes(rec.encoded[0])


def test_empty_maps_of_any_rank_and_a_size_past_2_32_beside_a_0() -> None:
    rec = Recorder()
    one_d = entry(shape=[{"arg": 2}], strides=[], box=[64])
    three_d = entry(shape=[{"arg": 1}, {"value": 0}, {"arg": 2}], strides=[{"value": 2**40}, {"arg": 3}],
                    box=[2, 32, 64], swizzle=0, fill="nan")
    big_and_empty = entry(shape=[{"value": 2**33}, {"arg": 2}])
    launch(maps_of([one_d, three_d, big_and_empty], rec), [VALUES[0], VALUES[1], 0, *VALUES[3:]])
    assert rec.encoded == [(6, FILL_ADDRESS, [1], [], [64], 3, 0), (6, FILL_ADDRESS, [1, 1, 1], [16, 16], [64, 32, 2],
                                                                      0, 1), (6, FILL_ADDRESS, [1, 1], [16], [64, 64], 3, 0)]
    assert rec.fills == [b"\0\0", bytes.fromhex("007e"), b"\0\0"]


def test_a_negative_size_is_an_error_even_beside_a_0() -> None:
    rec = Recorder()
    with pytest.raises(TensorMapError, match=r"dimension M=-3 is outside 0\.\.2\^32"):
        launch(maps_of([entry()], rec), [VALUES[0], -3, 0, *VALUES[3:]])
    assert rec.encoded == [] == rec.fills


def test_empty_maps_are_cached_by_the_same_values() -> None:
    rec = Recorder()
    maps = maps_of([entry()], rec)
    empty = [VALUES[0], VALUES[1], 0, *VALUES[3:]]
    launch(maps, empty)
    launch(maps, [*empty[:4], 2.5])  # scale: no map reads it
    assert len(rec.encoded) == 1 == len(rec.fills) and rec.packed[0][-1] is rec.packed[1][-1]
    launch(maps, VALUES)  # K = 200: the tensor's own map
    launch(maps, empty)
    launch(maps, [VALUES[0], 0, 0, *VALUES[3:]])  # another empty shape: another set
    assert [call[1:3] for call in rec.encoded] == [(FILL_ADDRESS, [1, 1]), (VALUES[0], [200, 1000]),
                                                   (FILL_ADDRESS, [1, 1])]
    assert rec.packed[3][-1] is rec.packed[0][-1] and len(maps.cache) == 3


def test_a_refused_empty_map_says_so() -> None:
    rec = Recorder(code=1)
    with pytest.raises(TensorMapError) as error:
        launch(maps_of([entry()], rec), [VALUES[0], 0, *VALUES[2:]])
    assert str(error.value).startswith(f"{WHERE.format(M=0, stride=256)}: cuTensorMapEncodeTiled failed: ")
    assert f"for the map of this empty tensor (every dimension 1, over a fill buffer at {FILL_ADDRESS:#x})" in str(
        error.value)


def test_every_floating_dtype_has_its_quiet_nan() -> None:
    np = pytest.importorskip("numpy")
    floats = {d for d in tensor_maps.DATA_TYPES if t.ScalarType(d).is_floating()}
    assert set(tensor_maps.NAN_BITS) == floats
    for dtype in floats:
        assert len(tensor_maps.NAN_BITS[dtype]) == t.ScalarType(dtype).itemsize
    for dtype, np_type in (("fp16", np.float16), ("fp32", np.float32), ("fp64", np.float64)):
        assert tensor_maps.NAN_BITS[dtype] == np.array(np.nan, dtype=np_type).astype(f"<f{np.dtype(np_type).itemsize}").tobytes()


def test_a_size_that_is_no_integer_names_the_parameter() -> None:
    with pytest.raises(TensorMapError, match="kernel 'matmul': parameter M gives a tensor map its address or size, so "
                                             "it must be an integer, not float"):
        launch(maps_of([entry()], Recorder()), [VALUES[0], 1000.0, *VALUES[2:]])


def test_the_drivers_refusal_says_which_map_and_is_not_cached() -> None:
    rec = Recorder(code=1)
    maps = maps_of([entry()], rec)
    for _ in range(2):
        with pytest.raises(TensorMapError) as error:
            launch(maps, VALUES)
        assert str(error.value).startswith(f"{WHERE.format(M=1000, stride=256)}: cuTensorMapEncodeTiled failed: ")
        assert "each stride at least the extent of the dimensions inside it" in str(error.value)
        assert error.value.code == 1
    assert len(rec.encoded) == 2 and maps.cache == {}


@pytest.mark.parametrize("changes, message", [
    ({"dtype": "int1"}, "dtype 'int1' is none of int8, int16, int32"),
    ({"shape": []}, "it needs rank 1 to 5"),
    ({"strides": []}, "it needs rank 1 to 5, with one box size per dimension and one stride per dimension but the last"),
    ({"box": [64]}, "one box size per dimension"),
    ({"box": [512, 64]}, "box [512, 64] has sizes outside 1..256"),
    ({"box": [64, 4]}, "the box's rows are 8 bytes, not a multiple of 16"),
    ({"box": [64, 64], "swizzle": 64}, "the box's rows are 128 bytes, more than its 64-byte swizzle"),
    ({"swizzle": 16}, "swizzle 16 is none of 0, 32, 64, 128 (bytes)"),
    ({"fill": "ones"}, "fill 'ones' is not 'zero', or 'nan' for a floating-point dtype"),
    ({"fill": "nan", "dtype": "int16", "box": [64, 8]}, "fill 'nan' is not 'zero', or 'nan' for a floating-point"),
    ({"base": {"arg": 1}}, "parameter M is int32, not a pointer"),
    ({"base": {"arg": 5}}, "{'arg': 5} is neither {'arg': i} for one of its 5 parameters nor {'value': n}"),
    ({"shape": [{"arg": 4}, {"arg": 2}]}, "parameter scale is fp32, not an integer"),
    ({"strides": [{"arg": 0}]}, "parameter a_ptr is ptr<fp16>, not an integer"),
    ({"strides": [{"value": 1.5}]}, "{'value': 1.5} is neither"),
])
def test_a_malformed_entry_is_refused_when_the_kernel_loads(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(TensorMapError) as error:
        maps_of([entry(), entry(**changes)], Recorder())
    assert str(error.value).startswith("kernel 'matmul': tensor map 1 of its metadata ({")
    assert message in str(error.value) and str(error.value).endswith("report it as a despina bug")


# ---- launches ---------------------------------------------------------------------------------------


def loaded(lib: FakeLib, metadata: dict[str, Any], fill_buffer: Callable[[bytes], int] | None = None) -> Launcher:
    function = FakeDevice().load(b"cubin", "matmul", 0, 4)
    return Launcher(function, NAMES, TYPES, lib, metadata, fill_buffer)


def test_launcher_launches_with_the_maps_after_the_parameters() -> None:
    lib = FakeLib()
    launcher = loaded(lib, {"tensor_maps": [entry(), entry(base={"arg": 0}, box=[8, 64])]})
    lib.nparams = 7
    launcher.launch((2, 1, 1), dict(zip(NAMES, VALUES)), stream=0)
    launcher.launch((2, 1, 1), dict(zip(NAMES, VALUES)), stream=0)
    assert len(lib.encoded) == 2 and len(lib.calls) == 2
    frame = launcher.frame()
    base = ctypes.addressof(frame.buffer)
    pointers = list((ctypes.c_void_p * 7).from_address(frame.params.value or 0))
    assert [(p or 0) - base for p in pointers] == launcher.layout.offsets
    assert [ctypes.string_at(p or 0, 128) for p in pointers[5:]] == [map_bytes(call) for call in lib.encoded]
    assert all((p or 0) % 64 == 0 for p in pointers[5:])
    a_ptr, m, k, stride_am = lib.calls[-1].words[:4]
    assert (a_ptr, m[:4], k[:4], stride_am) == (struct.pack("=Q", VALUES[0]), struct.pack("=i", 1000),
                                                struct.pack("=i", 200), struct.pack("=q", 256))


def test_launcher_launches_an_empty_tensor_over_its_fill_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    lib, rec = FakeLib(), Recorder()
    lib.nparams = 6
    launcher = loaded(lib, {"tensor_maps": [entry(fill="nan")]}, rec.fill_buffer)
    launcher.launch((2, 1, 1), {**dict(zip(NAMES, VALUES)), "K": 0}, stream=0)
    assert rec.fills == [bytes.fromhex("007e")] and lib.encoded == [(6, FILL_ADDRESS, [1, 1], [16], [64, 64], 3, 1)]
    assert lib.calls[-1].words[5] == struct.pack("=Q", 6)
    # by default, the driver's fill buffer of the launch's context
    monkeypatch.setattr(driver, "fill_buffer", lambda bits: 0x9900 + len(bits))
    loaded(lib, {"tensor_maps": [entry()]}).launch((2, 1, 1), {**dict(zip(NAMES, VALUES)), "M": 0}, stream=0)
    assert lib.encoded[-1][1] == 0x9902


@pytest.mark.parametrize("metadata", [{}, {"tensor_maps": []}, {"prints": False}])
def test_launcher_without_maps_is_unchanged(metadata: dict[str, Any]) -> None:
    launcher = loaded(FakeLib(), metadata)
    assert launcher.tensor_maps is None and launcher.pack_into == launcher.struct.pack_into
    assert len(launcher.layout.offsets) == len(NAMES)


@despina.jit
def copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def test_the_fast_path_launches_with_the_maps(gpu: FakeGPU, monkeypatch: pytest.MonkeyPatch) -> None:
    compile_fake: Callable[[Module, CompileOptions, str], Binary] = gpu.kernel_binary

    def compile_binary(module: Module, options: CompileOptions, target: str) -> Binary:
        binary = compile_fake(module, options, target)
        one_d = {"dtype": "fp32", "base": {"arg": 0}, "shape": [{"arg": 2}], "strides": [], "box": [32],
                 "swizzle": 128, "fill": "zero"}
        return Binary(binary.name, binary.cubin, {**binary.metadata, "tensor_maps": [one_d]}, binary.asm)

    monkeypatch.setattr(kernels, "compile_binary", compile_binary)
    k = despina.jit(copy.fn)
    x, out = CudaArray(0x10000), CudaArray(0x20000)
    gpu.lib.nparams = 4
    for n in (4096, 4096, 4112, 4096):
        k[(4,)](x, out, n, BLOCK=1024)
    k[(4,)](CudaArray(0x40000), out, 4096, BLOCK=1024)
    assert k._dispatcher.slow_calls == 1
    assert [(call[1], call[2]) for call in gpu.lib.encoded] == [(0x10000, [4096]), (0x10000, [4112]), (0x40000, [4096])]
    assert [c.words[3] for c in gpu.lib.calls] == [struct.pack("=Q", 7)] * 5  # each map starts with its data type
    fills: list[bytes] = []
    monkeypatch.setattr(driver, "fill_buffer", lambda bits: fills.append(bits) or FILL_ADDRESS)
    k2 = despina.jit(copy.fn)
    for _ in range(2):
        k2[(4,)](x, out, 0, BLOCK=1024)  # n = 0: an empty x, launched over the fill buffer, then a cache hit
    assert k2._dispatcher.slow_calls == 1 and fills == [b"\0" * 4]
    assert gpu.lib.encoded[-1] == (7, FILL_ADDRESS, [1], [], [32], 3, 0) and len(gpu.lib.encoded) == 4
    assert len(gpu.lib.calls) == 7


def test_a_pointer_loads_map_takes_a_negative_size_as_0() -> None:
    """`clamp` (a pointer load's map, gpuir/pointer_tiles.py): K = -5 is its mask's bound, which excludes every
    element, so the map is an empty tensor's (over the fill buffer); a descriptor's negative size is an error."""
    rec = Recorder()
    launch(maps_of([entry(clamp=True)], rec), [VALUES[0], VALUES[1], -5, *VALUES[3:]])
    assert rec.encoded == [(6, FILL_ADDRESS, [1, 1], [16], [64, 64], 3, 0)] and rec.fills == [b"\0\0"]
    with pytest.raises(TensorMapError, match=r"dimension K=-5 is outside 0\.\.2\^32"):
        launch(maps_of([entry()], Recorder()), [VALUES[0], VALUES[1], -5, *VALUES[3:]])
    with pytest.raises(TensorMapError, match="clamp 'yes' is not a bool"):
        maps_of([entry(clamp="yes")], Recorder())
