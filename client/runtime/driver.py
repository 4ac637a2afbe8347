"""The CUDA driver through cuda-bindings: initialization, devices and their primary contexts,
loaded modules, memory and synchronization. Nothing here is on the launch fast path
(`libcuda.py` is); cuda-bindings is imported on first use, so `import despina` stays light.

    dev = driver.device(0)          # retains and activates device 0's primary context
    dev.target                      # 'sm_90a' on an H100
    fn = dev.load(cubin, "add_kernel", shared=65536, num_warps=4)
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from . import libcuda
from .errors import CudaUnavailableError, LaunchError, SharedMemoryError, driver_error

_CU: ModuleType | None = None
_INITIALIZED = False
_VERSION: int | None = None
_DEVICES: dict[int, Device] = {}
_BY_CONTEXT: dict[int, Device] = {}


class LastLaunch:
    """The kernel launched last in this process: a fault surfaces at a later call, which names it."""

    kernel: str = ""


def cu() -> ModuleType:
    """`cuda.bindings.driver`, imported on first use."""
    global _CU
    if _CU is None:
        try:
            from cuda.bindings import driver
        except ImportError as exc:
            raise CudaUnavailableError(f"GPU launches need cuda-bindings ({exc}): pip install 'despina[compiler]'") from None
        _CU = driver
    return _CU


def call(what: str, fn: Any, *args: Any) -> Any:
    """`fn(*args)` for a cuda-bindings function returning `(CUresult, *values)`: the value (or tuple
    of values, or None), or the runtime's error for a failure, naming `what` and the last kernel."""
    result = fn(*args)
    code = int(result[0])
    if code:
        raise driver_error(code, what, LastLaunch.kernel or None)
    return result[1] if len(result) == 2 else (tuple(result[1:]) or None)


def init() -> None:
    """`cuInit(0)` once per process; CudaUnavailableError where there is no driver or device."""
    global _INITIALIZED
    if _INITIALIZED:
        return
    driver = cu()
    try:
        result = driver.cuInit(0)
    except Exception as exc:  # cuda-bindings raises its own loader errors when libcuda is absent
        raise CudaUnavailableError(f"no CUDA driver: {str(exc).rstrip().rstrip('.')}. Set DESPINA_INTERPRET=1 to run "
                                   "kernels in the interpreter") from None
    if int(result[0]):
        raise driver_error(int(result[0]), "cuInit")
    _INITIALIZED = True


def version() -> int:
    """The CUDA driver's version as cuDriverGetVersion reports it (12080 for CUDA 12.8, 13000 for 13.0),
    or 0 where there is none (no libcuda: a compile-only host). Needs no cuInit, nor cuda-bindings."""
    global _VERSION
    if _VERSION is None:
        _VERSION = libcuda.driver_version()
    return _VERSION


def device_count() -> int:
    init()
    return int(call("cuDeviceGetCount", cu().cuDeviceGetCount))


def target_for(capability: tuple[int, int]) -> str:
    """The compile target of a compute capability: `sm_86` for (8, 6), `sm_90a` for (9, 0) (wgmma and TMA
    need the architecture-specific target, and an sm_90a cubin runs only on 9.0 devices, which it is for)."""
    major, minor = capability
    return f"sm_{major}{minor}" + ("a" if (major, minor) == (9, 0) else "")


@dataclass(frozen=True)
class Function:
    """A kernel loaded on one device: the CUfunction handle and what its launch needs."""

    handle: int
    name: str
    shared: int
    num_warps: int
    device: Device


