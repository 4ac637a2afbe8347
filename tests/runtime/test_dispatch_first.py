"""A kernel's first launches on the (fake) GPU: the fast path's generated code is made by the first
`kernel[grid]` or the second `run` (a kernel launched once through `run`, as a tuning's winner, never
pays for it), and a kernel compiled elsewhere (`Dispatcher.adopt`) launches untraced."""

from __future__ import annotations

from despina import tuning

from .conftest import CONTEXT, CudaArray, FakeGPU
from .test_dispatch import add, arrays, fresh, words


def test_run_makes_the_fast_path_at_its_second_launch(gpu: FakeGPU) -> None:
    k, (x, y, out) = fresh(add), arrays()
    gpu.lib.nparams = 4
    k.run(x, y, out, 4096, grid=(4,), BLOCK=1024)
    d = k._dispatcher
    assert d.scan is None and d.entries == {} and gpu.compiled == ["add"] and len(gpu.lib.calls) == 1
    k.run(x, y, out, 4096, grid=(4,), BLOCK=1024)  # made now: this call is filed
    k.run(x, y, out, 8192, grid=(4,), BLOCK=1024)
    assert d.scan is not None and d.slow_calls == 2 and gpu.compiled == ["add"] and len(gpu.lib.calls) == 3
    assert gpu.lib.calls[-1].words == words(("p", 0x10000), ("p", 0x20000), ("p", 0x30000), ("i", 8192))
    assert k._bind == d.bind  # kernel[grid] launches through the generated code too
    k[(4,)](x, y, out, 8192, BLOCK=1024)
    assert d.slow_calls == 2 and len(gpu.lib.calls) == 4


def test_kernel_grid_makes_the_fast_path_at_once(gpu: FakeGPU) -> None:
    k, (x, y, out) = fresh(add), arrays()
    k[(4,)](x, y, out, 4096, BLOCK=1024)
    k[(4,)](x, y, out, 4096, BLOCK=1024)
    assert k._dispatcher.scan is not None and k._dispatcher.slow_calls == 1 and len(gpu.lib.calls) == 2


def test_an_adopted_kernel_launches_untraced_with_the_traced_parameters(gpu: FakeGPU) -> None:
    k, (x, y, out) = fresh(add), arrays()
    gpu.lib.nparams = 4
    config = SimpleConfig()
    spec, _, _, _ = tuning.specialization(k, config, (x, y, out, 4096), {}, (4,))
    d = k._dispatcher or k._gpu_dispatcher()
    d.adopt(spec, "add", b"\x7fELF adopted", {"shared": 0, "num_warps": 8}, CONTEXT, gpu.device)
    k.run(x, y, out, 4096, grid=(4,), **config.all_kwargs())
    assert k.cache == {} and gpu.compiled == [] and gpu.device.loads == [("add", 0, 8, CONTEXT)]
    assert gpu.lib.calls[-1].words == words(("p", 0x10000), ("p", 0x20000), ("p", 0x30000), ("i", 4096))
    module, _, _, _ = tuning.specialize(fresh(add), config, (x, y, out, 4096), {}, (4,))
    launcher = d.launchers[(spec.key, CONTEXT)]
    assert launcher.arg_names == module.kernel.arg_names and launcher.layout.types == [a.type for a in module.kernel.args]
    k.run(x, y, CudaArray(0x30008), 4096, grid=(4,), **config.all_kwargs())  # misaligned: another specialization
    assert len(k.cache) == 1 and gpu.compiled == ["add"]


class SimpleConfig:
    """A Config of BLOCK=1024 and 8 warps."""

    kwargs = {"BLOCK": 1024}

    def all_kwargs(self) -> dict[str, int]:
        return {"BLOCK": 1024, "num_warps": 8, "num_stages": 3}
