"""Execute on CPU-only machines: UNIMPLEMENTED without a GPU (naming why), request checks, and the GPU
worker's protocol (time-out, crash, fault: the worker is replaced and the daemon goes on) with the
worker's executor replaced by fakes (fake_gpu.py); `kernel.run_remote` end to end on a fake GPU."""

from __future__ import annotations

import asyncio
import base64
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import numpy as np
import pytest

import despina
import despina.language as tl
from despina import remote
from despina.compiler.options import CompileOptions
from despina.proto import service_pb2 as pb
from despina.server import execute
from despina.server.core import CompileRequest, CompileService, ExecuteRequest
from despina.server.errors import (
    Aborted,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    ResourceExhausted,
    Unimplemented,
)
from despina.server.execute import Buffer

from .conftest import Daemon, free_port, unique, with_service
from .kernels import vector_add_ir
from .test_grpc import compile_ok, status_of, stub

FAKE_GPU = "server.fake_gpu:open_executor"
N = 64


def host_has_gpu() -> bool:
    return execute.host_unavailable_reason() is None


def add_args(n: int = N, size: int = N) -> tuple[Any, ...]:
    x, y, out = np.arange(size, dtype=np.float32), np.full(size, 0.5, np.float32), np.zeros(size, np.float32)
    return tuple(Buffer(a.tobytes(), "fp32", (size,)) for a in (x, y, out)) + (n,)


def request(name: str = "add_kernel", args: tuple[Any, ...] | None = None, grid: tuple[int, ...] = (1,),
            **kernel: Any) -> ExecuteRequest:
    ir = vector_add_ir(name=name, salt=kernel.pop("salt", unique()))
    return ExecuteRequest(CompileRequest(ir, target=kernel.pop("target", ""), **kernel), grid,
                          add_args() if args is None else args)


# ---- no GPU: UNIMPLEMENTED, naming why ------------------------------------------------------------


@pytest.mark.skipif(host_has_gpu(), reason="this host has an NVIDIA GPU")
def test_core_without_gpu_is_unimplemented_and_names_why() -> None:
    async def body(service: CompileService) -> None:
        for _ in range(2):
            with pytest.raises(Unimplemented, match="no NVIDIA GPU|cuda-bindings"):
                await service.execute(request())
        assert service.gpu.pid is None  # decided without starting a GPU worker
        assert (await service.compile(CompileRequest(vector_add_ir(salt=unique())))).tier == "compiled"

    with_service(body)


def test_executor_without_device_is_unimplemented_once_for_all() -> None:
    async def body(service: CompileService) -> None:
        for _ in range(2):
            with pytest.raises(Unimplemented, match="cannot run kernels: no CUDA device.*NO_DEVICE"):
                await service.execute(request())
        assert service.metrics.value("despina_gpu_workers_started_total") == 0
        assert service.gpu.unavailable is not None

    with_service(body, executor="server.fake_gpu:no_device")


def test_executor_failing_to_open_is_retried() -> None:
    async def body(service: CompileService) -> None:
        for _ in range(2):
            with pytest.raises(Internal, match="could not open the GPU .*busy.*tries again"):
                await service.execute(request())
        assert service.gpu.unavailable is None

    with_service(body, executor="server.fake_gpu:broken")


@pytest.mark.skipif(host_has_gpu(), reason="this host has an NVIDIA GPU")
def test_daemon_without_gpu_answers_unimplemented_over_grpc_and_http(daemon: Daemon) -> None:
    ir = vector_add_ir(salt=unique())
    data = np.zeros(N, np.float32).tobytes()
    grpc_req = pb.ExecuteRequest(kernel=pb.CompileRequest(ir=ir), grid=[1], args=[
        *(pb.Argument(buffer=pb.Buffer(data=data, dtype="fp32", shape=[N])) for _ in range(3)), pb.Argument(int_value=N)])
    code, details = status_of(lambda: stub(daemon).Execute(grpc_req, timeout=30))
    assert code == grpc.StatusCode.UNIMPLEMENTED and "no NVIDIA GPU" in details
    buffer = {"buffer": {"data": base64.b64encode(data).decode(), "dtype": "fp32", "shape": [N]}}
    body = {"kernel": {"ir": base64.b64encode(ir).decode()}, "grid": [1], "args": [buffer] * 3 + [{"int_value": N}]}
    r = httpx.post(daemon.http + "/v1/execute", json=body, timeout=30)
    assert r.status_code == 501, r.text
    assert r.json()["error"]["code"] == "UNIMPLEMENTED" and "no NVIDIA GPU" in r.json()["error"]["message"]
    assert compile_ok(daemon).tier == pb.COMPILED  # still serving
    assert httpx.get(daemon.http + "/healthz").status_code == 200


