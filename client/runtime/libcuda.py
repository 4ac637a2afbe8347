"""The launch fast path's own door into the CUDA driver: `cuLaunchKernelEx` and `cuCtxGetCurrent`
called straight from libcuda through ctypes.

cuda-bindings' generic wrapper costs about 9 µs per launch on an H100 host (it converts every
argument on every call). Here every argument is a prebuilt ctypes object, passed without
`argtypes` (whose per-argument converters double the cost of a call): the launch config and the
parameter array are packed into one buffer beforehand (`packing.Frame`), so a launch is a call
with four arguments. Everything else in the runtime goes through cuda-bindings (`driver.py`).
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

from .errors import CudaUnavailableError, check

_LIBRARY = "nvcuda.dll" if os.name == "nt" else "libcuda.so.1"


class LibCuda:
    """libcuda's launch entry points. `launch_ex(config, function, params, None)` takes c_void_p
    objects and returns a CUresult (the GIL is released during the call, as the driver may block
    while the launch queue is full); `current_context()` is the calling thread's context (0 for none)."""

    def __init__(self, lib: Any, gil_held: Any = None) -> None:
        try:
            self.launch_ex = lib.cuLaunchKernelEx
            # A call that holds the GIL is cheaper, and cuCtxGetCurrent only reads a thread-local.
            self._get_current = (gil_held or lib).cuCtxGetCurrent
        except AttributeError as exc:
            raise CudaUnavailableError(f"the CUDA driver is too old ({exc}): despina needs a driver for CUDA 12.0 "
                                       "or newer") from None
        self.launch_ex.restype = ctypes.c_int
        self._get_current.restype = ctypes.c_int
        self._local = threading.local()

    def current_context(self) -> int:
        try:
            out, ref = self._local.out
        except AttributeError:
            out = ctypes.c_void_p()
            out, ref = self._local.out = (out, ctypes.byref(out))
        code = self._get_current(ref)
        if code:
            check(code, "cuCtxGetCurrent")
        return out.value or 0


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
                                       "interpreter instead") from None
    return _LIB
