"""Redis beyond one node, for real on loopback: a cluster of three masters, and a master with a replica
watched by a sentinel (ports from the system, each node's files in a folder of its own); `daemons`
starts several in-process compile services on one of them, as several hosts' daemons."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import redis
from redis.cluster import RedisCluster

from despina.server.config import ServiceConfig
from despina.server.core import CompileService

from .conftest import FAKE_COMPILER, RedisProcess, free_port, wait_for

SERVICE = "despina-test"


@contextlib.asynccontextmanager
async def daemons(count: int, **config: Any) -> AsyncIterator[list[CompileService]]:
    """`count` compile services (the fake backend, one worker each) with `config`, started and closed."""
    services = [CompileService(ServiceConfig(**{"compiler": FAKE_COMPILER, "workers": 1, **config}))
                for _ in range(count)]
    await asyncio.gather(*(s.start() for s in services))
    try:
        yield services
    finally:
        await asyncio.gather(*(s.close() for s in services))


class Cluster:
    """Three masters, no replicas, the 16384 slots split between them by `redis-cli --cluster create`."""

    def __init__(self, workdir: Path, masters: int = 3) -> None:
        self.nodes = []
        for i in range(masters):
            folder = workdir / f"node{i}"
            folder.mkdir()
            self.nodes.append(RedisProcess(folder, extra=(
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                # The bus port is given, since the default (port + 10000) may lie past 65535.
                "--cluster-port", str(free_port()), "--cluster-node-timeout", "2000")))
        self._client: RedisCluster | None = None

    @property
    def url(self) -> str:
        """One seed node: the daemon finds the others."""
        return self.nodes[1].url

    def start(self) -> None:
        for node in self.nodes:
            node.start()
        cli = shutil.which("redis-cli")
        assert cli is not None, "redis-cli is missing (it comes with redis-server: apt-get install -y redis-server)"
        subprocess.run([cli, "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in self.nodes),
                        "--cluster-replicas", "0", "--cluster-yes"], check=True, capture_output=True, timeout=60)
        for node in self.nodes:
            wait_for(lambda n=node: n.client().cluster("info")["cluster_state"] == "ok",
                     what=f"cluster state ok on port {node.port}")

    def client(self) -> RedisCluster:
        """A client of the whole cluster (the slot map loaded once)."""
        if self._client is None:
            self._client = RedisCluster(host="127.0.0.1", port=self.nodes[0].port, socket_timeout=2)
        return self._client

    def master_of(self, key: str) -> int:
        """The index in `nodes` of the master serving `key`'s slot."""
        port = self.client().get_node_from_key(key).port
        return next(i for i, n in enumerate(self.nodes) if n.port == port)

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
        for node in self.nodes:
            node.stop()


class SentinelSet:
    """A master, its replica and one sentinel (quorum 1) that fails over a second after the master goes."""

    def __init__(self, workdir: Path) -> None:
        for name in ("master", "replica", "sentinel"):
            (workdir / name).mkdir()
        # Without the default 5 s wait for more replicas before the first sync.
        self.master = RedisProcess(workdir / "master", extra=("--repl-diskless-sync-delay", "0"))
        self.replica = RedisProcess(workdir / "replica", extra=("--replicaof", "127.0.0.1", str(self.master.port)))
        self.port = free_port()
        self.conf = workdir / "sentinel" / "sentinel.conf"
        self.log = workdir / "sentinel" / "sentinel.log"
        self.conf.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {workdir / 'sentinel'}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {self.master.port} 1\n"
            # Shorter, and on a loaded machine the sentinel can find the new master "down" before its
            # first ping after the failover is answered, and fail over again with no replica left.
            f"sentinel down-after-milliseconds {SERVICE} 1000\nsentinel failover-timeout {SERVICE} 5000\n")
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, *, dead_first: bool = False, password: str = "") -> str:
        """The daemon's --redis-url; `dead_first` lists a sentinel that is not running before the live one."""
        hosts = f"127.0.0.1:{self.port}"
        if dead_first:
            hosts = f"127.0.0.1:{free_port()}," + hosts
        return f"redis+sentinel://{':' + password + '@' if password else ''}{hosts}/{SERVICE}"

    def sentinel(self) -> Any:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=2)

    def master_port(self) -> int:
        return int(self.sentinel().sentinel_get_master_addr_by_name(SERVICE)[1])

    def start(self) -> None:
        self.master.start()
        self.replica.start()
        wait_for(lambda: b"master_link_status:up" in self.replica.client().execute_command("INFO replication"),
                 what="the replica's link to its master")
        exe = self.master.exe
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen([exe, str(self.conf), "--sentinel"], stdout=out, stderr=subprocess.STDOUT)
        # A failover needs the sentinel to know the replica first (it learns it from the master's INFO).
        wait_for(lambda: len(self.sentinel().sentinel_slaves(SERVICE)) == 1, what="the sentinel finding the replica")

    def fail_over(self) -> None:
        """Kill the master; return once the sentinel names the replica as a master in good standing."""
        self.master.stop()

        def promoted() -> bool:
            state = self.sentinel().sentinel_master(SERVICE)
            return bool(state["port"] == self.replica.port and state["flags"] == "master")

        wait_for(promoted, what=f"the sentinel's failover (log: {self.log})", timeout=30)
        wait_for(lambda: self.replica.client().info("replication")["role"] == "master", what="the promotion")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        self.replica.stop()
        self.master.stop()