# ---- request checks ------------------------------------------------------------------------------


def test_request_checks_each_a_clear_error() -> None:
    """Bad requests are refused before the GPU is asked for (here: a host without one)."""
    f32 = Buffer(b"\0" * 4 * N, "fp32", (N,))
    x, y, out, n = add_args()

    async def body(service: CompileService) -> None:
        cases: list[tuple[ExecuteRequest, type[Exception], str]] = [
            (request(grid=()), InvalidArgument, "grid must be 1 to 3"),
            (request(grid=(1, 0)), InvalidArgument, "grid must be 1 to 3 positive"),
            (request(grid=(1, 1, 1, 1)), InvalidArgument, "grid must be 1 to 3"),
            (request(grid=(1, 70_000)), InvalidArgument, "axis 1 is 70000 programs; CUDA allows at most 65535"),
            (request(grid=(1 << 31,)), InvalidArgument, "axis 0"),
            (request(args=(x, y, out)), InvalidArgument,
             r"kernel 'add_kernel' takes 4 arguments \(x: ptr<fp32>, y: ptr<fp32>, out: ptr<fp32>, n: int32\); the request has 3"),
            (request(args=(x, y, out, n, n)), InvalidArgument, "takes 4 arguments"),
            (request(args=(x, y, 7, n)), InvalidArgument, r"argument 2 \(out: ptr<fp32>\).* is a pointer: pass a buffer of fp32, not an integer"),
            (request(args=(x, y, out, f32)), InvalidArgument, r"argument 3 \(n: int32\).* is a scalar: pass an int_value"),
            (request(args=(x, y, out, 2.5)), InvalidArgument, "is an integer: pass an int_value, not a float"),
            (request(args=(x, y, out, 1 << 31)), InvalidArgument, r"2147483648 is out of int32's range"),
            (request(args=(x, y, out, None)), InvalidArgument, "argument 3 .* has no value"),
            (request(args=(x, Buffer(y.data, "fp16", (2 * N,)), out, n)), InvalidArgument,
             "the buffer holds fp16 elements, the kernel reads fp32"),
            (request(args=(x, Buffer(y.data, "float32", (N,)), out, n)), InvalidArgument, "dtype 'float32' is not one of"),
            (request(args=(x, Buffer(y.data, "fp32", (N + 1,)), out, n)), InvalidArgument,
             f"the buffer has {4 * N} bytes; \\[{N + 1}\\] fp32 elements are {4 * N + 4} bytes"),
            (request(args=(x, Buffer(y.data, "fp32", (-N,)), out, n)), InvalidArgument, "non-negative"),
            (request(options=CompileOptions(num_warps=3)), InvalidArgument, "num_warps=3 is not one of"),
            (request(target="x86"), InvalidArgument, "target"),
            (ExecuteRequest(CompileRequest(vector_add_ir()[:-9]), (1,), add_args()), InvalidArgument, "invalid IR"),
            (ExecuteRequest(CompileRequest(b""), (1,), ()), InvalidArgument, "no IR"),
            (request(args=add_args(size=64 << 10)), ResourceExhausted, "buffers and IR hold .* at most"),
        ]
        for req, error, text in cases:
            with pytest.raises(error, match=text):
                await service.execute(req)
        with pytest.raises(Unimplemented):  # a sound request gets as far as the (missing) GPU
            await service.execute(request())
        assert service.metrics.value("despina_errors_total", code="INVALID_ARGUMENT") == len(cases) - 1

    with_service(body, executor="server.fake_gpu:no_device", max_request_bytes=512 << 10)


