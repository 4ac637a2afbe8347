"""`despina.DeviceArray`: a contiguous array in GPU memory, for users without torch or CuPy.

    x = despina.DeviceArray.from_numpy(np.arange(4096, dtype=np.float32))
    out = despina.DeviceArray.empty(x.shape, np.float32)
    add[(4,)](x, x, out, 4096, BLOCK=1024)
    out.to_numpy()

It exposes `__cuda_array_interface__`, so CuPy, Numba and torch (`torch.as_tensor(x, device="cuda")`)
can read it without a copy. Memory comes from cuMemAlloc and is freed when the array is collected.
"""

from __future__ import annotations

import math
import weakref
from typing import TYPE_CHECKING, Any

from . import driver

if TYPE_CHECKING:
    import numpy as np


class DeviceArray:
    """A C-contiguous array on device `device`: `shape`, `dtype` (a NumPy dtype), `data_ptr()`."""

    def __init__(self, shape: tuple[int, ...], dtype: Any, device: int = 0) -> None:
        import numpy as np  # on first use: `import despina` (and compiling) needs no NumPy

        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        if any(d < 0 for d in self.shape):
            raise ValueError(f"DeviceArray shape must be non-negative, got {self.shape}")
        self.device = driver.device(device)
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize
        self._pointer = driver.alloc(self.device, self.nbytes)
        weakref.finalize(self, _release, self.device, self._pointer)

    @classmethod
    def empty(cls, shape: int | tuple[int, ...], dtype: Any, device: int = 0) -> DeviceArray:
        """An uninitialized array."""
        return cls((shape,) if isinstance(shape, int) else tuple(shape), dtype, device)

    @classmethod
    def from_numpy(cls, array: np.ndarray, device: int = 0) -> DeviceArray:
        """A device copy of `array`."""
        import numpy as np

        host = np.ascontiguousarray(array)
        out = cls(host.shape, host.dtype, device)
        if out.nbytes:
            driver.copy_to_device(out.device, out._pointer, host.ctypes.data, out.nbytes)
        return out

    def to_numpy(self) -> np.ndarray:
        """A host copy; waits for the kernels writing the array (on the default stream), and raises a
        kernel's fault here, naming the kernel."""
        import numpy as np

        host = np.empty(self.shape, self.dtype)
        if self.nbytes:
            driver.copy_to_host(self.device, host.ctypes.data, self._pointer, self.nbytes)
        return host

    def data_ptr(self) -> int:
        return self._pointer

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d DeviceArray")
        return self.shape[0]

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self._pointer, False), "strides": None,
                "version": 3, "stream": None}

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, device={self.device.ordinal})"


def _release(device: driver.Device, pointer: int) -> None:
    try:
        driver.free(device, pointer)
    except Exception:  # at interpreter exit, or after a fault left the context unusable: nothing to do
        pass
