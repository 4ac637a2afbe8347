"""Autotuning on the daemon (server/tuning.py) on CPU-only machines: the fake backend compiles, the fake
GPU (fake_gpu.py) measures 1/num_warps ms in a real GPU worker process, Redis is a real redis-server."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import pytest

from despina.compiler.options import CompileOptions
from despina.runtime.tunings import tuning_key
from despina.server.cache.redis_tier import name as redis_name
from despina.server.core import CompileService
from despina.server.errors import FailedPrecondition, InvalidArgument, NotFound, ResourceExhausted
from despina.server.execute import Buffer
from despina.server.tuning import Candidate, Synthetic, TuneRequest

from .conftest import RedisProcess, unique, with_service
from .fake_gpu import NAME
from .kernels import vector_add_ir

FAKE_GPU = "server.fake_gpu:open_executor"
N = 4096


def client_key() -> str:
    return hashlib.sha256(unique().encode()).hexdigest()


def candidates(name: str = "add_kernel", warps: tuple[int, ...] = (1, 2, 4, 8), salt: str | None = None,
               **attrs: Any) -> tuple[Candidate, ...]:
    salt = salt or unique()
    return tuple(Candidate(vector_add_ir(block=256 * w, name=name, salt=salt, **attrs), CompileOptions(num_warps=w),
                           grid=(N // (256 * w),), label=f"BLOCK: {256 * w}, num_warps: {w}") for w in warps)


def args() -> tuple[Any, ...]:
    return (Synthetic("fp32", (N,)), Synthetic("fp32", (N,)), Synthetic("fp32", (N,)), N)


def tune(cands: tuple[Candidate, ...], key: str | None = None, **kw: Any) -> TuneRequest:
    return TuneRequest(key or client_key(), "add_kernel", cands, args(), **{"target": "sm_90a", **kw})


def test_tunes_once_and_answers_every_later_request_from_the_tiers(shared_redis: RedisProcess) -> None:
    key, cands = client_key(), candidates()

    async def first(service: CompileService) -> None:
        r = await service.tuner.tune(tune(cands, key))
        assert r.tier == "tuned" and r.tuning is not None and r.kernel is not None
        assert r.tuning.winner == 3 and r.tuning.labels[3] == cands[3].label  # 8 warps: 1/8 ms
        assert r.tuning.timings_ms == [1.0, 0.5, 0.25, 0.125] and r.tuning.measured_by == "daemon"
        assert r.tuning.device == NAME and r.key == tuning_key(key, NAME, 0)
        assert r.kernel.metadata["num_warps"] == 8
        stats = service.stats()
        assert stats["compiles"] == 4 and stats["benchmarks"] == 4
        again = await service.tuner.tune(tune(cands, key))
        assert again.tier == "memory" and again.kernel is not None and again.kernel.cubin == r.kernel.cubin
        assert service.stats()["compiles"] == 4 and service.stats()["benchmarks"] == 4

    async def second(service: CompileService) -> None:
        # Another daemon on the same Redis, and a lookup without configs: no compile, no benchmark.
        r = await service.tuner.tune(TuneRequest(key, "add_kernel", target="sm_90a", device=NAME))
        assert r.tier == "redis" and r.tuning is not None and r.tuning.winner == 3
        assert r.kernel is not None and r.kernel.metadata["num_warps"] == 8
        assert service.stats()["compiles"] == 0 and service.stats()["benchmarks"] == 0
        assert service.gpu.pid is None

    with_service(first, executor=FAKE_GPU, redis_url=shared_redis.url, workers=2)
    with_service(second, executor=FAKE_GPU, redis_url=shared_redis.url)


def test_only_configs_within_20_percent_of_the_fastest_get_the_whole_budget() -> None:
    """Two rounds: every config for a fifth of rep_ms (20 of 100), then those within 20% of the fastest
    for all of it. The fake adds rep_ms / 100,000 to 1/num_warps, so each timing shows its budget."""
    cands = candidates("tune_budget_kernel", warps=(1, 2, 4, 8, 8))

    async def body(service: CompileService) -> None:
        r = await service.tuner.tune(TuneRequest(client_key(), "tune_budget_kernel", cands, args(), target="sm_90a"))
        assert r.tuning is not None
        assert r.tuning.timings_ms == pytest.approx([1.0002, 0.5002, 0.2502, 0.126, 0.126])
        assert r.tuning.winner == 3 and service.stats()["benchmarks"] == 5

    with_service(body, executor=FAKE_GPU, workers=2)


def test_configs_are_screened_as_their_compiles_land(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first config compiles slowest (a second): the GPU screens the three others meanwhile, then it, then
    measures the contender (8 warps) for the whole budget. The daemon used to screen in the configs' order, the
    GPU idle until the first config's compile landed (tutorial 03's list starts with its largest tile)."""
    log = tmp_path / "bench.log"
    monkeypatch.setenv("FAKE_GPU_BENCH_LOG", str(log))
    salt = unique()
    cands = candidates(warps=(1,), salt=salt, fake_sleep="1.0") + candidates(warps=(2, 4, 8), salt=salt)

    async def body(service: CompileService) -> None:
        r = await service.tuner.tune(tune(cands))
        assert r.tuning is not None and r.tuning.winner == 3
        assert r.tuning.timings_ms == [1.0, 0.5, 0.25, 0.125]

    with_service(body, executor=FAKE_GPU, workers=4)
    order = [int(w) for w in log.read_text().split()]
    assert sorted(order[:3]) == [2, 4, 8] and order[3:] == [1, 8]