def test_scalar_ranges() -> None:
    sig = execute.Signature("k", tuple(execute.Param(t, t, t, False) for t in ("int1", "uint8", "uint64", "fp16", "fp32")))
    assert execute.launch_values(sig, (1, 255, -1, 1, 3)) == [1, 255, (1 << 64) - 1, 1.0, 3.0]
    for args, text in [((2, 0, 0, 0.0, 0.0), "int1"), ((0, 256, 0, 0.0, 0.0), "uint8"), ((0, -1, 0, 0.0, 0.0), "uint8"),
                       ((0, 0, 1 << 64, 0.0, 0.0), "uint64"), ((0, 0, 0, 1e5, 0.0), "fp16"), ((0, 0, 0, 0.0, 1e39), "fp32")]:
        with pytest.raises(InvalidArgument, match=f"out of {text}'s range"):
            execute.launch_values(sig, args)
    assert execute.launch_values(sig, (0, 0, 0, float("inf"), float("nan")))[3] == float("inf")


# ---- the GPU worker: results, time-out, crash, fault -----------------------------------------------


def test_worker_runs_and_is_replaced_after_timeout_crash_and_fault() -> None:
    async def body(service: CompileService) -> None:
        first = await service.execute(request())
        out = np.frombuffer(first.buffers[2].data, np.float32)
        np.testing.assert_array_equal(out, np.arange(N, dtype=np.float32) + 0.5)
        assert [b.dtype for b in first.buffers] == ["fp32"] * 3 and first.buffers[0].shape == (N,)
        assert first.tier == "compiled" and service.memory.get(first.key).metadata["target"] == "sm_90a"
        pid = service.gpu.pid
        again = await service.execute(request(salt="same"))
        assert (await service.execute(request(salt="same"))).tier == "memory" and again.tier == "compiled"
        assert service.gpu.pid == pid  # one worker serves request after request

        with pytest.raises(FailedPrecondition, match="cannot launch on the daemon's GPU"):
            await service.execute(request("refuse_kernel"))
        assert service.gpu.pid == pid  # a refused launch leaves the worker (and its context) alone

        failures: list[tuple[str, type[Exception], str]] = [
            ("spin_kernel", DeadlineExceeded, r"kernel 'spin_kernel' did not finish within 1s .*--execute-timeout-s"),
            ("crash_kernel", Aborted, r"GPU worker died running kernel 'crash_kernel' \(exited with status 3\)"),
            ("fault_kernel", Aborted, "kernel 'fault_kernel' faulted .*CUDA_ERROR_ILLEGAL_ADDRESS"),
        ]
        for name, error, text in failures:
            old = service.gpu.pid
            with pytest.raises(error, match=text):
                await service.execute(request(name))
            assert service.gpu.pid is None and not _alive(old)  # that worker is gone...
            ok = await service.execute(request())  # ... and the next request gets a new one
            assert np.frombuffer(ok.buffers[2].data, np.float32)[1] == 1.5
            assert service.gpu.pid not in (None, old)
        m = service.metrics
        assert m.value("despina_gpu_workers_started_total") == 4
        assert [m.value("despina_executes_total", outcome=o) for o in ("timeout", "crash", "fault", "error")] == [1] * 4
        assert m.value("despina_errors_total", code="ABORTED") == 2
        # compile workers are not involved
        assert m.value("despina_workers_replaced_total") == 0

    with_service(body, executor=FAKE_GPU, execute_timeout_s=1.0)


def test_worker_killed_between_requests_is_replaced() -> None:
    async def body(service: CompileService) -> None:
        await service.execute(request())
        pid = service.gpu.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(0.2)
        assert (await service.execute(request())).buffers
        assert service.gpu.pid not in (None, pid)

    with_service(body, executor=FAKE_GPU)


def test_cancelled_request_takes_its_worker_along() -> None:
    """A client that goes away mid-kernel: the worker may still be running it, so it is killed (its
    late reply must not answer the next request)."""

    async def body(service: CompileService) -> None:
        await service.execute(request())
        pid = service.gpu.pid
        task = asyncio.ensure_future(service.execute(request("spin_kernel")))
        while service.gpu.running != "spin_kernel":
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        ok = await service.execute(request())
        assert np.frombuffer(ok.buffers[2].data, np.float32)[3] == 3.5
        assert service.gpu.pid not in (None, pid)

    with_service(body, executor=FAKE_GPU, execute_timeout_s=60)


