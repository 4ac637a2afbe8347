"""Decode bombs against a real daemon: modules of millions of empty ops, several at once over both
transports. Each is refused by the wire census in a compile worker; the daemon's memory stays where
it was and another client's cache hits keep their latency."""

from __future__ import annotations

import base64
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import httpx

from despina.proto import service_pb2 as pb

from ..conftest import Daemon, unique
from ..kernels import vector_add_ir
from .attack import MB, Hits, decode_bomb, memory, stub

BOMBS = 6
OPS = 1_600_000  # 3.2 MB; before the census, ~800 MB and 10 s of the daemon's CPU each


def test_decode_bombs_are_refused_before_decoding(tmp_path: Path) -> None:
    d = Daemon(tmp_path)
    try:
        bomb = decode_bomb(OPS)
        _, peak_before = memory(d.proc.pid)
        attacker = stub(d.grpc)

        def grpc_bomb(i: int) -> str:
            try:
                attacker.Compile(pb.CompileRequest(ir=bomb + b"\x18" + bytes([i])), timeout=60)  # a key each
            except grpc.RpcError as e:
                return f"{e.code().name}: {e.details()}"
            return "OK"

        def http_bomb(i: int) -> str:
            ir = base64.b64encode(bomb + b"\x18" + bytes([100 + i])).decode()
            r = httpx.post(d.http + "/v1/compile", json={"ir": ir}, timeout=60)
            return f"{r.json()['error']['code']}: {r.json()['error']['message']}"

        with Hits(d.grpc, vector_add_ir(salt=unique())) as hits, ThreadPoolExecutor(BOMBS + 2) as pool:
            answers = list(pool.map(grpc_bomb, range(BOMBS))) + list(pool.map(http_bomb, range(2)))
        assert all(a.startswith("INVALID_ARGUMENT: invalid IR: the module is past the IR's limits") for a in answers), \
            answers
        resident, peak = memory(d.proc.pid)
        assert peak - peak_before < 100 * MB, (peak_before, peak)
        assert hits.latencies and hits.p99() < 0.25, hits.p99()
        assert d.metric("despina_workers_replaced_total") == 0
    finally:
        d.stop()
