"""The executor of Execute's GPU worker process (execute.py): device 0 through `despina.runtime`.

    executor = open_executor()   # in the worker: cuInit, device 0's primary context; NoDevice without one
    executor.info                # {"target": "sm_90a", "driver_version": 12080, "device": "device 0 (NVIDIA H100 ...)"}
    executor.run(job)            # {"buffers": [bytes, ...], "seconds": kernel time}

`run` loads the image (cached per image and kernel name), allocates a device buffer per buffer
argument and copies it in, launches with the runtime's Launcher on the default stream, waits for
the kernel (the daemon's time-out bounds the wait: it kills this process), copies every buffer back
and frees them. A sticky CUDA error (a fault: the context is unusable) is an `ExecuteFailure` with
`fatal=True`, naming the kernel and the CUDA error, and this process exits; any other CUDA error
(a launch the device refuses, out of memory, an image it cannot load) leaves it serving.
"""

from __future__ import annotations

import ctypes
import time
from collections import OrderedDict
from typing import Any

from . import gpu_bench
from .execute import ExecuteFailure, NoDevice

# Loaded kernels kept per worker; past this, the least recently used module is unloaded.
MAX_MODULES = 64


def open_executor() -> GpuExecutor:
    try:
        from despina.runtime import driver
        from despina.runtime.errors import CudaError
    except ImportError as e:
        raise NoDevice(f"despina.runtime cannot be imported ({e})") from None
    try:
        device = driver.device(0)
        device.make_current()
    except CudaError as e:  # no driver, no device, cuInit failing
        raise NoDevice(f"no usable CUDA device: {e}") from None
    except ImportError as e:
        raise NoDevice(f"no CUDA driver bindings ({e})") from None
    return GpuExecutor(device)


class GpuExecutor:
    def __init__(self, device: Any) -> None:
        from despina.runtime import driver

        self.device = device
        self.info = {"target": device.target, "driver_version": driver.version(), "device": str(device),
                     "name": device.name}
        self.launchers: OrderedDict[tuple[str, str], Any] = OrderedDict()

    def run(self, job: dict[str, Any]) -> dict[str, Any]:
        from despina.compiler.errors import KernelRuntimeError
        from despina.runtime import driver
        from despina.runtime.errors import CudaError

        name = job["name"]
        allocated: list[tuple[int, int]] = []
        fatal = False
        try:
            launcher = self._launcher(job)
            if "bench" in job:
                return gpu_bench.measure(self.device, launcher, job, allocated)
            values: dict[str, Any] = {}
            for (param, _), value in zip(job["params"], job["args"]):
                if isinstance(value, (bytes, bytearray)):
                    pointer = driver.alloc(self.device, len(value))
                    allocated.append((pointer, len(value)))
                    if value:
                        source = ctypes.c_char_p(bytes(value))
                        driver.copy_to_device(self.device, pointer, ctypes.cast(source, ctypes.c_void_p).value or 0,
                                              len(value))
                    values[param] = pointer
                else:
                    values[param] = value
            start = time.perf_counter()
            launcher.launch(tuple(job["grid"]), values, 0)
            driver.synchronize()
            seconds = time.perf_counter() - start
            buffers = []
            for pointer, nbytes in allocated:
                out = bytearray(nbytes)
                if nbytes:
                    driver.copy_to_host(self.device, ctypes.addressof((ctypes.c_char * nbytes).from_buffer(out)),
                                        pointer, nbytes)
                buffers.append(bytes(out))
            return {"buffers": buffers, "seconds": seconds}
        except KernelRuntimeError as e:  # a failed device_assert: recorded by the kernel, the context is fine
            raise ExecuteFailure("ABORTED", str(e)) from None
        except CudaError as e:
            failure = failure_of(e, name, str(self.device), self._context_broken)
            fatal = failure.fatal
            raise failure from None
        finally:
            if not fatal:
                for pointer, _ in allocated:
                    try:
                        driver.free(self.device, pointer)
                    except CudaError:
                        pass

    def _launcher(self, job: dict[str, Any]) -> Any:
        import hashlib

        from despina.compiler.ir.types import parse_type
        from despina.runtime.launcher import Launcher

        image: bytes = job["image"]
        key = (hashlib.sha256(image).hexdigest(), job["name"])
        launcher = self.launchers.get(key)
        if launcher is not None:
            self.launchers.move_to_end(key)
            return launcher
        function = self.device.load(image, job["name"], job["shared"], job["num_warps"])
        names = [n for n, _ in job["params"]]
        types = [parse_type(t) for _, t in job["params"]]
        launcher = self.launchers[key] = Launcher(function, names, types, metadata=job.get("launch") or {})
        while len(self.launchers) > MAX_MODULES:
            (digest, _), _ = self.launchers.popitem(last=False)
            self._unload(digest)
        return launcher

    def _unload(self, digest: str) -> None:
        from despina.runtime import driver

        if any(d == digest for d, _ in self.launchers):  # another kernel of the same module is still loaded
            return
        module = self.device.modules.pop((self.device.context, digest), None)
        if module is not None:
            try:
                driver.unload(module)
            except Exception:
                pass

    def _context_broken(self) -> bool:
        """Whether the context is unusable: a sticky error makes every later call fail with it."""
        from despina.runtime import driver

        try:
            driver.synchronize()
            return False
        except Exception:
            return True


def failure_of(e: Any, kernel: str, device: str, context_broken: Any = lambda: False) -> ExecuteFailure:
    """The ExecuteFailure of a CudaError `e` raised running `kernel`: fatal (a fault; ABORTED) when the
    error is one of the sticky faults or the context no longer works, else FAILED_PRECONDITION (the
    launch or the image refused on this GPU) or RESOURCE_EXHAUSTED (out of GPU memory)."""
    from despina.runtime.errors import FAULTS, OUT_OF_MEMORY, LaunchError, error_name

    code = int(getattr(e, "code", 0) or 0)
    name = error_name(code) if code else type(e).__name__
    if code in FAULTS or context_broken():
        what = FAULTS.get(code, "a sticky CUDA error, which leaves the context unusable")
        return ExecuteFailure(
            "ABORTED",
            f"kernel '{kernel}' faulted on the daemon's GPU ({device}): {name}: {what}. Its GPU worker was stopped "
            "(its CUDA context is unusable) and a new one takes the next request; no buffer was copied back. To find "
            "the access, run the kernel with DESPINA_INTERPRET=1 (the interpreter checks every access) or under "
            "compute-sanitizer", fatal=True)
    if code == OUT_OF_MEMORY:
        return ExecuteFailure("RESOURCE_EXHAUSTED", f"kernel '{kernel}': the daemon's GPU ({device}) is out of memory "
                              f"({name}): {e}")
    if isinstance(e, LaunchError):
        return ExecuteFailure("FAILED_PRECONDITION", f"kernel '{kernel}' cannot launch on the daemon's GPU: {e}")
    text = str(e) if name in str(e) else f"{e} ({name})"
    return ExecuteFailure("FAILED_PRECONDITION", f"kernel '{kernel}' on the daemon's GPU ({device}): {text}")
