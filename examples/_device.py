"""Where the examples run: on a CUDA GPU when one is usable, else in Despina's interpreter.

    interpreted = use_interpreter()       # sets DESPINA_INTERPRET=1 when no GPU can run the kernels
    x = to_device(np.ones(1024, np.float32))   # a despina.DeviceArray on the GPU, x itself when interpreted
    kernel[grid](x, ...)
    to_host(x)                            # back to NumPy
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

import despina
from despina.runtime import env


def interpreting() -> bool:
    """Whether kernels run in the interpreter: DESPINA_INTERPRET is 1, true, yes or on, as the JIT reads it."""
    return env.flag("DESPINA_INTERPRET")


def gpu_usable() -> bool:
    """Whether Despina's own runtime can compile for and launch on CUDA device 0: the compiler extras
    (llvmlite, cuda-bindings) are installed, libcuda loads, cuInit succeeds and a device is visible."""
    try:
        import llvmlite  # noqa: F401  (the NVPTX backend)

        from despina.runtime import CudaError, driver

        driver.device(0)
    except (ImportError, OSError, CudaError):
        return False
    return True


def use_interpreter() -> bool:
    """True (and `DESPINA_INTERPRET=1` set) when no CUDA device can run the kernels."""
    if interpreting():
        return True
    if gpu_usable():
        return False
    os.environ["DESPINA_INTERPRET"] = "1"
    return True


def to_device(array: np.ndarray) -> Any:
    """`array` where kernels can read it: a `despina.DeviceArray` copy on the GPU, `array` itself in the
    interpreter. It must be C-contiguous (the examples take strides from the NumPy array)."""
    if not array.flags.c_contiguous:
        raise ValueError("to_device needs a C-contiguous array: use np.ascontiguousarray(array)")
    return array if interpreting() else despina.DeviceArray.from_numpy(array)


def to_host(x: Any) -> np.ndarray:
    """A kernel argument as NumPy: a DeviceArray copied back (waiting for the kernels writing it),
    a NumPy array as it is."""
    return x.to_numpy() if isinstance(x, despina.DeviceArray) else x
