"""A client with several daemons (`DESPINA_SERVER=a,b`): the order it asks them in, its back-off, and
failover against real daemons that are down, killed between calls, or killed during one."""

from __future__ import annotations

import logging
import os
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import despina
from despina import remote
from despina.remote_failover import DOWN_MAX_S, DOWN_S, Servers, addresses

from .conftest import Daemon, RedisProcess, free_port, unique
from .kernels import vector_add
from .test_remote import fresh_client  # noqa: F401  (an autouse fixture)


def dead(scheme: str = "grpc") -> str:
    return f"{scheme}://127.0.0.1:{free_port()}"


def address(d: Daemon, scheme: str) -> str:
    return d.grpc if scheme == "grpc" else d.http


def test_addresses_are_parsed_checked_and_deduplicated() -> None:
    assert addresses(" grpc://a:1 ,http://b:2,grpc://a:1") == ["grpc://a:1", "http://b:2"]
    with pytest.raises(ValueError, match="empty address"):
        addresses("grpc://a:1,,grpc://b:2")
    with pytest.raises(ValueError, match="DESPINA_SERVER: server URL 'tcp://b:2' is not grpc://"):
        addresses("grpc://a:1,tcp://b:2")
    with pytest.raises(ValueError, match="set_server: server URL 'grpc://' is not"):
        despina.set_server("http://a:1,grpc://")


def test_bad_address_in_the_environment_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DESPINA_SERVER", "grpc://a:1;grpc://b:2")
    with pytest.raises(ValueError, match="DESPINA_SERVER: server URL 'grpc://a:1;grpc://b:2' is not.*commas"):
        remote.compile_remote(vector_add())


def test_each_process_keeps_one_order_and_processes_spread() -> None:
    spec = ",".join(f"grpc://h{i}:1" for i in range(4))
    assert Servers(spec).order == Servers(spec).order  # this process's seed: the same daemon every time
    firsts = [Servers(spec, seed=f"host:{pid}").order[0] for pid in range(400)]
    assert all(70 <= firsts.count(a) <= 130 for a in addresses(spec)), {a: firsts.count(a) for a in addresses(spec)}
    assert sorted(Servers(spec, seed=7).order) == addresses(spec)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_failed_address_backs_off_doubling_and_an_answer_resets_it() -> None:
    clock = Clock()
    servers = Servers("grpc://a:1,grpc://b:1", seed=0, clock=clock)
    first, second = servers.order
    failing = {first}
    asked: list[str] = []

    def answer(a: str) -> str:
        asked.append(a)
        if a in failing:
            raise remote.ServerUnavailable("UNAVAILABLE", "connection refused")
        return a

    assert servers.call(answer) == second and asked == [first, second]
    assert servers.candidates() == [second, first]
    assert servers.down(first, "again, from a request under way") == DOWN_S  # does not lengthen it
    clock.now += DOWN_S
    assert servers.candidates() == [first, second]  # due again
    assert servers.call(answer) == second
    clock.now += DOWN_S
    assert servers.candidates() == [second, first]  # now 2 * DOWN_S
    for _ in range(10):
        clock.now += DOWN_MAX_S
        servers.call(answer)
    assert servers.down(first, "x") == DOWN_MAX_S
    failing.clear()
    clock.now += DOWN_MAX_S
    assert servers.call(answer) == first and servers.candidates() == [first, second]
    clock.now += 0.01
    failing.add(first)
    servers.call(answer)
    assert servers.down(first, "x") == DOWN_S  # an answer reset the back-off


@pytest.mark.parametrize("scheme", ["grpc", "http"])
def test_a_dead_address_is_passed_over(daemon: Daemon, scheme: str, caplog: pytest.LogCaptureFixture) -> None:
    gone = dead(scheme)
    spec = f"{gone},{address(daemon, scheme)}"
    despina.set_server(spec)
    # This process's order, as the one of a process whose pid puts the dead address first.
    remote._servers[(spec, os.getpid())] = next(s for s in (Servers(spec, seed=i) for i in range(64)) if s.order[0] == gone)
    module = vector_add(salt=unique())
    with caplog.at_level(logging.WARNING, "despina.remote"), warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            got = remote.compile_remote(module)
            assert got.metadata["service"]["server"] == address(daemon, scheme)
    assert remote._servers[(spec, os.getpid())].candidates() == [address(daemon, scheme), gone]
    assert [r.getMessage() for r in caplog.records if gone in r.getMessage()]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, shared_redis: RedisProcess) -> Iterator[tuple[Daemon, Daemon]]:
    workdir = tmp_path_factory.mktemp("pair")
    a, b = Daemon(workdir, shared_redis.url), Daemon(workdir, shared_redis.url)
    yield a, b
    a.stop()
    b.stop()


