"""`kernel[grid](...)` on the (fake) GPU: the fast path's keys, the slow path, streams, errors."""

from __future__ import annotations

import struct
import threading
import time
from typing import Any

import numpy as np
import pytest

import despina
import despina.language as tl
from despina.runtime import HostArrayError, KernelFaultError, LaunchError, OutOfResourcesError, dispatch

from .conftest import CONTEXT, CudaArray, FakeGPU
from .test_pointers import DLPackOnly, FakeTorch

SCALE = tl.constexpr(2)


@despina.jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@despina.jit
def scale(x_ptr, n, factor=2.0, BLOCK: tl.constexpr = 128):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * factor, mask=offs < n)


@despina.jit
def maybe_bias(x_ptr, b_ptr, n, HAS_B: tl.constexpr, BLOCK: tl.constexpr = 128):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n) * SCALE
    if HAS_B:
        v += tl.load(b_ptr + offs, mask=offs < n)
    tl.store(x_ptr + offs, v, mask=offs < n)


def fresh(kernel: despina.JITFunction) -> despina.JITFunction:
    """The same kernel without compiled state (each test starts from a first call)."""
    return despina.jit(kernel.fn)


def words(*values: tuple[str, Any]) -> list[bytes]:
    """Expected parameter words: ("p", address) / ("i", int32) / ("f", float32)."""
    out = []
    for kind, v in values:
        raw = {"p": np.uint64, "i": np.int32, "f": np.float32}[kind](v).tobytes()
        out.append(raw + b"\0" * (8 - len(raw)))
    return out


def arrays() -> tuple[CudaArray, CudaArray, CudaArray]:
    return CudaArray(0x10000), CudaArray(0x20000), CudaArray(0x30000)


def test_first_call_compiles_then_calls_like_it_take_the_fast_path(gpu: FakeGPU) -> None:
    k, (x, y, out) = fresh(add), arrays()
    gpu.lib.nparams = 4
    for n in (4096, 4112, 8192):
        k[(4,)](x, y, out, n, BLOCK=1024)
    assert k._dispatcher.slow_calls == 1 and gpu.compiled == ["add"]
    assert [c.words for c in gpu.lib.calls][-1] == words(("p", 0x10000), ("p", 0x20000), ("p", 0x30000), ("i", 8192))
    last = gpu.lib.calls[-1]
    assert (last.grid, last.block, last.shared, last.stream) == ((4, 1, 1), (128, 1, 1), 0, 0)
    assert gpu.device.loads == [("add", 0, 4, CONTEXT)]


@pytest.mark.parametrize("change", ["n=1", "n=17", "misaligned", "BLOCK", "num_warps"])
def test_what_specialization_reads_makes_a_new_key(gpu: FakeGPU, change: str) -> None:
    k, (x, y, out) = fresh(add), arrays()
    k[(4,)](x, y, out, 4096, BLOCK=1024)
    args: list[Any] = [x, y, out, 4096]
    kwargs: dict[str, Any] = {"BLOCK": 1024}
    if change == "n=1":
        args[3] = 1
    elif change == "n=17":
        args[3] = 17
    elif change == "misaligned":
        args[0] = CudaArray(0x10004)
    elif change == "BLOCK":
        kwargs["BLOCK"] = 512
    else:
        kwargs["num_warps"] = 8
    k[(4,)](*args, **kwargs)
    k[(4,)](*args, **kwargs)
    assert k._dispatcher.slow_calls == 2 and len(gpu.compiled) == 2
    if change == "num_warps":
        assert gpu.lib.calls[-1].block == (256, 1, 1)


def test_keyword_arguments_in_any_order(gpu: FakeGPU) -> None:
    k, (x, y, out) = fresh(add), arrays()
    gpu.lib.nparams = 4
    k[(1,)](x, y, out, 32, BLOCK=64)
    k[(1,)](out_ptr=out, BLOCK=64, n=48, y_ptr=y, x_ptr=x)
    k[(1,)](out_ptr=out, BLOCK=64, n=48, y_ptr=y, x_ptr=x)
    expected = words(("p", 0x10000), ("p", 0x20000), ("p", 0x30000), ("i", 48))
    assert [c.words for c in gpu.lib.calls[1:]] == [expected, expected]
    assert k._dispatcher.slow_calls == 1  # Python binds the call: positional or keyword, one key


def test_defaults_are_written_on_every_launch(gpu: FakeGPU) -> None:
    k, x = fresh(scale), CudaArray(0x10000)
    gpu.lib.nparams = 3
    k[(1,)](x, 100)
    k[(1,)](x, 100, 3.0)
    k[(1,)](x, 100)
    factors = [np.frombuffer(c.words[2][:4], np.float32)[0] for c in gpu.lib.calls]
    assert factors == [2.0, 3.0, 2.0]
    assert gpu.compiled == ["scale"]  # one specialization, one launcher, three call keys at most