def test_requests_queue_for_the_one_worker() -> None:
    async def body(service: CompileService) -> None:
        results = await asyncio.gather(*(service.execute(request()) for _ in range(6)))
        assert all(np.frombuffer(r.buffers[2].data, np.float32)[2] == 2.5 for r in results)
        assert service.metrics.value("despina_gpu_workers_started_total") == 1

    with_service(body, executor=FAKE_GPU)


def test_cuda_errors_are_classified() -> None:
    """The real executor's mapping of CUDA errors: sticky faults are fatal (the worker exits)."""
    from despina.runtime.errors import CudaError, LaunchError
    from despina.server.gpu import failure_of

    fault = failure_of(CudaError("cuCtxSynchronize failed", 700), "k", "device 0")
    assert fault.fatal and fault.code == "ABORTED" and "kernel 'k' faulted" in fault.message
    assert "illegal memory access" in fault.message and ("ILLEGAL_ADDRESS" in fault.message or "700" in fault.message)
    sticky = failure_of(CudaError("cuMemcpyDtoH failed", 999), "k", "device 0", context_broken=lambda: True)
    assert sticky.fatal and "sticky" in sticky.message
    oom = failure_of(CudaError("cuMemAlloc failed", 2), "k", "device 0")
    assert not oom.fatal and oom.code == "RESOURCE_EXHAUSTED"
    refused = failure_of(LaunchError("too many threads", 1), "k", "device 0")
    assert not refused.fatal and refused.code == "FAILED_PRECONDITION" and "cannot launch" in refused.message


# ---- over the transports, and kernel.run_remote ----------------------------------------------------


@pytest.fixture(scope="module")
def fake_gpu_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("fake-gpu"), extra=("--executor", FAKE_GPU, "--execute-timeout-s", "2",
                                                           "--max-request-bytes", str(4 << 20)))
    yield d
    d.stop()


