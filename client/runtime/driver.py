"""The CUDA driver through ctypes on libcuda (`libcuda.py`): initialization, devices and their primary
contexts, loaded modules, memory and synchronization. Nothing here imports cuda-bindings, so a
process that only launches kernels never pays for it (~35 ms).

    dev = driver.device(0)          # retains and activates device 0's primary context
    dev.target                      # 'sm_90a' on an H100
    fn = dev.load(cubin, "add_kernel", shared=65536, num_warps=4)

Handles (devices, contexts, modules, functions, device pointers) are plain ints here; a call passes
them to libcuda as ctypes objects of their C types.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import libcuda
from .errors import CudaUnavailableError, LaunchError, SharedMemoryError, driver_error

_INITIALIZED = False
_VERSION: int | None = None
_DEVICES: dict[int, Device] = {}
_BY_CONTEXT: dict[int, Device] = {}
_FILLS: dict[int, dict[bytes, int]] = {}  # context -> {a fill buffer's FILL_BYTES bytes: its device address}
_FILL_ARENAS: dict[int, tuple[int, int]] = {}  # context -> (the allocation new fill buffers go in, bytes used)
_FILL_LOCK = threading.Lock()
FILL_BYTES = 16  # a fill buffer: 16-byte aligned, the fill's bits then zeros
FILL_ARENA = 256  # the allocation fill buffers are cut from: one per context for up to 16 distinct fills

# cuda.h's CUfunction_attribute and CUdevice_attribute values the runtime reads.
FUNC_SHARED_SIZE_BYTES = 1
FUNC_NUM_REGS = 4
FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
DEVICE_ATTRIBUTES = {"MAX_THREADS_PER_BLOCK": 1, "MAX_GRID_DIM_X": 5, "MAX_GRID_DIM_Y": 6, "MAX_GRID_DIM_Z": 7,
                     "MAX_SHARED_MEMORY_PER_BLOCK": 8, "MULTIPROCESSOR_COUNT": 16, "COMPUTE_CAPABILITY_MAJOR": 75,
                     "COMPUTE_CAPABILITY_MINOR": 76, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 97}



def block_warps(metadata: Mapping[str, Any], num_warps: int) -> int:
    """The warps a kernel's block launches with: its metadata's `num_threads` (a warp-specialized kernel's
    producer warps besides its `num_warps`), else `num_warps`."""
    return int(metadata.get("num_threads") or 32 * int(metadata.get("num_warps") or num_warps)) // 32

class LastLaunch:
    """The kernel launched last in this process: a fault surfaces at a later call, which names it."""

    kernel: str = ""


def call(what: str, symbol: str, *args: Any) -> None:
    """libcuda's `symbol(*args)` (ctypes arguments); the runtime's error for a failure, naming `what`
    and the last kernel."""
    code = libcuda.get().function(symbol)(*args)
    if code:
        raise driver_error(code, what, LastLaunch.kernel or None)


def value(what: str, symbol: str, ctype: Any, *args: Any) -> int:
    """`call` of a function whose first parameter is its result (`cuDeviceGet(CUdevice*, int)`): the
    value it writes, as an int (0 for a NULL pointer)."""
    out = ctype()
    call(what, symbol, ctypes.byref(out), *args)
    return int(out.value or 0)


def _ptr(handle: int) -> ctypes.c_void_p:
    return ctypes.c_void_p(handle)


def init() -> None:
    """`cuInit(0)` once per process; CudaUnavailableError where there is no driver or device."""
    global _INITIALIZED
    if _INITIALIZED:
        return
    try:
        lib = libcuda.get()
    except CudaUnavailableError as exc:
        raise CudaUnavailableError(f"no CUDA driver: {exc}") from None
    code = lib.function("cuInit")(ctypes.c_uint(0))
    if code:
        raise driver_error(code, "cuInit")
    _INITIALIZED = True


def version() -> int:
    """The CUDA driver's version as cuDriverGetVersion reports it (12080 for CUDA 12.8, 13000 for 13.0),
    or 0 where there is none (no libcuda: a compile-only host). Needs no cuInit."""
    global _VERSION
    if _VERSION is None:
        _VERSION = libcuda.driver_version()
    return _VERSION


def device_count() -> int:
    init()
    return value("cuDeviceGetCount", "cuDeviceGetCount", ctypes.c_int)


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
    handle: int
    context: int
    name: str
    capability: tuple[int, int]
    max_threads_per_block: int
    max_shared_per_block: int
    max_shared_optin: int
    multiprocessors: int
    max_grid: tuple[int, int, int]
    modules: dict[tuple[int, str], int] = field(default_factory=dict)

    @property
    def target(self) -> str:
        return target_for(self.capability)

    def __str__(self) -> str:
        return f"device {self.ordinal} ({self.name}, compute capability {self.capability[0]}.{self.capability[1]})"

    def make_current(self) -> None:
        call("cuCtxSetCurrent", "cuCtxSetCurrent", _ptr(self.context))

    @contextlib.contextmanager
    def activated(self) -> Iterator[None]:
        """This device's primary context current on the calling thread for the `with` body."""
        call("cuCtxPushCurrent", "cuCtxPushCurrent_v2", _ptr(self.context))
        try:
            yield
        finally:
            value("cuCtxPopCurrent", "cuCtxPopCurrent_v2", ctypes.c_void_p)

    def load(self, cubin: bytes, name: str, shared: int, num_warps: int, context: int | None = None) -> Function:
        """Kernel `name` of `cubin` loaded in `context` (the device's primary context by default; it must be
        current), checked against the device's limits, with the dynamic shared memory it needs enabled.
        `cubin` may also be PTX text (a daemon's answer for a driver older than its toolchain), which the
        driver compiles as it loads it."""
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
            image = ctypes.create_string_buffer(cubin, len(cubin))
            module = self.modules[key] = value(f"cuModuleLoadData (kernel '{name}')", "cuModuleLoadData",
                                               ctypes.c_void_p, image)
        fn = value(f"cuModuleGetFunction('{name}')", "cuModuleGetFunction", ctypes.c_void_p, _ptr(module),
                   name.encode())
        function = Function(fn, name, shared, num_warps, self)
        static = function_attribute(function, FUNC_SHARED_SIZE_BYTES)
        if static + shared > self.max_shared_optin:
            raise SharedMemoryError(
                f"kernel '{name}' needs {static + shared} bytes of shared memory per block; {self} allows at most "
                f"{self.max_shared_optin}: use a smaller block size or fewer num_stages")
        if shared > self.max_shared_per_block - static:
            call("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", "cuFuncSetAttribute", _ptr(fn),
                 ctypes.c_int(FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES), ctypes.c_int(shared))
        return function

    def registers(self, function: Function) -> int:
        """Registers per thread the loaded `function` uses."""
        return function_attribute(function, FUNC_NUM_REGS)