@dataclass(eq=False)
class Device:
    """One GPU, its primary context (retained for the life of the process) and its loaded modules."""

    ordinal: int
    handle: Any
    context: int
    name: str
    capability: tuple[int, int]
    max_threads_per_block: int
    max_shared_per_block: int
    max_shared_optin: int
    multiprocessors: int
    max_grid: tuple[int, int, int]
    modules: dict[tuple[int, str], Any] = field(default_factory=dict)

    @property
    def target(self) -> str:
        return target_for(self.capability)

    def __str__(self) -> str:
        return f"device {self.ordinal} ({self.name}, compute capability {self.capability[0]}.{self.capability[1]})"

    def make_current(self) -> None:
        call("cuCtxSetCurrent", cu().cuCtxSetCurrent, cu().CUcontext(self.context))

    @contextlib.contextmanager
    def activated(self) -> Iterator[None]:
        """This device's primary context current on the calling thread for the `with` body."""
        driver = cu()
        call("cuCtxPushCurrent", driver.cuCtxPushCurrent, driver.CUcontext(self.context))
        try:
            yield
        finally:
            call("cuCtxPopCurrent", driver.cuCtxPopCurrent)

    def load(self, cubin: bytes, name: str, shared: int, num_warps: int, context: int | None = None) -> Function:
        """Kernel `name` of `cubin` loaded in `context` (the device's primary context by default; it must be
        current), checked against the device's limits, with the dynamic shared memory it needs enabled.
        `cubin` may also be PTX text (a daemon's answer for a driver older than its toolchain), which the
        driver compiles as it loads it."""
        driver = cu()
        context = self.context if context is None else context
        threads = 32 * num_warps
        if threads > self.max_threads_per_block:
            raise LaunchError(f"kernel '{name}': num_warps={num_warps} makes {threads} threads per block; {self} "
                              f"allows at most {self.max_threads_per_block}: use num_warps <= "
                              f"{self.max_threads_per_block // 32}")
        key = (context, hashlib.sha256(cubin).hexdigest())
        module = self.modules.get(key)
        if module is None:
            if is_ptx(cubin) and not cubin.endswith(b"\0"):
                cubin += b"\0"  # cuModuleLoadData reads PTX as a NUL-terminated string
            image = (ctypes.c_char * len(cubin)).from_buffer_copy(cubin)
            module = self.modules[key] = call(f"cuModuleLoadData (kernel '{name}')", driver.cuModuleLoadData,
                                              ctypes.addressof(image))
        fn = call(f"cuModuleGetFunction('{name}')", driver.cuModuleGetFunction, module, name.encode())
        attr = driver.CUfunction_attribute
        static = int(call("cuFuncGetAttribute", driver.cuFuncGetAttribute, attr.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn))
        if static + shared > self.max_shared_optin:
            raise SharedMemoryError(
                f"kernel '{name}' needs {static + shared} bytes of shared memory per block; {self} allows at most "
                f"{self.max_shared_optin}: use a smaller block size or fewer num_stages")
        if shared > self.max_shared_per_block - static:
            call("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", driver.cuFuncSetAttribute, fn,
                 attr.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared)
        return Function(int(fn), name, shared, num_warps, self)

    def registers(self, function: Function) -> int:
        """Registers per thread the loaded `function` uses."""
        driver = cu()
        return int(call("cuFuncGetAttribute", driver.cuFuncGetAttribute,
                        driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS, driver.CUfunction(function.handle)))


def is_ptx(image: bytes) -> bool:
    """Whether a module image is PTX text (its header declares `.version` and `.target`) rather than a
    cubin (ELF) or a fatbinary."""
    if image[:4] in (b"\x7fELF", b"\x50\xed\x55\xba"):
        return False
    head = image[:8192]
    return b".version" in head and b".target" in head


def device(ordinal: int = 0) -> Device:
    """Device `ordinal` (as CUDA_VISIBLE_DEVICES numbers them), its primary context retained."""
    found = _DEVICES.get(ordinal)
    if found is not None:
        return found
    init()
    count = device_count()
    if not 0 <= ordinal < count:
        raise CudaUnavailableError(f"no CUDA device {ordinal}: {count} device(s) visible")
    driver = cu()
    handle = call("cuDeviceGet", driver.cuDeviceGet, ordinal)
    context = int(call("cuDevicePrimaryCtxRetain", driver.cuDevicePrimaryCtxRetain, handle))
    a = driver.CUdevice_attribute

    def attribute(name: str) -> int:
        return int(call(f"cuDeviceGetAttribute({name})", driver.cuDeviceGetAttribute, getattr(a, f"CU_DEVICE_ATTRIBUTE_{name}"), handle))

    raw_name = call("cuDeviceGetName", driver.cuDeviceGetName, 256, handle)
    dev = Device(
        ordinal, handle, context, raw_name.split(b"\0", 1)[0].decode(errors="replace"),
        (attribute("COMPUTE_CAPABILITY_MAJOR"), attribute("COMPUTE_CAPABILITY_MINOR")),
        attribute("MAX_THREADS_PER_BLOCK"), attribute("MAX_SHARED_MEMORY_PER_BLOCK"),
        attribute("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"), attribute("MULTIPROCESSOR_COUNT"),
        (attribute("MAX_GRID_DIM_X"), attribute("MAX_GRID_DIM_Y"), attribute("MAX_GRID_DIM_Z")),
    )
    _DEVICES[ordinal] = dev
    _BY_CONTEXT[context] = dev
    return dev


