"""The GPU runtime: the CUDA driver (`driver`, and `libcuda` for the launch fast path), argument
packing (`packing`, `pointers`, `tensor_maps`), launching (`launcher`, and `dispatch` for `kernel[grid](...)`),
the compiled-kernel caches (`kernels`, `cache`) and `DeviceArray`.

Importing this package imports neither cuda-bindings nor LLVM; they load on first use.
"""

from .device_array import DeviceArray
from .driver import synchronize
from .errors import (
    CudaError,
    CudaUnavailableError,
    HostArrayError,
    KernelFaultError,
    LaunchError,
    OutOfResourcesError,
    SharedMemoryError,
    TensorMapError,
)

__all__ = [
    "CudaError", "CudaUnavailableError", "DeviceArray", "HostArrayError", "KernelFaultError", "LaunchError",
    "OutOfResourcesError", "SharedMemoryError", "TensorMapError", "synchronize",
]
