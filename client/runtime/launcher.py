"""Launching one loaded kernel: its argument layout, per-thread launch frames, and errors.

    launcher = Launcher(function, ["x", "n"], [PointerType(float32), int32])
    launcher.launch((128, 1, 1), {"x": x.data_ptr(), "n": 4096}, stream=0)

The JIT's fast path (`dispatch.py`) packs the frame (with the launcher's `pack_into`) and calls
`launch_ex` itself; `launch` is the general entry point, and `error` explains a failed launch. A
kernel whose metadata lists TMA tensor maps gets them after its own parameters: `pack_into` then
makes them from the launch's values (`tensor_maps.py`). A kernel that prints or asserts launches
through `CheckedLaunch`, which waits for it: see there.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from despina.compiler.errors import KernelRuntimeError
from despina.compiler.ir.types import Type
from despina.language.core import unwrap

from . import driver, libcuda
from .driver import Function, LastLaunch
from .errors import INVALID_VALUE, LAUNCH_OUT_OF_RESOURCES, CudaError, LaunchError, OutOfResourcesError, driver_error
from .packing import ArgLayout, Frame, config_stream
from .tensor_maps import TensorMaps

# The record of a failed device_assert in a kernel's module (the NVPTX backend's kernel ABI): u32
# failed (0 while none), the assertion's index in metadata["asserts"], the program id x, y, z and
# the row-major index of the failing element in the assertion's condition.
ASSERT_GLOBAL = "__despina_assert"
ASSERT_RECORD = struct.Struct("=6I")


class Launcher:
    """A kernel loaded on one device: its parameters' names and layout, and one Frame per thread.
    `pack_into(buffer, 0, *config, *values)` writes a launch into a frame: the layout struct's, or
    the tensor maps' (`tensor_maps`, None for a kernel without) which adds their bytes; the map of an
    empty tensor reads `fill_buffer` (driver.fill_buffer by default, in the launch's context)."""

    def __init__(self, function: Function, arg_names: Sequence[str], arg_types: Sequence[Type],
                 lib: libcuda.LibCuda | None = None, metadata: Mapping[str, Any] | None = None,
                 fill_buffer: Callable[[bytes], int] | None = None) -> None:
        self.function = function
        self.name = function.name
        self.arg_names = list(arg_names)
        meta = metadata or {}
        entries = meta.get("tensor_maps") or ()
        self.layout = ArgLayout(arg_types, len(entries))
        self.struct = self.layout.struct
        self.handle = ctypes.c_void_p(function.handle)
        self.threads = 32 * function.num_warps
        self.shared = function.shared
        lib = lib or libcuda.get()
        self.launch_ex: Callable[..., int] = lib.launch_ex
        self.pack_into: Callable[..., None] = self.struct.pack_into
        self.tensor_maps: TensorMaps | None = None
        if entries:
            self.tensor_maps = TensorMaps(self.name, self.arg_names, arg_types, entries, self.struct.pack_into,
                                          lib.encode_tiled, fill_buffer or driver.fill_buffer)
            self.pack_into = self.tensor_maps.pack_into
        if meta.get("prints") or meta.get("asserts"):
            self.launch_ex = CheckedLaunch(self.launch_ex, function, bool(meta.get("prints")), list(meta.get("asserts") or ()))
        self.local = threading.local()

    def frame(self) -> Frame:
        """The calling thread's Frame, made on its first launch."""
        try:
            return self.local.frame
        except AttributeError:
            frame = self.local.frame = self.layout.frame()
            return frame

    def launch(self, grid: tuple[int, int, int], values: dict[str, Any], stream: int = 0) -> None:
        """Launch on `stream` with `values` (parameter name -> int address or scalar, every parameter)."""
        frame = self.frame()
        self.layout.pack(frame, grid, self.threads, self.shared, stream, [values[n] for n in self.arg_names],
                         self.pack_into)
        code = self.launch_ex(frame.config, self.handle, frame.params, None)
        LastLaunch.kernel = self.name
        if code:
            raise self.error(code, grid)

    def error(self, code: int, grid: tuple[int, int, int]) -> CudaError:
        """The exception for a launch that returned CUresult `code`."""
        where = f"launch of kernel '{self.name}' (grid {grid}, {self.threads} threads, {self.shared} bytes of shared memory)"
        device = self.function.device
        if code == LAUNCH_OUT_OF_RESOURCES:
            regs = device.registers(self.function)
            return OutOfResourcesError(
                f"{where}: out of resources on {device}: {regs} registers per thread x {self.threads} threads is more "
                "than a block may use; use fewer num_warps or a smaller block size", code)
        if code == INVALID_VALUE:
            limits = f"grid at most {device.max_grid}, at most {device.max_threads_per_block} threads per block"
            return LaunchError(f"{where}: the driver rejected the launch configuration on {device} ({limits})", code)
        return driver_error(code, where, LastLaunch.kernel or self.name)


class CheckedLaunch:
    """`launch_ex` for a kernel that prints or asserts (metadata `prints`, `asserts`): the launch, then a
    wait for the launch's stream, so that the call returns with the kernel's work done. Its printf
    output, which the driver writes into the C library's stdout buffer at a synchronization, is then
    flushed; its failed device_assert, which the kernel records in its module's `__despina_assert`
    global instead of trapping (a trap would make the context unusable), is raised as
    KernelRuntimeError, and the record is cleared for the next launch. Two threads launching the same
    asserting kernel at once share the record: one of them may report the other's failure.

    Other kernels launch through libcuda's function itself: this costs them nothing."""

    def __init__(self, launch_ex: Callable[..., int], function: Function, prints: bool,
                 asserts: list[dict[str, Any]]) -> None:
        self.launch_ex = launch_ex
        self.function = function
        self.name = function.name
        self.prints = prints
        self.asserts = asserts
        self.record = 0

    def __call__(self, config: ctypes.c_void_p, function: ctypes.c_void_p, params: ctypes.c_void_p, extra: Any) -> int:
        code = self.launch_ex(config, function, params, extra)
        if code:
            return code
        LastLaunch.kernel = self.name
        try:
            driver.stream_synchronize(config_stream(config))
        finally:
            if self.prints:
                flush_stdout()
        if self.asserts:
            self.check()
        return 0

    def check(self) -> None:
        """Raise the failed assertion the launch recorded, if any, after clearing the record."""
        if not self.record:
            self.record = driver.module_global(self.function, ASSERT_GLOBAL)
        failed, index, x, y, z, element = ASSERT_RECORD.unpack(driver.read(self.record, ASSERT_RECORD.size))
        if failed:
            driver.clear(self.record, ASSERT_RECORD.size)
            raise assert_error(self.name, self.asserts[index], (x, y, z), element)


def assert_error(kernel: str, entry: Mapping[str, Any], pid: tuple[int, int, int], element: int) -> KernelRuntimeError:
    """The error of a failed device_assert, worded as the interpreter words it: `entry` is the
    assertion's row of metadata["asserts"], `element` the row-major index of a false element."""
    coords = []
    for size in reversed(entry.get("shape") or ()):
        coords.append(element % size)
        element //= size
    at = f", element ({', '.join(map(str, reversed(coords)))})" if coords else ""
    return KernelRuntimeError(f"kernel '{kernel}' at {entry['file']}:{entry['line']}: device_assert failed: "
                              f"{entry['message']} (program {pid}{at})")


_LIBC: Any = None


def flush_stdout() -> None:
    """Write out stdout's buffers: Python's, then the C library's (`fflush(NULL)`), which holds what the
    CUDA driver printed for the kernels."""
    global _LIBC
    if sys.stdout is not None:
        sys.stdout.flush()
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None) if os.name != "nt" else ctypes.cdll.ucrtbase
    _LIBC.fflush(None)