def test_concurrent_requests_for_one_tuning_run_it_once() -> None:
    key, cands = client_key(), candidates(fake_sleep="0.2")

    async def body(service: CompileService) -> None:
        answers = await asyncio.gather(*(service.tuner.tune(tune(cands, key)) for _ in range(5)))
        assert {a.tier for a in answers} == {"tuned"} and {a.tuning.winner for a in answers if a.tuning} == {3}
        assert service.stats()["compiles"] == 4 and service.stats()["benchmarks"] == 4

    with_service(body, executor=FAKE_GPU, workers=2)


def test_lookup_miss_and_bad_requests() -> None:
    async def body(service: CompileService) -> None:
        with pytest.raises(NotFound, match="send the configs"):
            await service.tuner.tune(TuneRequest(client_key(), "add_kernel", device=NAME))
        with pytest.raises(InvalidArgument, match="not 64 lowercase hex"):
            await service.tuner.tune(tune(candidates(), key="nope"))
        with pytest.raises(InvalidArgument, match=r"config 1 \(bad\): grid must be"):
            c = candidates(warps=(1, 2))
            await service.tuner.tune(tune((c[0], Candidate(c[1].ir, CompileOptions(num_warps=2), (0,), "bad"))))
        with pytest.raises(InvalidArgument, match="synthetic buffer holds fp16 elements, the kernel reads fp32"):
            await service.tuner.tune(TuneRequest(client_key(), "add_kernel", candidates(),
                                                 (Synthetic("fp16", (N,)),) + args()[1:]))
        with pytest.raises(InvalidArgument, match="is a scalar: pass a number"):
            await service.tuner.tune(TuneRequest(client_key(), "add_kernel", candidates(), args()[:3] + (Synthetic("fp32", (1,)),)))
        other = Candidate(vector_add_ir(name="other_kernel", salt=unique()), CompileOptions(), (1,), "other")
        with pytest.raises(InvalidArgument, match="same kernel|config 1"):
            # Same parameters, other name: fine; a different parameter list is refused.
            from despina.compiler.ir.codec import encode

            from .kernels import vector_add
            m = vector_add(salt=unique())
            m.kernel.arg_names[0] = "a"
            await service.tuner.tune(tune((other, Candidate(encode(m), CompileOptions(), (1,), "renamed"))))
        with pytest.raises(ResourceExhausted, match="at most 256"):
            await service.tuner.tune(tune(candidates(warps=(4,)) * 257))

    with_service(body, executor=FAKE_GPU)


def test_every_compile_failure_is_reported() -> None:
    async def body(service: CompileService) -> None:
        with pytest.raises(InvalidArgument) as e:
            await service.tuner.tune(tune(candidates(fake_fail=True)))
        message = e.value.message
        assert "every one of its 4 configs failed to compile" in message
        for w in (1, 2, 4, 8):
            assert f"BLOCK: {256 * w}, num_warps: {w}): INVALID_ARGUMENT" in message
        assert message.count("the fake backend refuses this kernel") == 4

    with_service(body, executor=FAKE_GPU)


def test_a_config_that_faults_is_dropped_and_the_worker_replaced() -> None:
    async def body(service: CompileService) -> None:
        r = await service.tuner.tune(tune(candidates(name="tune_fault_kernel", warps=(1, 2, 4))))
        assert r.tuning is not None and r.tuning.winner == 2 and r.tuning.timings_ms == [None, None, 0.25]
        crash, fault, ok = r.tuning.errors
        assert crash is not None and "GPU worker died" in crash
        assert fault is not None and "CUDA_ERROR_ILLEGAL_ADDRESS" in fault and ok is None
        assert service.metrics.value("despina_gpu_workers_started_total") == 3  # replaced after each
        assert service.stats()["benchmarks"] == 1

    with_service(body, executor=FAKE_GPU)


