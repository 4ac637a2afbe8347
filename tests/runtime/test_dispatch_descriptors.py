"""Host TensorDescriptor arguments on the launch fast path (on the fake GPU): keyed by kind, so fresh
descriptors each launch are fast; their base address, shape and strides flattened into the launcher's
parameters in its order; the slow path's errors kept; TMA tensor maps made from the flattened values."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import despina
import despina.language as tl
from despina.compiler.ir.core import Module
from despina.compiler.options import CompileOptions
from despina.runtime import HostArrayError, dispatch, kernels
from despina.runtime.cache import Binary
from despina.runtime.dispatch import flattening_pack
from despina.runtime.launcher import Launcher
from despina.tools.tensor_descriptor import TensorDescriptor

from .conftest import CudaArray, FakeGPU
from .test_dispatch import add, arrays, fresh
from .test_pointers import FakeTorch


@despina.jit
def scale_rows(x_desc, n, y_desc, factor, BM: tl.constexpr):
    row = tl.program_id(0) * BM
    x_desc.store([row, 0], x_desc.load([row, 0]) * factor)
    y_desc.store([row, 0], y_desc.load([row, 0]) + n)


NAMES = ["x_desc.base", "x_desc.shape0", "x_desc.shape1", "x_desc.stride0", "n",
         "y_desc.base", "y_desc.shape0", "y_desc.shape1", "y_desc.stride0", "factor"]


def desc(address: int, rows: int = 64, cols: int = 32, pitch: int = 32, block: tuple[int, int] = (16, 32),
         dtype: str = "float32", padding: str = "zero") -> TensorDescriptor:
    return TensorDescriptor(CudaArray(address, (rows, pitch), dtype), [rows, cols], [pitch, 1], list(block), padding)


def expected_words(x: TensorDescriptor, n: int, y: TensorDescriptor, factor: float) -> list[bytes]:
    """The 10 parameters' bytes, as NAMES order them (every int here fits int32): compare with `packed`."""
    def i32(v: int) -> bytes:
        return struct.pack("=i", v)

    def parts(d: TensorDescriptor) -> list[bytes]:
        address = d.base.__cuda_array_interface__["data"][0]
        return [struct.pack("=Q", address), i32(d.shape[0]), i32(d.shape[1]), i32(d.strides[0])]

    return [*parts(x), i32(n), *parts(y), struct.pack("=f", factor)]


def packed(words: list[bytes], expected: list[bytes]) -> list[bytes]:
    """The recorded first 8 bytes of each parameter cut to the size of the expected value."""
    return [w[:len(e)] for w, e in zip(words, expected, strict=True)]


def test_fresh_descriptors_each_launch_take_the_fast_path(gpu: FakeGPU) -> None:
    k = fresh(scale_rows)
    gpu.lib.nparams = len(NAMES)
    launches = []
    for i in range(50):  # new descriptors of other tensors and sizes, of one kind (sizes multiples of 16, not 1)
        x, y = desc(0x100000 + 0x10000 * i, rows=64 + 16 * (i % 3)), desc(0x900000 + 0x10000 * i, cols=48, pitch=48)
        k[(4,)](x, 7 + 2 * i, y, 0.5 + i, BM=16)  # factors > 0, all of one kind too
        launches.append(expected_words(x, 7 + 2 * i, y, 0.5 + i))
    d = k._dispatcher
    assert d.slow_calls == 1 and gpu.compiled == ["scale_rows"] and len(gpu.lib.calls) == 50
    assert [packed(c.words, e) for c, e in zip(gpu.lib.calls, launches)] == launches
    (launcher,) = d.launchers.values()
    (entry,) = d.entries.values()
    assert launcher.arg_names == NAMES
    assert entry.pick is None and entry.pack_into is not launcher.pack_into  # the flattening wrapper


def test_a_kernel_without_descriptors_files_as_before(gpu: FakeGPU) -> None:
    k, (x, y, out) = fresh(add), arrays()
    for _ in range(2):
        k[(1,)](x, y, out, 16, BLOCK=64)
    (entry,) = k._dispatcher.entries.values()
    assert entry.pick is None and entry.pack_into is entry.launcher.pack_into


@pytest.mark.parametrize("change", ["block", "padding", "dtype", "rows=1", "rows=17", "stride=i64", "misaligned",
                                    "torch"])
