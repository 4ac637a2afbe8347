"""Tuning through real daemons (gRPC and HTTP, `despina.remote_tuning`), a real redis-server, the fake
backend and the fake GPU (1/num_warps ms a config); `despina tune` against a daemon and on disk."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from despina import remote, remote_tuning
from despina.cli import main as cli
from despina.compiler.options import CompileOptions
from despina.remote_tuning import CallCandidate, Synthetic, TuneCall
from despina.runtime.tunings import Tuning, TuningFiles, tuning_key

from .conftest import Daemon, RedisProcess, unique
from .fake_gpu import NAME
from .kernels import vector_add_ir

FAKE_GPU = ("--executor", "server.fake_gpu:open_executor")
N = 4096


@pytest.fixture(scope="module")
def tuner(tmp_path_factory: pytest.TempPathFactory, shared_redis: RedisProcess) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("tuner"), shared_redis.url, workers=2, extra=FAKE_GPU)
    yield d
    d.stop()


def call(key: str | None = None, warps: tuple[int, ...] = (1, 2, 4, 8), lookup: bool = False, device: str = NAME,
         **attrs: Any) -> TuneCall:
    salt = unique()
    cands = [CallCandidate(vector_add_ir(block=256 * w, salt=salt, **attrs), CompileOptions(num_warps=w), (N // (256 * w),),
                           f"BLOCK: {256 * w}, num_warps: {w}") for w in warps]
    return TuneCall(key or hashlib.sha256(unique().encode()).hexdigest(), "add_kernel",
                    [] if lookup else cands, [Synthetic("fp32", (N,))] * 3 + [N], target="sm_90a", device=device)


def stats(d: Daemon) -> dict[str, Any]:
    return dict(httpx.get(d.http + "/v1/stats", timeout=5).json())


@pytest.mark.parametrize("transport", ["grpc", "http"])
def test_tuned_once_for_the_cluster(transport: str, tuner: Daemon, shared_redis: RedisProcess, tmp_path: Path) -> None:
    c = call()
    before = stats(tuner)
    answer = remote_tuning.tune(getattr(tuner, transport), c)
    assert answer.tier == "tuned" and answer.tuning is not None and answer.tuning.winner == 3
    assert answer.tuning.timings_ms == [1.0, 0.5, 0.25, 0.125] and answer.tuning.device == NAME
    assert answer.kernel is not None and answer.kernel.metadata["num_warps"] == 8 and answer.kernel.cubin
    after = stats(tuner)
    assert after["compiles"] - before["compiles"] == 4 and after["benchmarks"] - before["benchmarks"] == 4
    # The record over REST, and in the other transport.
    record = httpx.get(f"{tuner.http}/v1/tunings/{answer.key}", timeout=5).json()
    assert record["winner"] == 3 and record["labels"][3] == "BLOCK: 2048, num_warps: 8"
    assert answer.key in [t["key"] for t in httpx.get(f"{tuner.http}/v1/tunings", timeout=5).json()]
    other = tuner.grpc if transport == "http" else tuner.http
    assert remote_tuning.listing(other, answer.key)[0]["winner"] == 3
    # A second daemon on the same Redis (another host of the cluster): a lookup, no compile, no benchmark.
    second = Daemon(tmp_path, shared_redis.url, extra=FAKE_GPU)
    try:
        again = remote_tuning.tune(getattr(second, transport), TuneCall(**{**c.__dict__, "candidates": []}))
        assert again.tier == "redis" and again.tuning == answer.tuning
        assert again.kernel is not None and again.kernel.cubin == answer.kernel.cubin
        s = stats(second)
        assert s["compiles"] == 0 and s["benchmarks"] == 0
    finally:
        second.stop()


def test_lookup_miss_is_not_found_and_bad_requests_name_the_problem(tuner: Daemon) -> None:
    with pytest.raises(remote.RemoteError, match="NOT_FOUND.*send the configs") as e:
        remote_tuning.tune(tuner.grpc, call(lookup=True))
    assert e.value.code == "NOT_FOUND"
    with pytest.raises(remote.RemoteError, match="every one of its 2 configs failed to compile") as e:
        remote_tuning.tune(tuner.http, call(warps=(2, 4), fake_fail=True))
    assert e.value.message.count("the fake backend refuses this kernel") == 2
    reply = httpx.post(tuner.http + "/v1/tune", json={"client_key": "0" * 64, "candidates": [{"ir": "!!", "grid": [1]}]},
                       timeout=5)
    assert reply.status_code == 400 and "is not base64" in reply.json()["error"]["message"]
    with pytest.raises(remote.RemoteError, match="(?s)none of its 1 configs could be measured.*ILLEGAL_ADDRESS"):
        remote_tuning.tune(tuner.grpc, call(warps=(2,), name="tune_fault_kernel"))


def test_a_client_that_goes_away_leaves_the_tuning_finished_and_kept(tuner: Daemon) -> None:
    c = call(fake_sleep="1.0")
    body = {"client_key": c.client_key, "kernel": c.kernel, "target": c.target, "device": c.device,
            "args": [{"synthetic": {"dtype": "fp32", "shape": [N]}}] * 3 + [{"int_value": N}],
            "candidates": [{"ir": base64.b64encode(x.ir).decode(), "grid": list(x.grid), "label": x.label,
                            "options": {"num_warps": x.options.num_warps}} for x in c.candidates]}
    with pytest.raises(httpx.TimeoutException):
        httpx.post(tuner.http + "/v1/tune", json=body, timeout=0.3)
    key = tuning_key(c.client_key, NAME, 0)
    deadline = time.monotonic() + 30
    while (reply := httpx.get(f"{tuner.http}/v1/tunings/{key}", timeout=5)).status_code == 404:
        assert time.monotonic() < deadline, "the tuning was not kept after its client went away"
        time.sleep(0.1)
    assert reply.json()["winner"] == 3
    assert remote_tuning.tune(tuner.grpc, TuneCall(**{**c.__dict__, "candidates": []})).tier == "memory"


def test_daemon_without_gpu_answers_every_kernel_and_keeps_the_clients_record(tmp_path: Path,
                                                                            shared_redis: RedisProcess) -> None:
    d = Daemon(tmp_path, shared_redis.url, extra=("--executor", "server.fake_gpu:no_device"))
    try:
        c = call(device="NVIDIA A100-SXM4-80GB")
        answer = remote_tuning.tune(d.grpc, c)
        assert answer.tier == "compiled" and answer.tuning is None and len(answer.kernels) == 4
        assert all(k is not None and k.cubin for k in answer.kernels) and answer.errors == [None] * 4
        record = Tuning(answer.key, "add_kernel", [x.label for x in c.candidates], [3.0, 2.0, 1.0, 4.0], [None] * 4, 2,
                        "NVIDIA A100-SXM4-80GB", 0)
        kept = remote_tuning.report(d.http, c.client_key, record)
        assert kept.measured_by == "client"
        with pytest.raises(remote.RemoteError, match="not the tuning key"):
            remote_tuning.report(d.grpc, c.client_key, Tuning(**{**record.__dict__, "driver_version": 1}))
        hit = remote_tuning.tune(d.http, TuneCall(**{**c.__dict__, "candidates": []}))
        assert hit.tier == "memory" and hit.tuning is not None and hit.tuning.winner == 2
    finally:
        d.stop()


def test_despina_tune_on_a_daemon_and_on_disk(tuner: Daemon, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    answer = remote_tuning.tune(tuner.grpc, call())
    assert cli(["tune", "ls", "--server", tuner.http]) == 0
    assert answer.key in capsys.readouterr().out
    assert cli(["tune", "show", answer.key, "--server", tuner.grpc]) == 0
    out = capsys.readouterr().out
    assert "* " in out and "BLOCK: 2048, num_warps: 8" in out and "0.1250 ms" in out
    for url in (tuner.grpc, tuner.http):  # a daemon without a token deletes nothing
        assert cli(["tune", "clear", answer.key, "--server", url]) == 1
        assert "PERMISSION_DENIED" in capsys.readouterr().err
    assert cli(["tune", "show", "nope"]) == 2

    d = Daemon(tmp_path, token="s3cret", extra=FAKE_GPU)
    try:
        monkeypatch.setenv("DESPINA_TOKEN", "s3cret")
        answer = remote_tuning.tune(d.grpc, call())
        assert cli(["tune", "clear", answer.key, "--server", d.grpc]) == 0
        assert "cleared 1" in capsys.readouterr().out
        assert httpx.get(f"{d.http}/v1/tunings/{answer.key}", headers=d.headers(), timeout=5).status_code == 404
        remote_tuning.tune(d.http, call())
        assert cli(["tune", "clear", "--server", d.http]) == 0 and "cleared 1" in capsys.readouterr().out
    finally:
        d.stop()
        monkeypatch.delenv("DESPINA_TOKEN")

    monkeypatch.setenv("DESPINA_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("DESPINA_SERVER", raising=False)
    record = Tuning(tuning_key("a" * 64, "GPU", 1), "k", ["A", "B"], [2.0, None], [None, "ABORTED: fault"], 0, "GPU", 1)
    assert TuningFiles(tmp_path / "tunings").put(record)
    assert cli(["tune", "ls", "--json"]) == 0
    assert [r["key"] for r in json.loads(capsys.readouterr().out)] == [record.key]
    assert cli(["tune", "show", record.key]) == 0
    assert "dropped: ABORTED: fault" in capsys.readouterr().out
    assert cli(["tune", "clear"]) == 0 and cli(["tune", "ls"]) == 0
    assert "no tunings" in capsys.readouterr().out


def test_a_torn_record_on_disk_is_dropped(tmp_path: Path) -> None:
    files = TuningFiles(tmp_path)
    record = Tuning(tuning_key("b" * 64, "GPU", 1), "k", ["A"], [1.0], [None], 0, "GPU", 1)
    files.put(record)
    assert files.get(record.key) == record
    files.path(record.key).write_bytes(files.path(record.key).read_bytes()[:-20])
    assert files.get(record.key) is None and not files.path(record.key).exists()
