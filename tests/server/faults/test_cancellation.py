"""The cancellation storm against a real `despina serve`: a first caller with a short deadline, then
many with long ones, all for one new kernel. The first caller's deadline must not reach the others."""

from __future__ import annotations

from pathlib import Path

import grpc

from despina.proto import service_pb2 as pb
from despina.proto import service_pb2_grpc

from ..conftest import Daemon, unique
from ..kernels import vector_add_ir

WAITERS = 63


def test_cancellation_storm(tmp_path: Path) -> None:
    d = Daemon(tmp_path)
    try:
        channel = grpc.insecure_channel(d.grpc.split("://")[1])
        stub = service_pb2_grpc.CompilerStub(channel)
        req = pb.CompileRequest(ir=vector_add_ir(salt=unique(), fake_sleep=1.5))
        leader = stub.Compile.future(req, timeout=0.5)
        waiters = [stub.Compile.future(req, timeout=30) for _ in range(WAITERS)]
        assert leader.exception(10).code() == grpc.StatusCode.DEADLINE_EXCEEDED
        answers = [w.result(30) for w in waiters]
        assert len({a.digest for a in answers}) == 1 and {a.key for a in answers} == {answers[0].key}
        assert d.metric("despina_compiles_total", outcome="ok") == 1
        assert d.metric("despina_workers_replaced_total") == 0
        channel.close()
    finally:
        d.stop()