def test_a_kernel_error_is_not_sent_to_the_next_daemon(pair: tuple[Daemon, Daemon]) -> None:
    before = sum(d.metric("despina_errors_total", code="INVALID_ARGUMENT") for d in pair)
    despina.set_server(",".join(d.grpc for d in pair))
    with pytest.raises(remote.RemoteError, match="INVALID_ARGUMENT.*refuses"):
        remote.compile_remote(vector_add(salt=unique(), fake_fail=True))
    assert sum(d.metric("despina_errors_total", code="INVALID_ARGUMENT") for d in pair) == before + 1


@pytest.mark.parametrize("scheme", ["grpc", "http"])
def test_a_daemon_killed_between_calls(tmp_path: Path, shared_redis: RedisProcess, scheme: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Its clients go on with the other daemon, which serves what the dead one stored (from Redis)."""
    monkeypatch.setenv("DESPINA_SERVER_REQUIRED", "1")
    daemons = {address(d, scheme): d for d in (Daemon(tmp_path, shared_redis.url) for _ in range(2))}
    try:
        despina.set_server(",".join(daemons))
        stored = vector_add(salt=unique())
        first = remote.compile_remote(stored).metadata["service"]
        assert first["tier"] == "compiled"
        daemons[first["server"]].proc.kill()
        daemons[first["server"]].proc.wait()
        again = remote.compile_remote(stored).metadata["service"]
        assert again["server"] != first["server"] and (again["tier"], again["key"]) == ("redis", first["key"])
        fresh = remote.compile_remote(vector_add(salt=unique())).metadata["service"]
        assert (fresh["server"], fresh["tier"]) == (again["server"], "compiled")
    finally:
        despina.set_server(None)
        for d in daemons.values():
            d.stop()


@pytest.mark.parametrize("scheme", ["grpc", "http"])
def test_a_daemon_killed_during_a_call(tmp_path: Path, scheme: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The call under way on the killed daemon is sent again to the other one, and answered."""
    monkeypatch.setenv("DESPINA_SERVER_REQUIRED", "1")
    daemons = {address(d, scheme): d for d in (Daemon(tmp_path) for _ in range(2))}
    try:
        despina.set_server(",".join(daemons))
        result: dict[str, Any] = {}
        call = threading.Thread(target=lambda: result.update(
            got=remote.compile_remote(vector_add(salt=unique(), fake_sleep=2.0))))
        call.start()
        deadline = time.monotonic() + 20
        busy = []
        while not busy and time.monotonic() < deadline:
            busy = [a for a, d in daemons.items() if d.metric("despina_compiles_in_flight")]
        assert busy, "no daemon started the compile"
        daemons[busy[0]].proc.kill()
        call.join(30)
        service = result["got"].metadata["service"]
        assert service["server"] != busy[0] and service["tier"] == "compiled"
    finally:
        despina.set_server(None)
        for d in daemons.values():
            d.stop()


@pytest.mark.parametrize("scheme", ["grpc", "http"])
def test_every_daemon_down(scheme: str, monkeypatch: pytest.MonkeyPatch) -> None:
    local = remote.RemoteKernel(b"local", "// local", {"service": {"tier": "local"}})
    monkeypatch.setattr(remote, "_compile_local", lambda *a: local)
    gone = [dead(scheme), dead(scheme)]
    despina.set_server(",".join(gone))
    with pytest.warns(RuntimeWarning, match="every daemon is unreachable") as record:
        assert remote.compile_remote(vector_add()) is local
    assert all(a in str(record[0].message) for a in gone)
    monkeypatch.setenv("DESPINA_SERVER_REQUIRED", "1")
    with pytest.raises(remote.ServerUnavailable) as info:
        remote.compile_remote(vector_add())
    assert all(f"{a} (UNAVAILABLE" in info.value.message for a in gone), info.value.message
