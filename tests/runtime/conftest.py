"""A fake GPU for the runtime's CPU tests: libcuda's launch entry points, a device and a backend
that record what they are asked, so the whole `kernel[grid](...)` path runs without CUDA."""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from despina.compiler.ir.core import Module
from despina.compiler.options import CompileOptions
from despina.runtime import driver, kernels, libcuda
from despina.runtime.cache import Binary

CONTEXT = 0x5000


@dataclass
class Launch:
    """One recorded cuLaunchKernelEx call; `words` are the first 8 bytes of every parameter."""

    handle: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    stream: int
    words: list[bytes]


class FakeLib:
    """Stands for libcuda: `launch_ex` records its call (reading the launch config and the first
    `nparams` parameters) and returns `code`; `encode_tiled` records its arguments in `encoded` and
    returns (`encode_code`, `map_bytes` of them)."""

    def __init__(self) -> None:
        self.context = CONTEXT
        self.code = 0
        self.nparams = 0
        self.calls: list[Launch] = []
        self.encode_code = 0
        self.encoded: list[tuple[Any, ...]] = []

    def current_context(self) -> int:
        return self.context

    def launch_ex(self, config: ctypes.c_void_p, function: ctypes.c_void_p, params: ctypes.c_void_p, extra: Any) -> int:
        gx, gy, gz, bx, by, bz, shared, stream = struct.unpack_from("=7I4xQ", ctypes.string_at(config.value or 0, 40))
        words = []
        if self.nparams:
            pointers = (ctypes.c_void_p * self.nparams).from_address(params.value or 0)
            words = [ctypes.string_at(p or 0, 8) for p in pointers]
        self.calls.append(Launch(function.value or 0, (gx, gy, gz), (bx, by, bz), shared, stream, words))
        return self.code

    def encode_tiled(self, data_type: int, address: int, dims: Any, strides: Any, box: Any, swizzle: int,
                     fill: int) -> tuple[int, bytes]:
        call = (data_type, address, list(dims), list(strides), list(box), swizzle, fill)
        self.encoded.append(call)
        return self.encode_code, map_bytes(call)


def map_bytes(call: tuple[Any, ...]) -> bytes:
    """The 128 bytes FakeLib's encode_tiled makes of its arguments: each number as a u64, in order."""
    data_type, address, dims, strides, box, swizzle, fill = call
    numbers = [data_type, address, *dims, *strides, *box, swizzle, fill]
    return struct.pack(f"={len(numbers)}Q", *numbers).ljust(128, b"\xff")


def plain(arg: Any) -> Any:
    """A ctypes argument as a test compares it: a scalar's or pointer's value, "out" for a pointer to a
    result (`byref`), "buffer" for an array."""
    if type(arg).__name__ == "CArgObject":
        return "out"
    if isinstance(arg, ctypes.Array):
        return "buffer"
    return arg.value if isinstance(arg, ctypes._SimpleCData) else arg


def put(out: Any, value: Any) -> None:
    """Write `value` through a result pointer (`byref`) as libcuda would."""
    out._obj.value = value


class FakeCuda:
    """Stands for libcuda's entry points behind `driver.py` (`LibCuda.function`): each call is recorded
    as (symbol, *plain arguments) and runs `handlers[symbol](*ctypes arguments)` if there is one (it
    writes the results with `put`); a call returns CUresult `codes.get(symbol, 0)`. `current_context()`
    is the context cuCtxSetCurrent made current (0 before)."""

    def __init__(self, handlers: dict[str, Callable[..., Any]] | None = None) -> None:
        self.handlers = {"cuCtxSetCurrent": lambda context: setattr(self, "context", context.value or 0),
                         **(handlers or {})}
        self.codes: dict[str, int] = {}
        self.calls: list[tuple[Any, ...]] = []
        self.context = 0  # the calling thread's (cuCtxSetCurrent sets it)

    def current_context(self) -> int:
        return self.context

    def function(self, symbol: str) -> Callable[..., int]:
        def call(*args: Any) -> int:
            self.calls.append((symbol, *map(plain, args)))
            handler = self.handlers.get(symbol)
            if handler is not None:
                handler(*args)
            return self.codes.get(symbol, 0)

        return call


