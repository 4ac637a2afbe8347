"""The runtime's door into the CUDA driver: libcuda called through ctypes. The launch fast path's
`cuLaunchKernelEx` and `cuCtxGetCurrent` are prepared here for the cheapest call; every other driver
call (`driver.py`) goes through `LibCuda.function`. Nothing imports cuda-bindings (~35 ms in a fresh
process), so a process that only launches kernels never pays for it.

cuda-bindings' generic wrapper costs about 9 µs per launch on an H100 host (it converts every
argument on every call). Here every argument is a prebuilt ctypes object, passed without
`argtypes` (whose per-argument converters double the cost of a call): the launch config and the
parameter array are packed into one buffer beforehand (`packing.Frame`), so a launch is a call
with four arguments.

What a ctypes call costs depends on its arguments' kind and its restype. A ctypes instance
(`c_void_p`) is wrapped in a fresh argument object on every call; a `byref()` object is that
argument object already and is passed as it is: `launch_args` builds a launch's four arguments
that way. A function with no restype has its C int result read directly. Together they take about
30% off the call (counted in instructions, with a stub library); setting `argtypes` costs more than
passing c_void_p objects, and cuLaunchKernel, whose 11 arguments ctypes converts one by one, costs
twice as much as this call.

`encode_tiled` is cuTensorMapEncodeTiled, which writes the 128-byte `CUtensorMap` of a kernel's TMA
copies (`tensor_maps.py` calls it once per new set of tensors; a launch with the same tensors reuses
the bytes).
"""

from __future__ import annotations

import ctypes
import os
import threading
from _ctypes import FUNCFLAG_CDECL, FUNCFLAG_PYTHONAPI, CFuncPtr
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .errors import CudaUnavailableError, check

if TYPE_CHECKING:
    from .packing import Frame

_LIBRARY = "nvcuda.dll" if os.name == "nt" else "libcuda.so.1"

# cuTensorMapEncodeTiled(tensorMap, dataType, rank, globalAddress, globalDim, globalStrides, boxDim,
# elementStrides, interleave, swizzle, l2Promotion, oobFill): the enums are C ints.
_ENCODE_TILED = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                                 ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
                                 ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32), ctypes.c_int,
                                 ctypes.c_int, ctypes.c_int, ctypes.c_int)
TENSOR_MAP_BYTES = 128
# CU_TENSOR_MAP_L2_PROMOTION_L2_128B. Triton's maps take 256 bytes; on an H200 that made the kernels that hold
# one block an SM and stream their A from DRAM (tutorial 03 and tutorial 09's descriptor matmul, 128x128x64 with
# 4 stages, 8192^3, whose tiles read 128-byte rows) 9-10% slower than 128 bytes (bf16 tutorial 03: 514 -> 573
# TFLOP/s, 0.91x -> 1.02x Triton's cp.async), and moved no persistent or 2-blocks-an-SM row beyond noise.
L2_PROMOTION_128B = 2


class _IntResult(CFuncPtr):
    """A C function returning an int (a CUresult), the GIL released during the call. It has no
    `restype`: ctypes then reads the result as a C int itself, where a restype of c_int makes it
    look up that type's converter on every call."""

    _flags_ = FUNCFLAG_CDECL


class _IntResultGILHeld(CFuncPtr):
    """`_IntResult`, the GIL held during the call (for a call that cannot block)."""

    _flags_ = FUNCFLAG_CDECL | FUNCFLAG_PYTHONAPI


