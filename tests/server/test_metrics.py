"""/v1/stats, /metrics and the access log agree after a scripted mix of good and bad requests on both transports."""

from __future__ import annotations

import base64
import json
import time
from collections import Counter
from pathlib import Path

import grpc
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from despina.proto import service_pb2 as pb
from despina.proto import service_pb2_grpc
from despina.server import execute

from .conftest import Daemon, RedisProcess, unique
from .kernels import vector_add_ir


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def samples(text: str, name: str, label: str) -> dict[str, int]:
    return {s.labels[label]: int(s.value) for f in text_string_to_metric_families(text) for s in f.samples
            if s.name == name}


def access_lines(log: Path) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    return [line for line in lines if line["logger"] == "despina.access"]


def test_stats_metrics_and_access_log_agree(tmp_path: Path, shared_redis: RedisProcess) -> None:
    if execute.host_unavailable_reason() is None:
        pytest.skip("a GPU host: the scripted Execute would run (tests/gpu/test_execute.py covers it there)")
    d = Daemon(tmp_path, shared_redis.url, token="t0ken", extra=("--log-format", "json", "--max-request-bytes", "100000"))
    try:
        ok = d.headers()
        ir = vector_add_ir(salt=unique())
        buffer = {"buffer": {"data": b64(bytes(64)), "dtype": "fp32", "shape": [16]}}
        with httpx.Client(base_url=d.http, timeout=30, headers=ok) as http:
            key = http.post("/v1/compile", json={"ir": b64(ir)}).json()["key"]
            assert http.post("/v1/compile", json={"ir": b64(ir)}).json()["tier"] == "memory"
            assert http.get(f"/v1/kernels/{key}/ptx").status_code == 200
            assert http.get(f"/v1/kernels/{key}").status_code == 200
            statuses = [
                http.post("/v1/compile", json={"ir": "%%%"}).status_code,  # not base64
                http.post("/v1/compile", json={"ir": b64(ir), "target": "gfx90a"}).status_code,  # 422: the schema
                http.post("/v1/compile", json={"ir": b64(b"\x01garbage")}).status_code,  # does not decode
                http.post("/v1/compile", json={"ir": 5, "options": {"num_warps": "x"}}).status_code,  # 422
                http.get("/v1/kernels/not-a-key").status_code,
                http.get(f"/v1/kernels/{'0' * 64}").status_code,  # NOT_FOUND
                http.get("/v1/nowhere").status_code,  # NOT_FOUND
                http.delete("/v1/stats").status_code,  # 405
                http.post("/v1/compile", json={"ir": b64(b"\1" * 200_000)}).status_code,  # 413
                http.post("/v1/execute", json={"kernel": {"ir": b64(ir)}, "grid": [1],
                                               "args": [buffer, buffer, buffer, {"int_value": 16}]}).status_code,
                httpx.get(d.http + "/v1/kernels").status_code,  # no token
            ]
        assert statuses == [400, 422, 400, 422, 400, 404, 404, 405, 413, 501, 401]
        channel = grpc.insecure_channel(d.grpc.split("://")[1])
        compiler = service_pb2_grpc.CompilerStub(channel)
        meta = (("authorization", "Bearer t0ken"),)
        assert compiler.Compile(pb.CompileRequest(ir=ir), metadata=meta, timeout=30).tier == pb.Tier.MEMORY
        for call in (lambda: compiler.Compile(pb.CompileRequest(ir=b"\x01garbage"), metadata=meta, timeout=30),
                     lambda: compiler.Stats(pb.StatsRequest(), timeout=30)):
            try:
                call()
                raise AssertionError("the RPC should have failed")
            except grpc.RpcError as e:
                assert e.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNAUTHENTICATED)
        channel.close()

        stats = httpx.get(d.http + "/v1/stats", headers=ok, timeout=10).json()
        text = httpx.get(d.http + "/metrics", timeout=10).text
        expected = {"INVALID_ARGUMENT": 6, "NOT_FOUND": 2, "UNIMPLEMENTED": 2, "RESOURCE_EXHAUSTED": 1,
                    "UNAUTHENTICATED": 2}
        assert stats["errors"] == samples(text, "despina_errors_total", "code") == expected
        assert stats["executes"] == samples(text, "despina_executes_total", "outcome") == {
            "refused": 1, "ok": 0, "error": 0, "fault": 0, "timeout": 0, "crash": 0}
        assert stats["requests"] == sum(samples(text, "despina_requests_total", "method").values())
        assert stats["hits"] == {t: samples(text, "despina_cache_answers_total", "tier").get(t, 0)
                                 for t in ("memory", "disk", "redis", "compiled")}
        assert stats["hits"]["memory"] == 2 and stats["hits"]["compiled"] == 1
        assert stats["compiles"] == samples(text, "despina_compiles_total", "outcome")["ok"] == 1
        failed = samples(text, "despina_compiles_total", "outcome")
        assert stats["compile_errors"] == sum(failed.get(o, 0) for o in ("error", "timeout", "crash"))

        deadline = time.monotonic() + 10  # the last lines may still be in the daemon's buffer
        while len(access_lines(d.log)) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        lines = access_lines(d.log)
        refused = Counter(str(line["code"]) for line in lines if line["code"] != "OK")
        assert dict(refused) == expected
        compiles = [line for line in lines if line["method"] in ("POST /v1/compile", "Compile") and line["code"] == "OK"]
        assert [(c["transport"], c["tier"], c["key"]) for c in compiles] == [
            ("http", "compiled", key), ("http", "memory", key), ("grpc", "memory", key)]
        assert all(isinstance(line["ms"], float) and line["peer"] for line in lines)
    finally:
        d.stop()
