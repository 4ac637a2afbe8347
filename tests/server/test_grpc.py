"""The gRPC transport against a real `despina serve`: RPCs, health, reflection, bad input, auth."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from despina.compiler.ir.codec import encode
from despina.compiler.options import DEFAULTS, CompileOptions
from despina.proto import service_pb2 as pb
from despina.proto import service_pb2_grpc
from despina.server import execute

from .conftest import Daemon, RedisProcess, unique
from .kernels import vector_add, vector_add_ir

TOKEN = "s3cret-token"


def stub(d: Daemon) -> Any:
    return service_pb2_grpc.CompilerStub(grpc.insecure_channel(d.grpc.split("://")[1]))


def auth(d: Daemon) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {d.token}"),) if d.token else ()


def compile_ok(d: Daemon, **attrs: Any) -> Any:
    return stub(d).Compile(pb.CompileRequest(ir=vector_add_ir(salt=unique(), **attrs)), metadata=auth(d), timeout=30)


def status_of(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code(), info.value.details()


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory, shared_redis: RedisProcess) -> Iterator[Daemon]:
    """A daemon with a token and small size limits."""
    d = Daemon(tmp_path_factory.mktemp("guarded"), shared_redis.url, token=TOKEN,
               extra=("--max-ir-bytes", "65536", "--max-request-bytes", "1048576"))
    yield d
    d.stop()


def test_compile_artifact_stats(daemon: Daemon) -> None:
    s = stub(daemon)
    req = pb.CompileRequest(ir=vector_add_ir(salt=unique()), target="sm_80", options=pb.CompileOptions(num_warps=2))
    first, second = s.Compile(req), s.Compile(req)
    assert (first.tier, second.tier) == (pb.COMPILED, pb.MEMORY)
    assert first.cubin == second.cubin and len(first.key) == 64
    assert json.loads(first.metadata_json)["num_warps"] == 2
    art = s.GetArtifact(pb.GetArtifactRequest(key=first.key, stage="ptx"))
    assert art.data.decode() == first.ptx
    stats = s.Stats(pb.StatsRequest())
    assert stats.compiles >= 1 and stats.hits["memory"] >= 1 and stats.redis_connected
    code, _ = status_of(lambda: s.GetArtifact(pb.GetArtifactRequest(key="0" * 64, stage="ptx")))
    assert code == grpc.StatusCode.NOT_FOUND


def test_every_compile_option_crosses_the_wire(daemon: Daemon) -> None:
    """Unset fields are the defaults; set ones reach the metadata and the key; a refused one is INVALID_ARGUMENT."""
    s = stub(daemon)
    ir = vector_add_ir(salt=unique())
    plain = s.Compile(pb.CompileRequest(ir=ir, target="sm_80"))
    assert {k: v for k, v in json.loads(plain.metadata_json).items() if k in CompileOptions.NAMES} == DEFAULTS.as_dict()
    keys = {plain.key}
    for options, field in ((pb.CompileOptions(maxnreg=32), ("maxnreg", 32)),
                           (pb.CompileOptions(enable_fp_fusion=False), ("enable_fp_fusion", False)),
                           (pb.CompileOptions(enable_fp_fusion=True), ("enable_fp_fusion", True))):
        got = s.Compile(pb.CompileRequest(ir=ir, target="sm_80", options=options))
        assert json.loads(got.metadata_json)[field[0]] == field[1]
        keys.add(got.key)
    assert len(keys) == 3  # enable_fp_fusion=True is the default: the same kernel as `plain`
    code, message = status_of(lambda: s.Compile(pb.CompileRequest(ir=ir, options=pb.CompileOptions(num_ctas=2))))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and message.startswith("compile options: num_ctas=2 is not supported")


def test_health_and_reflection(daemon: Daemon) -> None:
    channel = grpc.insecure_channel(daemon.grpc.split("://")[1])
    health = health_pb2_grpc.HealthStub(channel)
    for name in ("", "despina.service.v1.Compiler"):
        reply = health.Check(health_pb2.HealthCheckRequest(service=name))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    refl = reflection_pb2_grpc.ServerReflectionStub(channel)
    replies = list(refl.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")])))
    names = {s.name for s in replies[0].list_services_response.service}
    assert {"despina.service.v1.Compiler", "grpc.health.v1.Health"} <= names


def test_execute_checks_the_request_then_needs_a_gpu(daemon: Daemon) -> None:
    req = pb.ExecuteRequest(kernel=pb.CompileRequest(ir=vector_add_ir()), grid=[1],
                            args=[pb.Argument(buffer=pb.Buffer(data=b"\0" * 64, dtype="fp32", shape=[16]))])
    code, details = status_of(lambda: stub(daemon).Execute(req))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "takes 4 arguments" in details
    if execute.host_unavailable_reason() is None:
        return  # a GPU host: tests/gpu/test_execute.py runs kernels there
    req.args.extend([req.args[0]] * 2 + [pb.Argument(int_value=16)])
    code, details = status_of(lambda: stub(daemon).Execute(req))
    assert code == grpc.StatusCode.UNIMPLEMENTED and "GPU" in details


def test_bad_input_each_a_clear_status(guarded: Daemon) -> None:
    channel = grpc.insecure_channel(guarded.grpc.split("://")[1], options=[("grpc.max_send_message_length", -1)])
    raw = channel.unary_unary("/despina.service.v1.Compiler/Compile")
    s = service_pb2_grpc.CompilerStub(channel)
    md = auth(guarded)
    good = pb.CompileRequest(ir=vector_add_ir(salt=unique())).SerializeToString()
    bad_module = vector_add(salt=unique())
    bad_module.functions[0].body.ops[2].name = "not_an_op"
    cases = {
        "truncated request": (lambda: raw(good[:-7], metadata=md), grpc.StatusCode.INVALID_ARGUMENT, "CompileRequest"),
        "truncated IR": (lambda: s.Compile(pb.CompileRequest(ir=vector_add_ir()[:-9]), metadata=md),
                         grpc.StatusCode.INVALID_ARGUMENT, "invalid IR"),
        "IR failing verification": (lambda: s.Compile(pb.CompileRequest(ir=encode(bad_module)), metadata=md),
                                    grpc.StatusCode.INVALID_ARGUMENT, "failed verification"),
        "oversized IR": (lambda: s.Compile(pb.CompileRequest(ir=b"\1" * 70_000), metadata=md),
                         grpc.StatusCode.RESOURCE_EXHAUSTED, "at most 65536"),
        "oversized request": (lambda: s.Compile(pb.CompileRequest(ir=b"\1" * 2_000_000), metadata=md),
                              grpc.StatusCode.RESOURCE_EXHAUSTED, "larger than max"),
        "missing token": (lambda: s.Compile(pb.CompileRequest(ir=vector_add_ir())), grpc.StatusCode.UNAUTHENTICATED,
                          "Bearer"),
        "wrong token": (lambda: s.Compile(pb.CompileRequest(ir=vector_add_ir()), metadata=(("authorization", "Bearer x"),)),
                        grpc.StatusCode.UNAUTHENTICATED, "not valid"),
        "reflection without token": (
            lambda: list(reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")]))),
            grpc.StatusCode.UNAUTHENTICATED, ""),
    }
    for name, (call, code, text) in cases.items():
        got, details = status_of(call)
        assert got == code and text in details, (name, got, details)
        assert compile_ok(guarded).tier == pb.COMPILED, f"daemon stopped serving after {name}"
    health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
    assert health.status == health_pb2.HealthCheckResponse.SERVING


def test_worker_sigkilled_mid_compile(tmp_path: Path) -> None:
    d = Daemon(tmp_path, workers=1)
    try:
        result: dict[str, Any] = {}

        def slow() -> None:
            try:
                compile_ok(d, fake_sleep=5)
            except grpc.RpcError as e:
                result["error"] = (e.code(), e.details())

        thread = threading.Thread(target=slow)
        thread.start()
        deadline = time.monotonic() + 20
        while httpx.get(d.http + "/v1/stats").json()["in_flight"] == 0:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        (pid,) = httpx.get(d.http + "/v1/stats").json()["worker_pids"]
        os.kill(pid, signal.SIGKILL)
        thread.join(20)
        code, details = result["error"]
        assert code == grpc.StatusCode.INTERNAL and "crashed (killed by signal SIGKILL)" in details
        assert compile_ok(d).tier == pb.COMPILED
        stats = httpx.get(d.http + "/v1/stats").json()
        assert stats["workers"] == 1 and stats["worker_pids"] != [pid]
        assert d.metric("despina_workers_replaced_total") == 1
    finally:
        d.stop()


def test_a_large_compile_requests_ir_is_cut_out_as_protobuf_would_parse_it() -> None:
    """A large Compile request's IR is taken out of the received bytes rather than through protobuf (two more
    copies on the event loop); the request the core gets is the one protobuf's parse gives, for an IR sent twice
    (the last wins), a map and options sent in pieces (merged), unknown fields, more records than an honest
    request has; bytes that are not a request are refused as before."""
    from despina.server.errors import InvalidArgument
    from despina.server.grpc_transport import _cut_ir, compile_request, to_core

    first = pb.CompileRequest(ir=b"\x01" * (2 << 20), target="sm_80", specialization={"a": "1"},
                              options=pb.CompileOptions(num_warps=8)).SerializeToString()
    second = pb.CompileRequest(ir=b"\x02" * (1 << 20), specialization={"b": "2"}, driver_version=12080,
                               options=pb.CompileOptions(num_stages=2)).SerializeToString()
    unknown = b"\x78\x05"  # field 15, a varint
    crowded = pb.CompileRequest(specialization={str(i): "" for i in range(300)}).SerializeToString()
    for data, cut in ((second, True), (first + second + unknown, True), (unknown + first, True), (first + crowded, False)):
        assert (_cut_ir(data) is not None) == cut
        assert compile_request(data) == to_core(pb.CompileRequest.FromString(data))
    assert compile_request(first + second).ir == b"\x02" * (1 << 20)
    with pytest.raises(InvalidArgument, match=r"not a serialized despina\.service\.v1\.CompileRequest"):
        compile_request(first[:-1])


def test_a_refused_requests_bytes_go_with_its_answer() -> None:
    """A refused call leaves no reference cycle behind: its bytes are freed as it is answered. Answered with
    context.abort(), each refused call's frames (and its request, megabytes for a decode bomb) waited in a
    cycle for a full garbage collection, which under a flood freed dozens at once, stalling the event loop."""
    import asyncio
    import gc

    from despina.server import grpc_transport

    from .conftest import with_service

    async def body(service: Any) -> None:
        server, port = await grpc_transport.start(service, "127.0.0.1", 0)
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                call = channel.unary_unary(f"/{grpc_transport.SERVICE}/Compile")
                gc.collect()
                gc.set_debug(gc.DEBUG_SAVEALL)
                try:
                    for _ in range(3):  # the server's loop holds on to the last call's state until the next
                        with pytest.raises(grpc.aio.AioRpcError) as refused:
                            await call(b"\xff" * (2 << 20))
                    await asyncio.sleep(0.1)
                    gc.collect()
                    left = [o for o in gc.garbage if type(o).__name__ == "frame"]
                finally:
                    gc.set_debug(0)
                    gc.garbage.clear()
                assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert "not a serialized despina.service.v1.CompileRequest" in (refused.value.details() or "")
                assert not left, left
        finally:
            await server.stop(None)

    with_service(body)


def test_a_refused_large_request_is_answered_later_without_its_bytes() -> None:
    """Compile reads its request itself (a stream of one message, as a unary call sends it), so that a large
    request that is refused, past its client's share or with IR past the limits, is answered a second later
    while that client has other checks, with nothing holding its bytes meanwhile. A stream of no message is an
    empty request; small requests are answered at once."""
    import asyncio
    import gc

    from despina.server import grpc_transport

    from .conftest import with_service
    from .faults.attack import decode_bomb

    size = 3 << 20
    ir = b"\x01" * size
    bomb = decode_bomb(size // 2, salt=7)
    sent = [pb.CompileRequest(ir=ir).SerializeToString(), pb.CompileRequest(ir=bomb).SerializeToString()]

    def holders() -> list[str]:
        """Objects holding a bytes object of the request's size other than the client's own."""
        gc.collect()
        mine = [ir, bomb, *sent]
        return [type(o).__name__ for o in gc.get_objects()
                if any(isinstance(r, bytes) and len(r) >= size and all(r is not m for m in mine) for r in gc.get_referents(o))]

    async def body(service: Any) -> None:
        intake = service.intake
        found: list[str] = []
        original = intake.refusing

        async def refusing() -> None:  # looked at from the loop while the call waits (its frames suspended)
            asyncio.get_running_loop().call_later(0.1, lambda: found.extend(holders()))
            await original(wait_s=0.3)

        intake.refusing = refusing
        server, port = await grpc_transport.start(service, "127.0.0.1", 0)
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                compile_ = channel.unary_unary(f"/{grpc_transport.SERVICE}/Compile")
                # This client has a check in flight, and with it its share (the first request) or not (the bomb).
                for data, held, code, message in ((sent[0], intake.per_client_bytes, "RESOURCE_EXHAUSTED", "already has 1"),
                                                  (sent[1], 0, "INVALID_ARGUMENT", "past the IR's limits")):
                    intake._held["127.0.0.1"] = [1, held]
                    start = time.monotonic()
                    with pytest.raises(grpc.aio.AioRpcError) as refused:
                        await compile_(data)
                    assert refused.value.code().name == code and message in (refused.value.details() or "")
                    assert time.monotonic() - start >= 0.3 and not found, found
                    del intake._held["127.0.0.1"]

                async def nothing() -> Any:
                    return
                    yield

                with pytest.raises(grpc.aio.AioRpcError) as empty:
                    await channel.stream_unary(f"/{grpc_transport.SERVICE}/Compile")(nothing())
                assert empty.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert "carries no IR" in (empty.value.details() or "")
                hit = pb.CompileRequest(ir=vector_add_ir(salt=unique())).SerializeToString()
                tiers = [pb.CompileResponse.FromString(await compile_(hit)).tier for _ in range(2)]
                assert tiers == [pb.COMPILED, pb.MEMORY]
        finally:
            await server.stop(None)

    with_service(body)