class LibCuda:
    """libcuda's entry points. `launch_ex(config, function, params, None)` takes pointer
    arguments (c_void_p objects, or the cheaper ones of `launch_args`) and returns a CUresult (the
    GIL is released during the call, as the driver may block while the launch queue is full);
    `current_context()` is the calling thread's context (0 for none); `function(name)` is any
    other entry point."""

    def __init__(self, lib: Any, gil_held: Any = None) -> None:
        self.lib = lib
        try:
            launch_ex = lib.cuLaunchKernelEx
            get_current = (gil_held or lib).cuCtxGetCurrent
        except AttributeError as exc:
            raise CudaUnavailableError(f"the CUDA driver is too old ({exc}): despina needs a driver for CUDA 12.0 "
                                       "or newer") from None
        self._functions = (launch_ex, get_current)  # what the functions below call, kept alive
        self.launch_ex = _IntResult(_address(launch_ex))
        # A call that holds the GIL is cheaper, and cuCtxGetCurrent only reads a thread-local.
        self._get_current = _IntResultGILHeld(_address(get_current))
        self._local = threading.local()
        self._encode_tiled: Any = None

    @property
    def get_current(self) -> Any:
        """cuCtxGetCurrent itself (the GIL held): `get_current(byref(c_size_t()))` -> CUresult."""
        return self._get_current

    def function(self, name: str) -> Any:
        """libcuda's `name` (its exact symbol: `cuMemAlloc_v2`, as cuda.h maps `cuMemAlloc`), returning a
        CUresult; its arguments must be ctypes objects (a plain int would be passed as a C int)."""
        return getattr(self.lib, name)

    def encode_tiled(self, data_type: int, address: int, dims: Sequence[int], strides: Sequence[int],
                     box: Sequence[int], swizzle: int, fill: int) -> tuple[int, bytes]:
        """cuTensorMapEncodeTiled: (its CUresult, the 128 bytes of the CUtensorMap) for the tensor at
        `address` of CUtensorMapDataType `data_type`, with `dims` and `box` innermost first and `strides`
        in bytes for every dimension but the innermost; elements strides 1, no interleave, CUtensorMapSwizzle
        `swizzle`, 128-byte L2 promotion, CUtensorMapFloatOOBfill `fill`."""
        if self._encode_tiled is None:
            self._encode_tiled = _ENCODE_TILED(("cuTensorMapEncodeTiled", self.lib))
        rank = len(dims)
        out = (ctypes.c_uint64 * (TENSOR_MAP_BYTES // 8 + 7))()  # room for a start on a 64-byte boundary
        skip = -ctypes.addressof(out) % 64
        code = self._encode_tiled(
            ctypes.addressof(out) + skip, data_type, rank, address, (ctypes.c_uint64 * rank)(*dims),
            (ctypes.c_uint64 * max(rank - 1, 1))(*strides), (ctypes.c_uint32 * rank)(*box),
            (ctypes.c_uint32 * rank)(*([1] * rank)), 0, swizzle, L2_PROMOTION_128B, fill)
        return int(code), ctypes.string_at(ctypes.addressof(out) + skip, TENSOR_MAP_BYTES)

    def current_context(self) -> int:
        try:
            ref, out = self._local.out
        except AttributeError:
            out = ctypes.c_size_t()
            ref, out = self._local.out = (ctypes.byref(out), out)
        code = self._get_current(ref)
        if code:
            check(code, "cuCtxGetCurrent")
        return out.value


def _address(function: Any) -> int:
    """The address of a ctypes function (of a library, or a callback)."""
    return ctypes.cast(function, ctypes.c_void_p).value or 0


def address_arg(anchor: Any, address: int | None) -> Any:
    """`address` as a prebuilt pointer argument of a ctypes call (a `byref` object: passed with no
    conversion), anchored on `anchor`, a ctypes instance it keeps alive; None stays NULL."""
    if address is None:
        return None
    return ctypes.byref(anchor, address - ctypes.addressof(anchor))


def launch_args(frame: Frame, handle: int) -> tuple[Any, Any, Any, None]:
    """`launch_ex`'s four arguments for launches of CUfunction `handle` from `frame`, built once."""
    buffer = frame.buffer
    return (ctypes.byref(buffer), address_arg(buffer, handle), address_arg(buffer, frame.params.value), None)


_LIB: LibCuda | None = None


def get() -> LibCuda:
    """The process's LibCuda, loaded on first use; CudaUnavailableError without a driver."""
    global _LIB
    if _LIB is None:
        try:
            _LIB = LibCuda(ctypes.CDLL(_LIBRARY), ctypes.PyDLL(_LIBRARY))
        except OSError as exc:
            raise CudaUnavailableError(f"the CUDA driver library {_LIBRARY} cannot be loaded ({exc}); a GPU launch "
                                       "needs an NVIDIA driver. Set DESPINA_INTERPRET=1 to run kernels in the "
                                       "interpreter") from None
    return _LIB


def driver_version() -> int:
    """cuDriverGetVersion straight from libcuda (12080 for CUDA 12.8), 0 where there is no driver: a
    client that only asks a daemon for binaries learns it without initializing the driver."""
    try:
        lib = ctypes.CDLL(_LIBRARY)
        number = ctypes.c_int(0)
        code = lib.cuDriverGetVersion(ctypes.byref(number))
    except (OSError, AttributeError):
        return 0
    return int(number.value) if code == 0 else 0