def test_what_specialization_reads_of_a_descriptor_makes_a_new_key(gpu: FakeGPU, change: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dispatch, "torch_stream_getter", lambda: (lambda device: 0))
    k = fresh(scale_rows)
    y = desc(0x900000)
    for i in range(2):
        k[(4,)](desc(0x100000 + 0x1000 * i), 7, y, 2.0, BM=16)
    x = {"block": lambda: desc(0x200000, block=(32, 32)), "padding": lambda: desc(0x200000, padding="nan"),
         "dtype": lambda: desc(0x200000, dtype="float16"), "rows=1": lambda: desc(0x200000, rows=1),
         "rows=17": lambda: desc(0x200000, rows=17), "stride=i64": lambda: desc(0x200000, pitch=2**31),
         "misaligned": lambda: desc(0x200000), "torch": lambda: desc(0x200000)}[change]()
    if change == "misaligned":
        x.base = CudaArray(0x200008, (64, 32))  # checked when made; one set later is read at the launch
    if change == "torch":
        x.base = FakeTorch(0x200000)
    for _ in range(3):
        k[(4,)](x, 7, y, 2.0, BM=16)
    # a new key (one more slow call), and a new specialization: the key told apart what it reads
    assert k._dispatcher.slow_calls == 2 and len(k._dispatcher.entries) == 2
    assert len(gpu.compiled) == (1 if change == "torch" else 2)  # torch's float32: the same kernel


def test_equal_keys_are_equal_specializations(gpu: FakeGPU) -> None:
    k = fresh(scale_rows)
    y = desc(0x900000)
    k[(4,)](desc(0x100000), 7, y, 2.0, BM=16)
    d = k._dispatcher
    variants = [desc(0x100000), desc(0x200000, rows=80), desc(0x300000, cols=48, pitch=48), desc(0x100000, rows=1),
                desc(0x100000, rows=17), desc(0x100000, rows=2**31), desc(0x100000, pitch=2**31),
                desc(0x100000, pitch=2**31 + 4), desc(0x100000, block=(32, 32)), desc(0x100000, padding="nan"),
                desc(0x100000, dtype="float16"), desc(0x100000, dtype="int32"), desc(0x100000, cols=1)]
    misaligned = desc(0x100000)
    misaligned.base = CudaArray(0x100008, (64, 32))
    variants.append(misaligned)
    options = k.options({}, interpret=False)
    keys = [d.scan(x, 7, y, 2.0, BM=16)[0] for x in variants]
    specs = [k.specialize(k.bind((x, 7, y, 2.0), {"BM": 16}), options).key for x in variants]
    for i in range(len(variants)):
        for j in range(len(variants)):
            assert (keys[i] == keys[j]) == (specs[i] == specs[j]), (i, j)
    assert keys[0] == keys[1] == keys[2] and len(set(keys)) == len(variants) - 2


def test_parameters_are_packed_in_the_launchers_order(gpu: FakeGPU) -> None:
    k = fresh(scale_rows)
    x, y = desc(0x100000), desc(0x900000, rows=48)
    k[(4,)](x, 7, y, 2.0, BM=16)
    d = k._dispatcher
    (first,) = d.launchers.values()
    order = [9, 4, 8, 0, 5, 1, 7, 2, 6, 3]  # a launcher taking the same parameters in another order
    other = Launcher(gpu.device.load(b"cubin", "scale_rows", 0, 4), [NAMES[i] for i in order],
                     [first.layout.types[i] for i in order], gpu.lib, {})
    d.file((x, 7, y, 2.0), {"BM": 16}, other, None)
    gpu.lib.nparams = len(NAMES)
    x2 = desc(0x200000, rows=80)
    k[(4,)](x2, 9, y, 3.0, BM=16)
    assert d.slow_calls == 1 and gpu.lib.calls[-1].handle == other.handle.value
    words = expected_words(x2, 9, y, 3.0)
    assert packed(gpu.lib.calls[-1].words, [words[i] for i in order]) == [words[i] for i in order]


