"""Errors of the GPU runtime: each says what went wrong, for which kernel, and what to do."""

from __future__ import annotations

# CUresult codes the runtime explains itself (cuda.bindings.driver.CUresult names them all).
INVALID_VALUE = 1
OUT_OF_MEMORY = 2
NO_DEVICE = 100
INVALID_CONTEXT = 201
LAUNCH_OUT_OF_RESOURCES = 701

# Faults raised while a kernel runs. They are sticky: the context is unusable afterwards.
FAULTS: dict[int, str] = {
    700: "an illegal memory access (an address outside every allocation: check the masks and offsets)",
    702: "the kernel ran past the watchdog's time limit",
    710: "a device-side assertion failed",
    714: "a hardware stack error (deep recursion or a stack overflow)",
    715: "an illegal instruction",
    716: "a misaligned memory access (a vector access on a pointer that is not aligned as promised)",
    717: "an access to the wrong address space",
    718: "an invalid program counter",
    719: "an exception during the kernel",
}

_HINT_FAULT = ("the CUDA context is now unusable: restart the process. To find the access, run the kernel "
               "with DESPINA_INTERPRET=1 (the interpreter checks every access) or under compute-sanitizer")


def error_name(code: int) -> str:
    """`CUDA_ERROR_ILLEGAL_ADDRESS` for 700, from cuda-bindings when it is installed."""
    try:
        from cuda.bindings import driver

        return str(driver.CUresult(code).name)
    except (ImportError, ValueError):
        return f"CUresult {code}"


class CudaError(RuntimeError):
    """A CUDA driver call failed; `code` is its CUresult."""

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.code = code


class CudaUnavailableError(CudaError):
    """No usable CUDA: no driver library, no device, or cuInit failing."""


class LaunchError(CudaError):
    """The launch itself was refused: grid, block, registers or shared memory beyond the device."""


class OutOfResourcesError(LaunchError):
    """The kernel needs more registers or threads per block than the device has."""


class SharedMemoryError(LaunchError):
    """The kernel needs more shared memory per block than the device allows."""


class TensorMapError(LaunchError):
    """A kernel's TMA tensor map cannot be made for the launch's tensors (misaligned, strides TMA cannot
    step, the driver refusing it); `code` is the driver's CUresult, 0 when despina's own checks refused."""


class KernelFaultError(CudaError):
    """A kernel faulted while it ran (illegal address, assertion, ...); the context is unusable."""


class HostArrayError(TypeError):
    """A host array (NumPy, CPU torch tensor) was passed to a GPU launch."""


def check(code: int, what: str) -> None:
    """Raise the error for a failed driver call `what` (`cuMemAlloc(4096)`); nothing for success."""
    if code:
        raise driver_error(code, what)


def driver_error(code: int, what: str, kernel: str | None = None) -> CudaError:
    """The exception for CUresult `code` returned by `what`; `kernel` is the last kernel launched."""
    name = error_name(code)
    if code in FAULTS:
        culprit = f"kernel '{kernel}'" if kernel else "a kernel launched earlier"
        return KernelFaultError(f"CUDA fault in {culprit}: {FAULTS[code]} ({name}, reported by {what}); "
                                f"{_HINT_FAULT}", code)
    if code == OUT_OF_MEMORY:
        return CudaError(f"{what}: out of GPU memory ({name}); free tensors or use smaller inputs", code)
    if code == NO_DEVICE:
        return CudaUnavailableError(f"{what}: no CUDA device is visible ({name}); check CUDA_VISIBLE_DEVICES "
                                    "or set DESPINA_INTERPRET=1 to run kernels in the interpreter", code)
    return CudaError(f"{what} failed: {name}", code)