def grid_dims(grid: Any) -> tuple[int, int, int]:
    """(x, y, z) of a grid given as an int or a sequence of 1 to 3 non-negative ints."""
    if grid.__class__ is tuple and len(grid) == 1 and grid[0].__class__ is int and grid[0] >= 0:
        return (grid[0], 1, 1)
    if isinstance(grid, int):
        grid = (grid,)
    dims = tuple(int(unwrap(g)) for g in grid)
    if not 1 <= len(dims) <= 3 or any(d < 0 for d in dims):
        raise ValueError(f"grid must be 1 to 3 non-negative ints, got {grid!r}")
    return dims + (1,) * (3 - len(dims))  # type: ignore[return-value]


def stream_handle(stream: Any) -> int:
    """The CUstream of `stream=`: an int handle, a torch or CuPy stream, or any `__cuda_stream__` object."""
    if stream is None:
        return 0
    if isinstance(stream, int):
        return stream
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    for attribute in ("cuda_stream", "ptr", "handle"):
        if hasattr(stream, attribute):
            return int(getattr(stream, attribute))
    try:
        return int(stream)  # cuda-bindings' CUstream, or another handle object with __int__
    except (TypeError, ValueError):
        raise TypeError(f"stream= takes an int handle or a CUDA stream object, not {type(stream).__name__}") from None


def torch_stream_getter() -> Callable[[int], int]:
    """`device -> the current torch stream's handle on it`, through torch's cheap raw accessor."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda device: int(torch.cuda.current_stream(device).cuda_stream)