def test_all_configs_faulting_lists_every_error() -> None:
    async def body(service: CompileService) -> None:
        with pytest.raises(InvalidArgument, match=r"(?s)none of its 2 configs could be measured.*died.*ILLEGAL_ADDRESS"):
            await service.tuner.tune(tune(candidates(name="tune_fault_kernel", warps=(1, 2))))

    with_service(body, executor=FAKE_GPU)


def test_client_going_away_mid_tuning_leaves_it_finished_and_kept() -> None:
    key, cands = client_key(), candidates(fake_sleep="0.3")

    async def body(service: CompileService) -> None:
        task = asyncio.ensure_future(service.tuner.tune(tune(cands, key)))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(200):
            found, _ = await service.tuner.store.get(tuning_key(key, NAME, 0))
            if found is not None:
                break
            await asyncio.sleep(0.05)
        assert found is not None and found.winner == 3
        r = await service.tuner.tune(TuneRequest(key, "add_kernel", target="sm_90a", device=NAME))
        assert r.tier == "memory" and r.kernel is not None

    with_service(body, executor=FAKE_GPU, workers=2)


def test_restored_buffers_travel_and_are_checked() -> None:
    async def body(service: CompileService) -> None:
        data = bytes(4 * N)
        r = await service.tuner.tune(TuneRequest(client_key(), "add_kernel", candidates(warps=(2, 4)),
                                                 args()[:2] + (Buffer(data, "fp32", (N,)), N), restore=(2,)))
        assert r.tuning is not None and r.tuning.winner == 1
        with pytest.raises(InvalidArgument, match="has 3 bytes"):
            await service.tuner.tune(TuneRequest(client_key(), "add_kernel", candidates(warps=(2, 4)),
                                                 args()[:2] + (Buffer(b"abc", "fp32", (N,)), N)))

    with_service(body, executor=FAKE_GPU)


def test_without_a_gpu_every_kernel_is_answered_and_the_client_reports() -> None:
    key, cands = client_key(), candidates()

    async def body(service: CompileService) -> None:
        with pytest.raises(FailedPrecondition, match="names no GPU"):
            await service.tuner.tune(tune(cands, key))
        r = await service.tuner.tune(tune(cands, key, device="NVIDIA A100", driver_version=12080))
        assert r.tier == "compiled" and r.tuning is None and len(r.kernels) == 4 and r.errors == [None] * 4
        assert all(k is not None and k.cubin for k in r.kernels)
        full = tuning_key(key, "NVIDIA A100", 12080)
        assert r.key == full
        record = {"key": full, "kernel": "add_kernel", "labels": [c.label for c in cands], "timings_ms": [4, 3, 1, 2],
                  "errors": [None] * 4, "winner": 2, "device": "NVIDIA A100", "driver_version": 12080,
                  "compile_keys": [k.key for k in r.kernels if k is not None]}
        with pytest.raises(InvalidArgument, match="not the tuning key"):
            await service.tuner.report(dict(record, device="NVIDIA H100"), key)
        with pytest.raises(InvalidArgument, match="does not check out"):
            await service.tuner.report(dict(record, winner=7), key)
        kept = await service.tuner.report(record, key)
        assert kept.measured_by == "client"
        again = await service.tuner.tune(TuneRequest(key, "add_kernel", device="NVIDIA A100", driver_version=12080))
        assert again.tier == "memory" and again.tuning is not None and again.tuning.winner == 2
        assert again.kernel is not None and again.kernel.metadata["num_warps"] == 4
        assert [t.key for t in await service.tuner.list()] == [full]
        assert await service.tuner.clear(full) == 1
        with pytest.raises(NotFound):
            await service.tuner.get(full)

    with_service(body, executor="server.fake_gpu:no_device")


def test_clear_reaches_disk_and_redis(shared_redis: RedisProcess, tmp_path: Any) -> None:
    async def body(service: CompileService) -> str:
        r = await service.tuner.tune(tune(candidates()))
        assert (tmp_path / "tunings" / f"{r.key}.json").exists()
        return r.key

    key = with_service(body, executor=FAKE_GPU, redis_url=shared_redis.url, disk_dir=str(tmp_path))
    assert shared_redis.client().exists(redis_name("tuning", key))

    async def clear(service: CompileService) -> None:
        assert [t.key for t in await service.tuner.list()] == [key]  # from its disk folder
        assert await service.tuner.clear() >= 1
        assert not (tmp_path / "tunings" / f"{key}.json").exists()

    with_service(clear, executor=FAKE_GPU, redis_url=shared_redis.url, disk_dir=str(tmp_path))
    assert not shared_redis.client().exists(redis_name("tuning", key))