ATTRIBUTES = {"MAX_THREADS_PER_BLOCK": 1024, "MAX_GRID_DIM_X": 2**31 - 1, "MAX_GRID_DIM_Y": 65535,
              "MAX_GRID_DIM_Z": 65535, "MAX_SHARED_MEMORY_PER_BLOCK": 49152, "MULTIPROCESSOR_COUNT": 132,
              "COMPUTE_CAPABILITY_MAJOR": 9, "COMPUTE_CAPABILITY_MINOR": 0, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 232448}


def device_cuda(name: bytes = b"Fake H100") -> FakeCuda:
    """A FakeCuda with one device (ATTRIBUTES, primary context CONTEXT) that loads modules (0x10) with
    one function (0x20), whose static shared memory is 1024 bytes and which uses 40 registers."""
    from despina.runtime import driver

    by_number = {driver.DEVICE_ATTRIBUTES[k]: v for k, v in ATTRIBUTES.items()}
    by_function = {driver.FUNC_SHARED_SIZE_BYTES: 1024, driver.FUNC_NUM_REGS: 40}
    return FakeCuda({
        "cuDeviceGetCount": lambda out: put(out, 1), "cuDeviceGet": lambda out, ordinal: put(out, ordinal.value),
        "cuDevicePrimaryCtxRetain": lambda out, dev: put(out, CONTEXT),
        "cuDeviceGetAttribute": lambda out, attribute, dev: put(out, by_number[attribute.value]),
        "cuDeviceGetName": lambda buffer, size, dev: ctypes.memmove(buffer, name, len(name)),
        "cuCtxGetDevice": lambda out: put(out, 0),
        "cuModuleLoadData": lambda out, image: put(out, 0x10),
        "cuModuleGetFunction": lambda out, module, fn: put(out, 0x20),
        "cuFuncGetAttribute": lambda out, attribute, fn: put(out, by_function[attribute.value]),
    })


@dataclass(eq=False)
class FakeDevice:
    """Stands for driver.Device: `load` hands out distinct handles and records its calls."""

    ordinal: int = 0
    name: str = "Fake GPU"
    target: str = "sm_90a"
    max_grid: tuple[int, int, int] = (2**31 - 1, 65535, 65535)
    max_threads_per_block: int = 1024
    loads: list[tuple[str, int, int, int]] = field(default_factory=list)

    def load(self, cubin: bytes, name: str, shared: int, num_warps: int, context: int | None = None) -> driver.Function:
        self.loads.append((name, shared, num_warps, context or 0))
        return driver.Function(0xF000 + len(self.loads), name, shared, num_warps, self)

    def registers(self, function: driver.Function) -> int:
        return 255

    def __str__(self) -> str:
        return f"device {self.ordinal} ({self.name}, compute capability 9.0)"


@dataclass
class FakeGPU:
    lib: FakeLib
    device: FakeDevice
    compiled: list[str]

    def kernel_binary(self, module: Module, options: CompileOptions, target: str) -> Binary:
        self.compiled.append(module.kernel.name)
        return Binary(module.kernel.name, b"\x7fELF fake cubin " + module.kernel.name.encode(),
                      {"shared": 0, "num_warps": options.num_warps}, {"ptx": "// fake"})


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> FakeGPU:
    """The fake GPU installed, an empty disk cache in a temporary folder, the interpreter off."""
    fake = FakeGPU(FakeLib(), FakeDevice(), [])
    monkeypatch.setattr(libcuda, "_LIB", fake.lib)
    monkeypatch.setattr(driver, "current_context", lambda: fake.lib.context)
    monkeypatch.setattr(driver, "context_device", lambda context: fake.device)
    monkeypatch.setattr(kernels, "compile_binary", fake.kernel_binary)
    monkeypatch.setattr(kernels, "_MEMORY", {})
    monkeypatch.setenv("DESPINA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("DESPINA_INTERPRET", raising=False)
    monkeypatch.delenv("DESPINA_DEBUG", raising=False)
    return fake


class CudaArray:
    """A CuPy-like array: a dtype, a shape and `__cuda_array_interface__` at a made-up address."""

    def __init__(self, pointer: int, shape: tuple[int, ...] = (1024,), dtype: str = "float32") -> None:
        import numpy as np

        self.dtype = np.dtype(dtype)
        self.shape = shape
        self.pointer = pointer

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.pointer, False), "version": 3,
                "strides": None}