def function_attribute(function: Function, attribute: int) -> int:
    """cuFuncGetAttribute: CUfunction_attribute `attribute` of the loaded `function`."""
    return value("cuFuncGetAttribute", "cuFuncGetAttribute", ctypes.c_int, ctypes.c_int(attribute),
                 _ptr(function.handle))


def unload(module: int) -> None:
    """cuModuleUnload of a module `Device.load` loaded (the caller drops it from `Device.modules`)."""
    call("cuModuleUnload", "cuModuleUnload", _ptr(module))


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
    handle = value("cuDeviceGet", "cuDeviceGet", ctypes.c_int, ctypes.c_int(ordinal))
    context = value("cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", ctypes.c_void_p, ctypes.c_int(handle))

    def attribute(name: str) -> int:
        return value(f"cuDeviceGetAttribute({name})", "cuDeviceGetAttribute", ctypes.c_int,
                     ctypes.c_int(DEVICE_ATTRIBUTES[name]), ctypes.c_int(handle))

    raw_name = ctypes.create_string_buffer(256)
    call("cuDeviceGetName", "cuDeviceGetName", raw_name, ctypes.c_int(256), ctypes.c_int(handle))
    dev = Device(
        ordinal, handle, context, raw_name.value.decode(errors="replace"),
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
    context = libcuda.get().current_context()
    if context == 0:
        dev = device(0)
        dev.make_current()
        context = dev.context
    return context


def context_device(context: int) -> Device:
    """The device of `context`, which must be the calling thread's current context."""
    found = _BY_CONTEXT.get(context)
    if found is None:
        found = _BY_CONTEXT[context] = device(value("cuCtxGetDevice", "cuCtxGetDevice", ctypes.c_int))
    return found


def synchronize() -> None:
    """Wait for all work on the current context; a fault in an earlier kernel is raised here, naming it."""
    current_context()
    call("cuCtxSynchronize", "cuCtxSynchronize")


def stream_synchronize(stream: int) -> None:
    """Wait for the work queued on `stream` (a CUstream handle; 0 is the default stream). The driver
    writes the kernels' printf output to the C library's stdout here; a fault is raised here, naming
    the kernel launched last."""
    call("cuStreamSynchronize", "cuStreamSynchronize", _ptr(stream))


def module_global(function: Function, name: str) -> int:
    """The device address of the global variable `name` of the module `function` was loaded from."""
    module = value("cuFuncGetModule", "cuFuncGetModule", ctypes.c_void_p, _ptr(function.handle))
    return value(f"cuModuleGetGlobal('{name}')", "cuModuleGetGlobal_v2", ctypes.c_uint64,
                 ctypes.byref(ctypes.c_size_t()), _ptr(module), name.encode())


def read(address: int, nbytes: int) -> bytes:
    """`nbytes` of device memory at `address`, copied in the calling thread's current context."""
    buffer = ctypes.create_string_buffer(nbytes)
    call("cuMemcpyDtoH", "cuMemcpyDtoH_v2", buffer, ctypes.c_uint64(address), ctypes.c_size_t(nbytes))
    return buffer.raw


def clear(address: int, nbytes: int) -> None:
    """Zero `nbytes` of device memory at `address` in the current context, done when this returns (a
    memset may be asynchronous to the host: the context is synchronized after it)."""
    call("cuMemsetD8", "cuMemsetD8_v2", ctypes.c_uint64(address), ctypes.c_ubyte(0), ctypes.c_size_t(nbytes))
    call("cuCtxSynchronize", "cuCtxSynchronize")


def write(address: int, data: bytes) -> None:
    """Copy `data` to device memory at `address` in the current context, done when this returns (the
    copy from pageable host memory may still be in flight when cuMemcpyHtoD returns: the context is
    synchronized after it)."""
    call("cuMemcpyHtoD", "cuMemcpyHtoD_v2", ctypes.c_uint64(address), ctypes.c_char_p(data), ctypes.c_size_t(len(data)))
    call("cuCtxSynchronize", "cuCtxSynchronize")


def fill_buffer(bits: bytes) -> int:
    """The device address, in the calling thread's current context, of FILL_BYTES bytes (16-byte
    aligned) that hold `bits` (at most FILL_BYTES of them) and then zeros: what a TMA map of an empty
    tensor reads its one in-bounds element from (`tensor_maps.py`). Each distinct buffer is written
    once per context, in one FILL_ARENA-byte allocation made on the context's first request (another
    only past 16 distinct fills), and kept for the life of the process (as the primary contexts are)."""
    if len(bits) > FILL_BYTES:
        raise ValueError(f"a fill buffer holds at most {FILL_BYTES} bytes, not {len(bits)}")
    content = bits.ljust(FILL_BYTES, b"\0")
    context = current_context()
    with _FILL_LOCK:
        fills = _FILLS.setdefault(context, {})
        address = fills.get(content)
        if address is None:
            arena, used = _FILL_ARENAS.get(context, (0, FILL_ARENA))
            if used == FILL_ARENA:
                arena, used = value(f"cuMemAlloc({FILL_ARENA}) (a fill buffer of TMA maps)", "cuMemAlloc_v2",
                                    ctypes.c_uint64, ctypes.c_size_t(FILL_ARENA)), 0
                _FILL_ARENAS[context] = (arena, used)
            address = arena + used
            write(address, content)
            _FILL_ARENAS[context] = (arena, used + FILL_BYTES)
            fills[content] = address
        return address


def alloc(dev: Device, nbytes: int) -> int:
    with dev.activated():
        return value(f"cuMemAlloc({nbytes})", "cuMemAlloc_v2", ctypes.c_uint64, ctypes.c_size_t(max(nbytes, 1)))


def free(dev: Device, pointer: int) -> None:
    with dev.activated():
        call("cuMemFree", "cuMemFree_v2", ctypes.c_uint64(pointer))


def copy_to_device(dev: Device, dst: int, src_host: int, nbytes: int) -> None:
    with dev.activated():
        call("cuMemcpyHtoD", "cuMemcpyHtoD_v2", ctypes.c_uint64(dst), _ptr(src_host), ctypes.c_size_t(nbytes))


def copy_on_device(dev: Device, dst: int, src: int, nbytes: int) -> None:
    with dev.activated():
        call("cuMemcpyDtoD", "cuMemcpyDtoD_v2", ctypes.c_uint64(dst), ctypes.c_uint64(src), ctypes.c_size_t(nbytes))


def copy_to_host(dev: Device, dst_host: int, src: int, nbytes: int) -> None:
    with dev.activated():
        call("cuMemcpyDtoH", "cuMemcpyDtoH_v2", _ptr(dst_host), ctypes.c_uint64(src), ctypes.c_size_t(nbytes))
