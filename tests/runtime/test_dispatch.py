"""`kernel[grid](...)` on the (fake) GPU: the fast path's keys, the slow path, streams, errors."""

from __future__ import annotations

import ctypes
import struct
import threading
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import despina
import despina.language as tl
from despina.runtime import HostArrayError, KernelFaultError, LaunchError, OutOfResourcesError, dispatch, libcuda

from .conftest import CONTEXT, CudaArray, FakeGPU, FakeLib
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
    with pytest.raises(TypeError, match=r"kernel 'add' has no parameter 'bogus'; it takes \(x_ptr, y_ptr, out_ptr, n, "
                                        r"BLOCK\) and the launch options num_warps, "):
        k[(1,)](x, y, y, 16, BLOCK=64, bogus=1)
    with pytest.raises(TypeError, match=r"kernel 'add' has no parameter 'BLOCKSIZE' \(did you mean 'BLOCK'\?\)"):
        k[(1,)](x, y, y, 16, BLOCKSIZE=64)
    with pytest.raises(TypeError, match=r"kernel 'add' has no parameter 'num_warp' \(did you mean 'num_warps'\?\)"):
        k[(1,)](x, y, y, 16, BLOCK=64, num_warp=2)


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


def test_the_launch_binds_positional_keyword_and_defaulted_calls_itself(gpu: FakeGPU) -> None:
    k, x = fresh(scale), CudaArray(0x10000)
    gpu.lib.nparams = 3
    calls: list[tuple[tuple[Any, ...], dict[str, Any], float]] = [
        ((x, 100), {}, 2.0), ((x, 100, 3.0), {}, 3.0), ((x, 100), {"factor": 4.0}, 4.0),
        ((x, 100), {"BLOCK": 128, "factor": 5.0}, 5.0), ((x, 100, 6.0, 128), {}, 6.0),
        ((x,), {"n": 100}, 2.0), ((), {"x_ptr": x, "n": 100, "factor": 7.0}, 7.0),
    ]
    for args, kwargs, _ in calls:
        k[(1,)](*args, **kwargs)
    assert k._dispatcher.slow_calls == 1  # every form of the call has the one key
    factors = [float(np.frombuffer(c.words[2][:4], np.float32)[0]) for c in gpu.lib.calls]
    assert factors == [f for _, _, f in calls]
    assert {c.words[1][:4] for c in gpu.lib.calls} == {np.int32(100).tobytes()}


def test_bad_calls_after_the_first_are_still_explained(gpu: FakeGPU) -> None:
    k, (x, y, out) = fresh(add), arrays()
    k[(1,)](x, y, out, 16, BLOCK=64)
    takes = r"kernel 'add' takes \(x_ptr, y_ptr, out_ptr, n, BLOCK\)"
    unknown = r"kernel 'add' has no parameter 'bogus'; it takes \(x_ptr, y_ptr, out_ptr, n, BLOCK\)"
    for args, kwargs, text in [((x, y, out, 16), {}, takes), ((x, y, out, 16, 64), {"BLOCK": 64}, takes),
                               ((x, y, out), {"BLOCK": 64}, takes), ((x, y, out, 16), {"BLOCK": 64, "bogus": 1}, unknown),
                               ((x, y, out, 16, 64, 1), {}, takes)]:
        with pytest.raises(TypeError, match=text):
            k[(1,)](*args, **kwargs)
    assert len(gpu.lib.calls) == 1


def test_launch_options_by_keyword(gpu: FakeGPU) -> None:
    k, (x, y, out) = fresh(add), arrays()
    for _ in range(2):
        k[(1,)](x, y, out, 16, BLOCK=64, num_warps=2)
        k[(1,)](x, y, out, 16, BLOCK=64, num_warps=4)  # the default, given: its own key, the same kernel
        k[(1,)](x, y, out, 16, BLOCK=64)
    assert [c.block for c in gpu.lib.calls] == [(64, 1, 1), (128, 1, 1), (128, 1, 1)] * 2
    assert k._dispatcher.slow_calls == 3 and len(gpu.compiled) == 2