def current_context() -> int:
    """The calling thread's context; with none current, device 0's primary context is made current."""
    init()
    context = int(call("cuCtxGetCurrent", cu().cuCtxGetCurrent))
    if context == 0:
        dev = device(0)
        dev.make_current()
        context = dev.context
    return context


def context_device(context: int) -> Device:
    """The device of `context`, which must be the calling thread's current context."""
    found = _BY_CONTEXT.get(context)
    if found is None:
        found = _BY_CONTEXT[context] = device(int(call("cuCtxGetDevice", cu().cuCtxGetDevice)))
    return found


def synchronize() -> None:
    """Wait for all work on the current context; a fault in an earlier kernel is raised here, naming it."""
    current_context()
    call("cuCtxSynchronize", cu().cuCtxSynchronize)


def stream_synchronize(stream: int) -> None:
    """Wait for the work queued on `stream` (a CUstream handle; 0 is the default stream). The driver
    writes the kernels' printf output to the C library's stdout here; a fault is raised here, naming
    the kernel launched last."""
    driver = cu()
    call("cuStreamSynchronize", driver.cuStreamSynchronize, driver.CUstream(stream))


def module_global(function: Function, name: str) -> int:
    """The device address of the global variable `name` of the module `function` was loaded from."""
    driver = cu()
    module = call("cuFuncGetModule", driver.cuFuncGetModule, driver.CUfunction(function.handle))
    address, _ = call(f"cuModuleGetGlobal('{name}')", driver.cuModuleGetGlobal, module, name.encode())
    return int(address)


def read(address: int, nbytes: int) -> bytes:
    """`nbytes` of device memory at `address`, copied in the calling thread's current context."""
    buffer = ctypes.create_string_buffer(nbytes)
    call("cuMemcpyDtoH", cu().cuMemcpyDtoH, ctypes.addressof(buffer), cu().CUdeviceptr(address), nbytes)
    return buffer.raw


def clear(address: int, nbytes: int) -> None:
    """Zero `nbytes` of device memory at `address` in the current context, done when this returns (a
    memset may be asynchronous to the host: the context is synchronized after it)."""
    driver = cu()
    call("cuMemsetD8", driver.cuMemsetD8, driver.CUdeviceptr(address), 0, nbytes)
    call("cuCtxSynchronize", driver.cuCtxSynchronize)


def alloc(dev: Device, nbytes: int) -> int:
    with dev.activated():
        return int(call(f"cuMemAlloc({nbytes})", cu().cuMemAlloc, max(nbytes, 1)))


def free(dev: Device, pointer: int) -> None:
    with dev.activated():
        call("cuMemFree", cu().cuMemFree, cu().CUdeviceptr(pointer))


def copy_to_device(dev: Device, dst: int, src_host: int, nbytes: int) -> None:
    with dev.activated():
        call("cuMemcpyHtoD", cu().cuMemcpyHtoD, cu().CUdeviceptr(dst), src_host, nbytes)


def copy_on_device(dev: Device, dst: int, src: int, nbytes: int) -> None:
    with dev.activated():
        call("cuMemcpyDtoD", cu().cuMemcpyDtoD, cu().CUdeviceptr(dst), cu().CUdeviceptr(src), nbytes)


def copy_to_host(dev: Device, dst_host: int, src: int, nbytes: int) -> None:
    with dev.activated():
        call("cuMemcpyDtoH", cu().cuMemcpyDtoH, dst_host, cu().CUdeviceptr(src), nbytes)
