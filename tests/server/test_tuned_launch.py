"""`@despina.autotune` through real daemons (fake backend, fake GPU worker, a real redis-server) from a
client on a fake GPU (runtime's FakeLib and FakeDevice): the Tune reply's winner kernel is launched as it
is, so that a second client's first launch traces nothing and sends no Compile request, on the daemon
that tuned the kernel (gRPC and HTTP) and on another daemon of the cluster (through Redis)."""

from __future__ import annotations

import importlib.util
import itertools
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from runtime.conftest import CONTEXT, CudaArray, FakeDevice, FakeLib

from despina import tuning
from despina.runtime import driver, kernels, libcuda

from .conftest import Daemon, RedisProcess, unique
from .fake_gpu import NAME

FAKE_GPU = ("--executor", "server.fake_gpu:open_executor")
N = 1 << 16

KERNELS = '''
import despina
import despina.language as tl

@despina.autotune(configs=[despina.Config({{"BLOCK": 256 * w}}, num_warps=w) for w in (1, 2, 4, 8)], key=["n"])
@despina.jit
def tuned_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # {salt}: a kernel no daemon has tuned
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)
'''

_count = itertools.count()


@pytest.fixture(scope="module")
def daemons(tmp_path_factory: pytest.TempPathFactory, shared_redis: RedisProcess) -> Iterator[tuple[Daemon, Daemon]]:
    first = Daemon(tmp_path_factory.mktemp("tuner"), shared_redis.url, workers=2, extra=FAKE_GPU)
    second = Daemon(tmp_path_factory.mktemp("other"), shared_redis.url, extra=FAKE_GPU)
    yield first, second
    first.stop()
    second.stop()


class Client:
    """One client process, as far as the kernel knows: the kernel file imported afresh, empty caches, its
    own fake GPU (the daemons' fake GPU's name, so that they measure for it)."""

    def __init__(self, path: Path, url: str, monkeypatch: pytest.MonkeyPatch, tmp: Path) -> None:
        spec = importlib.util.spec_from_file_location(f"tuned_launch_kernels_{next(_count)}", path)
        assert spec is not None and spec.loader is not None
        self.module: ModuleType = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = self.module
        spec.loader.exec_module(self.module)
        self.lib, self.device = FakeLib(), FakeDevice(name=NAME, target="sm_90a")
        monkeypatch.setattr(libcuda, "_LIB", self.lib)
        monkeypatch.setattr(driver, "current_context", lambda: CONTEXT)
        monkeypatch.setattr(driver, "context_device", lambda context: self.device)
        monkeypatch.setattr(kernels, "_MEMORY", {})
        monkeypatch.setattr(kernels, "STATS", kernels.Counter())
        monkeypatch.setenv("DESPINA_CACHE_DIR", str(tmp / f"cache-{next(_count)}"))
        monkeypatch.setenv("DESPINA_SERVER", url)
        monkeypatch.setenv("DESPINA_SERVER_REQUIRED", "1")
        monkeypatch.delenv("DESPINA_INTERPRET", raising=False)
        self.args = [CudaArray(0x100000 * (i + 1), (N,)) for i in range(3)] + [N]

    @property
    def kernel(self) -> Any:
        return self.module.tuned_add_kernel

    def launch(self) -> None:
        self.kernel[lambda m: (N // m["BLOCK"],)](*self.args)


def compiles_asked(d: Daemon) -> float:
    return d.metric("despina_requests_total", method="compile")


def test_a_second_client_launches_the_tuned_winner_untraced(daemons: tuple[Daemon, Daemon], tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = daemons
    path = tmp_path / "kernels.py"
    path.write_text(KERNELS.format(salt=unique()))
    asked = [compiles_asked(d) for d in daemons]
    one = Client(path, first.grpc, monkeypatch, tmp_path)
    one.launch()  # tunes on the daemon: every config traced here, compiled and measured there
    assert str(one.kernel.best_config) == "Config(BLOCK: 2048, num_warps: 8, num_stages: 3)"
    assert len(one.lib.calls) == 1 and one.lib.calls[0].grid == (N // 2048, 1, 1) and one.lib.calls[0].block[0] == 256

    for url in (first.grpc, second.grpc, first.http):
        two = Client(path, url, monkeypatch, tmp_path)
        two.launch()
        assert two.kernel.fn.cache == {}  # nothing traced
        assert not kernels.STATS  # no compile asked for, none found in a cache: the Tune reply's kernel
        assert two.device.loads == [("tuned_add_kernel", 0, 8, CONTEXT)]
        assert [(c.grid, c.block) for c in two.lib.calls] == [((N // 2048, 1, 1), (256, 1, 1))]
        two.launch()  # the second launch makes the fast path
        two.launch()
        assert len(two.lib.calls) == 3 and two.kernel.fn._dispatcher.slow_calls == 2 and two.kernel.fn.cache == {}
    assert [compiles_asked(d) for d in daemons] == asked  # the first client's kernel came with the tuning too

    # The adopted launch has the parameters tracing gives the winner's kernel.
    three = Client(path, first.grpc, monkeypatch, tmp_path)
    config = one.kernel.best_config
    grid = (N // 2048,)
    module, _, _, _ = tuning.specialize(three.kernel.fn, config, two.args, {}, grid)
    spec, _, _, _ = tuning.specialization(two.kernel.fn, config, two.args, {}, grid)
    launcher = two.kernel.fn._dispatcher.launchers[(spec.key, CONTEXT)]
    assert launcher.arg_names == module.kernel.arg_names
    assert launcher.layout.types == [a.type for a in module.kernel.args]


def test_another_debug_setting_is_another_tuning(daemons: tuple[Daemon, Daemon], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    first, _ = daemons
    path = tmp_path / "kernels.py"
    path.write_text(KERNELS.format(salt=unique()))
    Client(path, first.grpc, monkeypatch, tmp_path).launch()
    monkeypatch.setenv("DESPINA_DEBUG", "1")
    debug = Client(path, first.grpc, monkeypatch, tmp_path)
    debug.launch()  # a tuning of its own (its kernels carry the debug checks): every config traced
    assert len(debug.kernel.fn.cache) == 4