@pytest.fixture
def fresh_client(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("DESPINA_SERVER", "DESPINA_TOKEN", "DESPINA_SERVER_REQUIRED"):
        monkeypatch.delenv(name, raising=False)
    yield
    despina.set_server(None)


@despina.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@despina.jit
def spin_kernel(x_ptr, n):
    tl.store(x_ptr, n)


@despina.jit
def crash_kernel(x_ptr, n):
    tl.store(x_ptr, n)


@despina.jit
def scale_kernel(x_ptr, out_ptr, scale, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * scale, mask=offs < n)


@pytest.mark.parametrize("scheme", ["grpc", "http"])
def test_run_remote_writes_back_in_place(fake_gpu_daemon: Daemon, fresh_client: None, scheme: str) -> None:
    despina.set_server(fake_gpu_daemon.grpc if scheme == "grpc" else fake_gpu_daemon.http)
    x = np.arange(100, dtype=np.float32)
    y = np.full(100, 2.0, np.float32)
    out = np.zeros(100, np.float32)
    x_before = x.copy()
    add_kernel.run_remote[lambda meta: (despina.cdiv(meta["n"], meta["BLOCK"]),)](x, y, out, 90, BLOCK=32, num_warps=2)
    np.testing.assert_array_equal(out[:90], x[:90] + 2)
    assert (out[90:] == 0).all() and (x == x_before).all()
    # read-only inputs are fine while the kernel leaves them alone; an empty grid sends nothing
    x.flags.writeable = False
    add_kernel.run_remote[(4,)](x, y, out, 100, BLOCK=32)
    np.testing.assert_array_equal(out, x + 2)
    add_kernel.run_remote[(0,)](x, y, np.zeros(1, np.float32), 100, BLOCK=32)


def test_run_remote_strided_array_travels_as_its_span(fake_gpu_daemon: Daemon, fresh_client: None) -> None:
    despina.set_server(fake_gpu_daemon.grpc)
    big = np.zeros(40, np.float32)
    x, y = np.ones(40, np.float32), np.ones(40, np.float32)
    add_kernel.run_remote[(1,)](x, y, big[::2], 10, BLOCK=16)  # the fake writes the first n elements of the span
    np.testing.assert_array_equal(big[:10], 2.0)
    assert (big[10:] == 0).all()


def test_run_remote_errors(fake_gpu_daemon: Daemon, fresh_client: None) -> None:
    x, out = np.ones(16, np.float32), np.zeros(16, np.float32)
    with pytest.raises(RuntimeError, match="run_remote needs a daemon.*DESPINA_SERVER.*set_server"):
        scale_kernel.run_remote[(1,)](x, out, 2.0, 16, BLOCK=16)
    despina.set_server(fake_gpu_daemon.grpc)
    with pytest.raises(TypeError, match="argument 'x_ptr' of kernel 'scale_kernel' is a builtins.list: run_remote takes NumPy"):
        scale_kernel.run_remote[(1,)]([1.0] * 16, out, 2.0, 16, BLOCK=16)
    with pytest.raises(TypeError, match="unsupported dtype complex64"):
        scale_kernel.run_remote[(1,)](x.astype(np.complex64), out, 2.0, 16, BLOCK=16)
    with pytest.raises(ValueError, match="wrote to argument 'out_ptr', which shares memory with argument 'x_ptr'"):
        add_kernel.run_remote[(1,)](x, x, x[4:], 12, BLOCK=16)
    assert (x == 1).all()  # nothing was written back
    add_kernel.run_remote[(1,)](x, x, out, 16, BLOCK=16)  # the same array twice, only read: fine
    assert (out == 2).all()
    with pytest.raises(TypeError, match="takes no stream="):
        scale_kernel.run_remote[(1,)](x, out, 2.0, 16, BLOCK=16, stream=1)
    with pytest.raises(TypeError, match="kernel 'scale_kernel' takes"):
        scale_kernel.run_remote[(1,)](x, out, BLOCK=16)
    with pytest.raises(remote.RemoteError, match="DEADLINE_EXCEEDED: kernel 'spin_kernel' did not finish within 2s"):
        spin_kernel.run_remote[(1,)](out, 1)
    with pytest.raises(remote.RemoteError, match=r"ABORTED: the GPU worker died running kernel 'crash_kernel' \(exited"):
        crash_kernel.run_remote[(1,)](out, 1)
    with pytest.raises(remote.RemoteError, match="RESOURCE_EXHAUSTED"):
        scale_kernel.run_remote[(1,)](np.zeros(2 << 20, np.float32), out, 2.0, 16, BLOCK=16)
    scale_kernel.run_remote[(1,)](x, out, 2.0, 16, BLOCK=16)  # still serving, on a new worker
    assert fake_gpu_daemon.metric("despina_gpu_workers_started_total") >= 3
    despina.set_server(f"grpc://127.0.0.1:{free_port()}")
    with pytest.raises(remote.ServerUnavailable):
        scale_kernel.run_remote[(1,)](x, out, 2.0, 16, BLOCK=16)


def test_transport_parse_errors(fake_gpu_daemon: Daemon) -> None:
    raw = grpc.insecure_channel(fake_gpu_daemon.grpc.split("://")[1]).unary_unary("/despina.service.v1.Compiler/Execute")
    good = pb.ExecuteRequest(kernel=pb.CompileRequest(ir=vector_add_ir()), grid=[1]).SerializeToString()
    code, details = status_of(lambda: raw(good[:-7], timeout=30))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "ExecuteRequest" in details
    code, details = status_of(lambda: stub(fake_gpu_daemon).Execute(
        pb.ExecuteRequest(kernel=pb.CompileRequest(ir=vector_add_ir()), grid=[1], args=[pb.Argument()] * 4), timeout=30))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "argument 0 (x: ptr<fp32>) of kernel 'add_kernel' has no value" in details
    with httpx.Client(base_url=fake_gpu_daemon.http, timeout=30) as http:
        kernel = {"ir": base64.b64encode(vector_add_ir()).decode()}
        buffer = {"data": base64.b64encode(b"\0" * 4 * N).decode(), "dtype": "fp32", "shape": [N]}
        cases = [
            ({"kernel": {"ir": "%%%"}, "grid": [1]}, "'kernel.ir' is not base64"),
            ({"kernel": kernel, "grid": [1], "args": [{"buffer": dict(buffer, data="%%")}]}, "argument 0's buffer data is not base64"),
            ({"kernel": kernel, "grid": [1], "args": [{"int_value": 1, "float_value": 1.0}]}, "more than one of"),
            ({"kernel": kernel, "grid": [1], "args": [{"buffer": buffer}] * 3}, "takes 4 arguments"),
        ]
        for body, text in cases:
            r = http.post("/v1/execute", json=body)
            assert r.status_code == 400 and text in r.json()["error"]["message"], r.text
        assert http.post("/v1/execute", json={"grid": [1]}).status_code == 422
        ok = {"kernel": kernel, "grid": [1], "args": [{"buffer": buffer}] * 3 + [{"int_value": N}]}
        r = http.post("/v1/execute", json=ok)
        assert r.status_code == 200, r.text
        assert [b["dtype"] for b in r.json()["buffers"]] == ["fp32"] * 3
        assert "/v1/execute" in http.get("/openapi.json").json()["paths"]


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie until its parent joins it; /proc says
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_gpu_executor_moves_buffers_with_host_memory_for_a_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """server/gpu.py's executor with the driver's memory calls on host memory and a launcher that adds
    in NumPy: every buffer goes in and comes back, and is freed, unless a fault made the context unusable."""
    import ctypes

    from despina.runtime import driver, launcher
    from despina.runtime.errors import KernelFaultError, LaunchError
    from despina.server import gpu

    memory: dict[int, Any] = {}
    freed: list[int] = []
    fail: dict[str, Exception] = {}

    def alloc(dev: Any, nbytes: int) -> int:
        block = ctypes.create_string_buffer(max(nbytes, 1))
        memory[ctypes.addressof(block)] = block
        return ctypes.addressof(block)

    def synchronize() -> None:
        if "sync" in fail:
            raise fail["sync"]

    monkeypatch.setattr(driver, "alloc", alloc)
    monkeypatch.setattr(driver, "free", lambda dev, pointer: freed.append(pointer))
    monkeypatch.setattr(driver, "copy_to_device", lambda dev, dst, src, n: ctypes.memmove(dst, src, n))
    monkeypatch.setattr(driver, "copy_to_host", lambda dev, dst, src, n: ctypes.memmove(dst, src, n))
    monkeypatch.setattr(driver, "synchronize", synchronize)
    monkeypatch.setattr(driver, "version", lambda: 12080)

    class Launcher:
        def __init__(self, function: Any, names: list[str], types: list[Any], metadata: Any = None) -> None:
            assert [str(t) for t in types] == ["ptr<fp32>", "ptr<fp32>", "ptr<fp32>", "int32"]
            self.names = names

        def launch(self, grid: tuple[int, int, int], values: dict[str, Any], stream: int) -> None:
            if "launch" in fail:
                raise fail["launch"]
            n = values["n"]
            x, y, out = (np.ctypeslib.as_array((ctypes.c_float * n).from_address(values[k])) for k in ("x", "y", "out"))
            out[:] = x + y

    monkeypatch.setattr(launcher, "Launcher", Launcher)

    class Device:
        target, context, modules, name = "sm_90a", 1, {}, "host memory"

        def load(self, image: bytes, name: str, shared: int, num_warps: int) -> Any:
            return (name, shared, num_warps)

        def __str__(self) -> str:
            return "device 0 (host memory)"

    executor = gpu.GpuExecutor(Device())
    assert executor.info == {"target": "sm_90a", "driver_version": 12080, "device": "device 0 (host memory)",
                             "name": "host memory"}
    x, y = np.arange(N, dtype=np.float32), np.ones(N, np.float32)
    args = [x.tobytes(), y.tobytes(), np.zeros(N, np.float32).tobytes(), N]
    work = {"name": "add_kernel", "image": b"cubin", "num_warps": 4, "shared": 0, "launch": {}, "grid": (1, 1, 1),
            "params": [("x", "ptr<fp32>"), ("y", "ptr<fp32>"), ("out", "ptr<fp32>"), ("n", "int32")], "args": args}
    result = executor.run(work)
    assert result["buffers"][:2] == args[:2]
    np.testing.assert_array_equal(np.frombuffer(result["buffers"][2], np.float32), x + 1)
    assert sorted(freed) == sorted(memory) and len(freed) == 3

    fail["launch"] = LaunchError("the driver rejected the launch configuration", 1)
    with pytest.raises(execute.ExecuteFailure, match="cannot launch") as refused:
        executor.run(work)
    assert not refused.value.fatal and len(freed) == 6  # freed: the context is fine
    del fail["launch"]
    fail["sync"] = KernelFaultError("CUDA fault", 700)
    with pytest.raises(execute.ExecuteFailure, match="kernel 'add_kernel' faulted") as fault:
        executor.run(work)
    assert fault.value.fatal and fault.value.code == "ABORTED" and len(freed) == 6  # not freed: the worker exits


TENSOR_MAPS = [{"dtype": "fp32", "base": {"arg": 2}, "shape": [{"arg": 3}], "strides": [], "box": [32], "swizzle": 0,
                "fill": "zero"}]


def test_the_gpu_job_carries_what_the_launcher_reads() -> None:
    sig = execute.signature(vector_add_ir())
    metadata = {"name": "add_kernel", "shared": 0, "num_warps": 4, "tensor_maps": TENSOR_MAPS, "prints": False,
                "asserts": [{"file": "k.py", "line": 3, "message": "x", "shape": []}], "ptx_version": "8.7"}
    work = execute.job(sig, "key", b"cubin", metadata, 4, (1, 1, 1), [b"", b"", b"", 0])
    assert work["launch"] == {"tensor_maps": TENSOR_MAPS, "asserts": metadata["asserts"]}
    assert execute.job(sig, "key", b"cubin", {"name": "add_kernel"}, 4, (1, 1, 1), [b"", b"", b"", 0])["launch"] == {}


def test_gpu_executor_launches_with_the_kernels_tensor_maps(monkeypatch: pytest.MonkeyPatch) -> None:
    """server/gpu.py's executor with the runtime's own Launcher, the driver's memory calls on host memory
    and libcuda stubbed: each run's tensor map is made from its buffer's address and passed after the
    kernel's parameters."""
    import ctypes

    from despina.runtime import driver, libcuda
    from despina.server import gpu

    memory: list[Any] = []

    def alloc(dev: Any, nbytes: int) -> int:
        block = ctypes.create_string_buffer(nbytes + 16)
        memory.append(block)
        return ctypes.addressof(block) + -ctypes.addressof(block) % 16

    class Lib:
        def __init__(self) -> None:
            self.encoded: list[tuple[Any, ...]] = []
            self.maps: list[bytes] = []

        def launch_ex(self, config: Any, function: Any, params: Any, extra: Any) -> int:
            self.maps.append(ctypes.string_at((ctypes.c_void_p * 5).from_address(params.value)[4] or 0, 128))
            return 0

        def encode_tiled(self, *args: Any) -> tuple[int, bytes]:
            self.encoded.append(args)
            return 0, len(self.encoded).to_bytes(8, "little") * 16

    lib = Lib()
    monkeypatch.setattr(libcuda, "_LIB", lib)
    monkeypatch.setattr(driver, "alloc", alloc)
    monkeypatch.setattr(driver, "free", lambda dev, pointer: None)
    monkeypatch.setattr(driver, "copy_to_device", lambda dev, dst, src, n: ctypes.memmove(dst, src, n))
    monkeypatch.setattr(driver, "copy_to_host", lambda dev, dst, src, n: ctypes.memmove(dst, src, n))
    monkeypatch.setattr(driver, "synchronize", lambda: None)
    monkeypatch.setattr(driver, "version", lambda: 12080)

    class Device:
        target, context, modules, name = "sm_90a", 1, {}, "host memory"

        def load(self, image: bytes, name: str, shared: int, num_warps: int) -> Any:
            return driver.Function(0x20, name, shared, num_warps, self)

    sig = execute.signature(vector_add_ir())
    buffers = [np.zeros(64, np.float32).tobytes()] * 3
    work = execute.job(sig, "key", b"cubin", {"name": "add_kernel", "tensor_maps": TENSOR_MAPS}, 4, (1, 1, 1),
                       [*buffers, 64])
    executor = gpu.GpuExecutor(Device())
    executor.run(work)
    executor.run(work)
    outs = [ctypes.addressof(memory[2]), ctypes.addressof(memory[5])]
    assert [args[1] - out for args, out in zip(lib.encoded, outs)] == [-out % 16 for out in outs]
    assert [args[:1] + args[2:] for args in lib.encoded] == [(7, [64], [], [32], 0, 0)] * 2
    assert lib.maps == [(1).to_bytes(8, "little") * 16, (2).to_bytes(8, "little") * 16]