def test_none_for_a_pointer_is_no_parameter(gpu: FakeGPU) -> None:
    k = fresh(maybe_bias)
    gpu.lib.nparams = 2
    k[(1,)](CudaArray(0x10000), None, 16, HAS_B=False)
    k[(1,)](CudaArray(0x10000), None, 32, HAS_B=False)
    assert gpu.lib.calls[-1].words == words(("p", 0x10000), ("i", 32))
    gpu.lib.nparams = 3
    k[(1,)](CudaArray(0x10000), CudaArray(0x20000), 32, HAS_B=True)
    assert gpu.lib.calls[-1].words == words(("p", 0x10000), ("p", 0x20000), ("i", 32))


def test_a_changed_global_recompiles(gpu: FakeGPU, monkeypatch: pytest.MonkeyPatch) -> None:
    k, x = fresh(maybe_bias), CudaArray(0x10000)
    k[(1,)](x, None, 16, HAS_B=False)
    k[(1,)](x, None, 16, HAS_B=False)
    monkeypatch.setitem(globals(), "SCALE", tl.constexpr(3))
    k[(1,)](x, None, 16, HAS_B=False)
    assert k._dispatcher.slow_calls == 2 and len(gpu.compiled) == 2


def test_grid_function_gets_arguments_defaults_and_options(gpu: FakeGPU) -> None:
    k, (x, y, out) = fresh(add), arrays()
    seen: list[dict[str, Any]] = []

    def grid(meta: dict[str, Any]) -> tuple[int]:
        seen.append(meta)
        return (despina.cdiv(meta["n"], meta["BLOCK"]),)

    for _ in range(2):
        k[grid](x, y, out, 4096, BLOCK=1024, num_warps=2)
    assert [c.grid for c in gpu.lib.calls] == [(4, 1, 1)] * 2
    assert all(m["num_warps"] == 2 and m["x_ptr"] is x for m in seen)
    scale_kernel = fresh(scale)
    scale_kernel[lambda meta: (meta["BLOCK"] // 64, 2, meta["factor"] > 1)](x, 100)
    scale_kernel[lambda meta: (meta["BLOCK"] // 64, 2, meta["factor"] > 1)](x, 100)
    assert [c.grid for c in gpu.lib.calls[2:]] == [(2, 2, 1)] * 2


def test_empty_grid_launches_nothing_and_a_bad_grid_is_an_error(gpu: FakeGPU) -> None:
    k, (x, y, out) = fresh(add), arrays()
    for _ in range(2):
        k[(0,)](x, y, out, 16, BLOCK=64)
        k[(3, 0)](x, y, out, 16, BLOCK=64)
    assert gpu.lib.calls == []
    with pytest.raises(ValueError, match="non-negative"):
        k[(-1,)](x, y, out, 16, BLOCK=64)
    k[(2.0,)](x, y, out, 16, BLOCK=64)  # converted as the interpreter's path does
    assert gpu.lib.calls[-1].grid == (2, 1, 1)


class _TorchStream:
    cuda_stream = 0x5151


class _ProtocolStream:
    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, 0x6161)


@pytest.mark.parametrize("stream, handle", [(0x1234, 0x1234), (_TorchStream(), 0x5151), (_ProtocolStream(), 0x6161)])
def test_stream_option(gpu: FakeGPU, stream: Any, handle: int) -> None:
    k, (x, y, out) = fresh(add), arrays()
    for _ in range(2):
        k[(1,)](x, y, out, 16, BLOCK=64, stream=stream)
    k[(1,)](x, y, out, 16, BLOCK=64)
    assert [c.stream for c in gpu.lib.calls] == [handle, handle, 0]


def test_torch_arguments_launch_on_the_current_torch_stream(gpu: FakeGPU, monkeypatch: pytest.MonkeyPatch) -> None:
    devices: list[int] = []

    def current_stream(device: int) -> int:
        devices.append(device)
        return 0x7777

    monkeypatch.setattr(dispatch, "torch_stream_getter", lambda: current_stream)
    k = fresh(add)
    t = [FakeTorch(0x10000), FakeTorch(0x20000), FakeTorch(0x30000)]
    for _ in range(2):
        k[(1,)](*t, 16, BLOCK=64)
    k[(1,)](*t, 16, BLOCK=64, stream=0x99)
    assert [c.stream for c in gpu.lib.calls] == [0x7777, 0x7777, 0x99] and devices == [0, 0]


def test_host_array_is_a_clear_error(gpu: FakeGPU) -> None:
    k, (x, y, _) = fresh(add), arrays()
    for _ in range(2):  # the second time, on the fast path's key lookup
        with pytest.raises(HostArrayError, match="argument 'out_ptr' of kernel 'add' is a NumPy array"):
            k[(1,)](x, y, np.zeros(16, np.float32), 16, BLOCK=64)
    assert gpu.lib.calls == [] and gpu.compiled == []


def test_wrong_argument_count_names_the_parameters(gpu: FakeGPU) -> None:
    k, (x, y, _) = fresh(add), arrays()
    with pytest.raises(TypeError, match=r"kernel 'add' takes \(x_ptr, y_ptr, out_ptr, n, BLOCK\)"):
        k[(1,)](x, y, 16, BLOCK=64)
    with pytest.raises(TypeError, match="kernel 'add' takes"):
        k[(1,)](x, y, y, 16, 3, BLOCK=64)
    with pytest.raises(TypeError, match="kernel 'add' takes"):
        k[(1,)](x, y, y, 16, BLOCK=64, bogus=1)


def test_dlpack_only_arguments(gpu: FakeGPU) -> None:
    host = np.zeros(64, np.float32)  # its address stands for device memory here
    a = DLPackOnly(host, device_type=2)
    k = fresh(add)
    gpu.lib.nparams = 4
    for _ in range(2):
        k[(1,)](a, a, a, 16, BLOCK=64)
    assert gpu.lib.calls[-1].words[0] == np.uint64(host.ctypes.data).tobytes()
    assert k._dispatcher.slow_calls == 1


def test_each_context_gets_its_own_loaded_kernel(gpu: FakeGPU) -> None:
    k, (x, y, out) = fresh(add), arrays()
    k[(1,)](x, y, out, 16, BLOCK=64)
    gpu.lib.context = CONTEXT + 1
    k[(1,)](x, y, out, 16, BLOCK=64)
    k[(1,)](x, y, out, 16, BLOCK=64)
    assert [load[3] for load in gpu.device.loads] == [CONTEXT, CONTEXT + 1]
    assert gpu.compiled == ["add"]  # compiled once: the second context found it in memory
    assert len({c.handle for c in gpu.lib.calls}) == 2


def test_debug_setting_is_part_of_the_key(gpu: FakeGPU, monkeypatch: pytest.MonkeyPatch) -> None:
    k, (x, y, out) = fresh(add), arrays()
    k[(1,)](x, y, out, 16, BLOCK=64)
    monkeypatch.setenv("DESPINA_DEBUG", "1")
    k[(1,)](x, y, out, 16, BLOCK=64)
    monkeypatch.delenv("DESPINA_DEBUG")
    k[(1,)](x, y, out, 16, BLOCK=64)
    assert k._dispatcher.slow_calls == 2 and len(gpu.compiled) == 2


@pytest.mark.parametrize("code, error, text", [
    (701, OutOfResourcesError, "255 registers per thread x 128 threads"),
    (700, KernelFaultError, "CUDA fault in kernel 'add': an illegal memory access"),
    (1, LaunchError, "grid at most (2147483647, 65535, 65535)"),
])
def test_launch_errors_explain_themselves(gpu: FakeGPU, code: int, error: type, text: str) -> None:
    k, (x, y, out) = fresh(add), arrays()
    k[(1,)](x, y, out, 16, BLOCK=64)
    gpu.lib.code = code
    with pytest.raises(error) as info:
        k[(1,)](x, y, out, 16, BLOCK=64)
    assert text in str(info.value) and "kernel 'add'" in str(info.value)


def test_threads_launch_with_their_own_values(gpu: FakeGPU) -> None:
    k = fresh(add)
    gpu.lib.nparams = 4
    pairs = {0x10000: 16, 0x20000: 32, 0x30000: 48}
    k[(1,)](CudaArray(0x10000), CudaArray(0x10000), CudaArray(0x10000), 16, BLOCK=64)

    def work(address: int) -> None:
        a = CudaArray(address)
        for _ in range(300):
            k[(1,)](a, a, a, pairs[address], BLOCK=64)

    threads = [threading.Thread(target=work, args=(a,)) for a in pairs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for call in gpu.lib.calls:
        pointer, n = struct.unpack("<Q", call.words[0])[0], struct.unpack("<i", call.words[3][:4])[0]
        assert pairs[pointer] == n
    assert len(gpu.lib.calls) == 901


def test_scan_key_and_values(gpu: FakeGPU) -> None:
    k, (x, y, out) = fresh(add), arrays()
    k[(1,)](x, y, out, 16, BLOCK=64)
    key, values, stream = k._dispatcher.scan(x, y, out, 16, BLOCK=64, stream=5)
    assert values == [0x10000, 0x20000, 0x30000, 16] and stream == 5
    assert key[0] == CONTEXT and key[6:8] == (int, 64)
    assert k._dispatcher.scan(x, y, out, n=16, BLOCK=64)[0] == key


def test_dispatch_overhead(gpu: FakeGPU, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Prints the CPU cost of `kernel[grid](x)` with cuLaunchKernelEx replaced by a no-op."""

    @despina.jit
    def bump(x_ptr):
        tl.store(x_ptr, tl.load(x_ptr) + 1)

    monkeypatch.setattr(gpu.lib, "launch_ex", lambda *args: 0)
    monkeypatch.setattr(dispatch, "torch_stream_getter", lambda: (lambda device: 0))
    x = FakeTorch(0x10000)
    bump[(1,)](x)
    best = float("inf")
    for _ in range(200):
        start = time.perf_counter()
        for _ in range(100):
            bump[(1,)](x)
        best = min(best, (time.perf_counter() - start) / 100)
    assert bump._dispatcher.slow_calls == 1
    with capsys.disabled():
        print(f"\n[despina] kernel[grid](x) dispatch overhead on this CPU, launch call stubbed: {best * 1e6:.2f} us")