def test_flattening_pack_passes_each_part_where_the_launcher_takes_it() -> None:
    packed: list[tuple[Any, ...]] = []
    pack = flattening_pack(lambda *args: packed.append(args), [(2, None), (0, 1), (1, None), (0, 0), (0, 3)], 4)
    pack("buffer", 0, 1, 2, 3, 128, 1, 1, 0, 0x55, ("a", "b", "c", "d"), "n", "f", "unused")
    assert packed == [("buffer", 0, 1, 2, 3, 128, 1, 1, 0, 0x55, "f", "b", "n", "a", "d")]


def test_torch_bases_launch_on_the_current_torch_stream(gpu: FakeGPU, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dispatch, "torch_stream_getter", lambda: (lambda device: 0x7777))
    k = fresh(scale_rows)
    for i in range(3):
        x = TensorDescriptor(FakeTorch(0x100000 + 0x1000 * i), [64, 32], [32, 1], [16, 32])
        k[(4,)](x, 7, TensorDescriptor(FakeTorch(0x900000), [64, 32], [32, 1], [16, 32]), 2.0, BM=16)
    assert k._dispatcher.slow_calls == 1 and [c.stream for c in gpu.lib.calls] == [0x7777] * 3


def test_host_memory_and_out_of_range_ints_keep_the_slow_paths_errors(gpu: FakeGPU) -> None:
    k = fresh(scale_rows)
    y = desc(0x900000)
    for _ in range(2):
        k[(4,)](desc(0x100000), 7, y, 2.0, BM=16)
    host = TensorDescriptor(np.zeros((64, 32), np.float32), [64, 32], [32, 1], [16, 32])
    cpu = TensorDescriptor(FakeTorch(0x100000, cuda=False), [64, 32], [32, 1], [16, 32])
    huge = desc(0x100000)
    huge.shape[0] = 2**64
    for _ in range(2):  # the second time too, after the first error
        with pytest.raises(HostArrayError, match="argument 'x_desc.base' of kernel 'scale_rows' is a NumPy array"):
            k[(4,)](host, 7, y, 2.0, BM=16)
        with pytest.raises(HostArrayError, match="argument 'y_desc.base' of kernel 'scale_rows' is a torch tensor on cpu"):
            k[(4,)](desc(0x100000), 7, cpu, 2.0, BM=16)
        with pytest.raises(TypeError, match="argument 'x_desc.shape0' of kernel 'scale_rows': integer argument "
                                            "18446744073709551616 does not fit in 64 bits"):
            k[(4,)](huge, 7, y, 2.0, BM=16)
    assert len(gpu.lib.calls) == 2 and len(k._dispatcher.entries) == 1


def test_tensor_maps_are_made_from_the_flattened_values(gpu: FakeGPU, monkeypatch: pytest.MonkeyPatch) -> None:
    compile_fake: Callable[[Module, CompileOptions, str], Binary] = gpu.kernel_binary

    def compile_binary(module: Module, options: CompileOptions, target: str) -> Binary:
        binary = compile_fake(module, options, target)
        x_map = {"dtype": "fp32", "base": {"arg": 0}, "shape": [{"arg": 1}, {"arg": 2}], "strides": [{"arg": 3}],
                 "box": [16, 32], "swizzle": 128, "fill": "zero"}
        y_map = {**x_map, "base": {"arg": 5}, "shape": [{"arg": 6}, {"arg": 7}], "strides": [{"arg": 8}]}
        return Binary(binary.name, binary.cubin, {**binary.metadata, "tensor_maps": [x_map, y_map]}, binary.asm)

    monkeypatch.setattr(kernels, "compile_binary", compile_binary)
    k = fresh(scale_rows)
    y = desc(0x900000, rows=48, cols=48, pitch=64)
    for rows, address in [(64, 0x100000), (80, 0x200000), (64, 0x100000)]:
        k[(4,)](desc(address, rows=rows), 7, y, 2.0, BM=16)
    assert k._dispatcher.slow_calls == 1 and len(gpu.lib.calls) == 3
    # innermost dimension first, strides in bytes; the third launch's maps come from the cache
    x_maps = [(call[1], call[2], call[3]) for call in gpu.lib.encoded if call[1] != 0x900000]
    y_maps = [(call[1], call[2], call[3]) for call in gpu.lib.encoded if call[1] == 0x900000]
    assert x_maps == [(0x100000, [32, 64], [128]), (0x200000, [32, 80], [128])]
    assert y_maps[0] == (0x900000, [48, 48], [256])