def test_a_grid_object_keeps_its_launch_and_each_grid_is_read(gpu: FakeGPU) -> None:
    k, (x, y, out) = fresh(add), arrays()
    grid = (3, 2)
    k[grid](x, y, out, 16, BLOCK=64)
    assert k[grid] is k[grid]
    sizes = [4]
    k[sizes](x, y, out, 16, BLOCK=64)
    sizes[0] = 5  # a list may change between launches: it is read at each one
    launch = k[sizes]
    launch(x, y, out, 16, BLOCK=64)
    k[7](x, y, out, 16, BLOCK=64)
    assert [c.grid for c in gpu.lib.calls] == [(3, 2, 1), (4, 1, 1), (5, 1, 1), (7, 1, 1)]
    assert k._dispatcher.slow_calls == 1


def test_despina_interpret_set_at_run_time_is_seen_by_the_next_launch(gpu: FakeGPU,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    k, (x, y, out) = fresh(add), arrays()
    grid = (1,)
    k[grid](x, y, out, 16, BLOCK=64)
    k[grid](x, y, out, 16, BLOCK=64)
    host = [np.arange(16, dtype=np.float32) for _ in range(3)]
    monkeypatch.setenv("DESPINA_INTERPRET", "1")
    k[grid](host[0], host[1], host[2], 16, BLOCK=64)  # in the interpreter: NumPy arrays are fine there
    np.testing.assert_array_equal(host[2], 2 * np.arange(16, dtype=np.float32))
    monkeypatch.setenv("DESPINA_INTERPRET", "0")
    k[grid](x, y, out, 16, BLOCK=64)
    monkeypatch.delenv("DESPINA_INTERPRET")
    k[grid](x, y, out, 16, BLOCK=64)
    assert len(gpu.lib.calls) == 4 and k._dispatcher.slow_calls == 1


def test_torch_tensors_are_read_inline(gpu: FakeGPU, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dispatch, "torch_stream_getter", lambda: (lambda device: 0x7777))
    k = fresh(add)
    t = [FakeTorch(0x10000), FakeTorch(0x20000), FakeTorch(0x30000)]
    gpu.lib.nparams = 4
    for _ in range(2):
        k[(1,)](*t, 16, BLOCK=64)
    assert k._dispatcher.namespace["_d_tensor"] is FakeTorch and k._dispatcher.slow_calls == 1
    assert gpu.lib.calls[-1].words == words(("p", 0x10000), ("p", 0x20000), ("p", 0x30000), ("i", 16))
    assert gpu.lib.calls[-1].stream == 0x7777
    k[(1,)](FakeTorch(0x10004), *t[1:], 16, BLOCK=64)  # misaligned: its own specialization
    assert k._dispatcher.slow_calls == 2 and len(gpu.compiled) == 2
    with pytest.raises(HostArrayError, match="argument 'y_ptr' of kernel 'add' is a torch tensor on cpu"):
        k[(1,)](t[0], FakeTorch(0x20000, cuda=False), t[2], 16, BLOCK=64)


def test_a_changed_global_refiles_the_key_in_every_thread(gpu: FakeGPU, monkeypatch: pytest.MonkeyPatch) -> None:
    k, x = fresh(maybe_bias), CudaArray(0x10000)
    changed, done = threading.Event(), threading.Event()

    def other_thread() -> None:
        for _ in range(2):
            k[(1,)](x, None, 16, HAS_B=False)
        done.set()
        changed.wait()
        for _ in range(2):
            k[(1,)](x, None, 16, HAS_B=False)

    k[(1,)](x, None, 16, HAS_B=False)
    worker = threading.Thread(target=other_thread)
    worker.start()
    done.wait()
    monkeypatch.setitem(globals(), "SCALE", tl.constexpr(3))
    for _ in range(2):
        k[(1,)](x, None, 16, HAS_B=False)
    changed.set()
    worker.join()
    # each thread's ready launch was the old kernel's: a slow call each for the new global (one
    # compilation), then the fast path
    assert k._dispatcher.slow_calls == 3 and len(gpu.compiled) == 2
    handles = [c.handle for c in gpu.lib.calls]
    assert len(set(handles[:3])) == 1 and len(set(handles[3:])) == 1 and handles[0] != handles[3]


@dataclass
class CtypesDriver:
    """libcuda's two launch entry points as C function pointers (ctypes callbacks), so that the
    launch goes through `libcuda.LibCuda` as on a GPU: its records are as FakeLib's."""

    lib: FakeLib
    launch: Any = None
    current: Any = None

    def __post_init__(self) -> None:
        def launch_ex(config: int, function: int, params: int, extra: Any) -> int:
            return self.lib.launch_ex(ctypes.c_void_p(config), ctypes.c_void_p(function), ctypes.c_void_p(params), extra)

        def get_current(out: int) -> int:
            ctypes.c_size_t.from_address(out).value = self.lib.context
            return 0

        pointer = ctypes.c_void_p
        self.launch = ctypes.CFUNCTYPE(ctypes.c_int, pointer, pointer, pointer, pointer)(launch_ex)
        self.current = ctypes.CFUNCTYPE(ctypes.c_int, pointer)(get_current)


def test_launch_through_libcuda_function_pointers(gpu: FakeGPU, monkeypatch: pytest.MonkeyPatch) -> None:
    """The launch's own ctypes calls: cuCtxGetCurrent made in the generated code, and cuLaunchKernelEx
    given the prebuilt (byref) arguments of `libcuda.launch_args`."""
    fake = CtypesDriver(gpu.lib)
    lib = libcuda.LibCuda(SimpleNamespace(cuLaunchKernelEx=fake.launch, cuCtxGetCurrent=fake.current))
    monkeypatch.setattr(libcuda, "_LIB", lib)
    assert lib.current_context() == CONTEXT
    k, (x, y, out) = fresh(add), arrays()
    gpu.lib.nparams = 4
    for n in (16, 32):
        k[(3,)](x, y, out, n, BLOCK=64, stream=0x77)
    assert k._dispatcher.namespace["_d_get_current"] is lib.get_current and k._dispatcher.slow_calls == 1
    (entry,) = k._dispatcher.entries.values()
    assert entry.launch_ex is lib.launch_ex
    first, second = gpu.lib.calls
    assert first.words[:3] == second.words[:3] == words(("p", 0x10000), ("p", 0x20000), ("p", 0x30000))
    assert second.words[3] == words(("i", 32))[0]
    assert (second.handle, second.grid, second.block, second.stream) == (first.handle, (3, 1, 1), (128, 1, 1), 0x77)
    gpu.lib.context = CONTEXT + 1  # another context: its own key, and the kernel loaded there
    k[(3,)](x, y, out, 16, BLOCK=64)
    assert [load[3] for load in gpu.device.loads] == [CONTEXT, CONTEXT + 1] and k._dispatcher.slow_calls == 2
    gpu.lib.code = 701
    with pytest.raises(OutOfResourcesError):
        k[(3,)](x, y, out, 16, BLOCK=64)


def test_a_stream_alone_by_keyword_keeps_the_key(gpu: FakeGPU) -> None:
    k, (x, y, out) = fresh(add), arrays()
    for stream in (None, 0x11, 0x22):
        k[(1,)](x, y, out, 16, BLOCK=64, stream=stream)
        k[(1,)](x, y, out, 16, 64, stream=stream)
    assert [c.stream for c in gpu.lib.calls] == [0, 0, 0x11, 0x11, 0x22, 0x22] and k._dispatcher.slow_calls == 1


@despina.jit
def no_parameters():
    tl.program_id(0)


def test_a_kernel_without_parameters(gpu: FakeGPU) -> None:
    k = fresh(no_parameters)
    for _ in range(2):
        k[(2,)]()
    k[(2,)](num_warps=2)
    with pytest.raises(TypeError, match=r"kernel 'no_parameters' takes \(\)"):
        k[(2,)](1)
    assert [c.block for c in gpu.lib.calls] == [(128, 1, 1)] * 2 + [(64, 1, 1)] and k._dispatcher.slow_calls == 3
