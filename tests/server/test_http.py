"""The REST API against real uvicorn with a real HTTP client."""

from __future__ import annotations

import base64
import re
from typing import Any

import httpx
import pytest

from despina.compiler.options import CompileOptions

from .conftest import Daemon, unique
from .kernels import vector_add_ir
from .test_grpc import guarded  # noqa: F401  (fixture)


def body(ir: bytes, **kw: Any) -> dict[str, Any]:
    return {"ir": base64.b64encode(ir).decode(), **kw}


def test_compile_list_and_artifacts(daemon: Daemon) -> None:
    with httpx.Client(base_url=daemon.http, timeout=30) as http:
        r = http.post("/v1/compile", json=body(vector_add_ir(salt=unique()), target="sm_89", options={"num_warps": 8}))
        assert r.status_code == 200, r.text
        reply = r.json()
        assert reply["tier"] == "compiled" and reply["metadata"]["target"] == "sm_89"
        key, cubin = reply["key"], base64.b64decode(reply["cubin"])
        assert http.post("/v1/compile", json=body(vector_add_ir(salt=unique()))).json()["tier"] == "compiled"

        listed = http.get("/v1/kernels", params={"limit": 2}).json()
        assert len(listed) == 2 and key in {k["key"] for k in listed}
        mine = next(k for k in listed if k["key"] == key)
        assert mine["name"] == "add_kernel" and mine["target"] == "sm_89" and mine["sizes"]["cubin"] == len(cubin)

        info = http.get(f"/v1/kernels/{key}").json()
        assert info["metadata"]["num_warps"] == 8
        ptx = http.get(f"/v1/kernels/{key}/ptx")
        assert ptx.headers["content-type"].startswith("text/plain") and ptx.text == reply["ptx"]
        blob = http.get(f"/v1/kernels/{key}/cubin")
        assert blob.headers["content-type"] == "application/octet-stream" and blob.content == cubin

        assert http.get(f"/v1/kernels/{'0' * 64}").status_code == 404
        assert http.get(f"/v1/kernels/{'0' * 64}/ptx").json()["error"]["code"] == "NOT_FOUND"
        assert http.get("/v1/kernels/not-a-key").status_code == 400
        assert http.get("/docs").status_code == 200
        assert "/v1/compile" in http.get("/openapi.json").json()["paths"]


def test_errors_are_json_with_a_code(daemon: Daemon) -> None:
    with httpx.Client(base_url=daemon.http, timeout=30) as http:
        r = http.post("/v1/compile", json={"ir": "%%% not base64"})
        assert r.status_code == 400 and "base64" in r.json()["error"]["message"]
        r = http.post("/v1/compile", json=body(vector_add_ir()[:-9]))
        assert r.status_code == 400 and r.json()["error"]["code"] == "INVALID_ARGUMENT"
        r = http.post("/v1/compile", json=body(vector_add_ir(), target="gfx90a"))  # the schema says what a target is
        assert r.status_code == 422 and r.json()["error"]["message"].startswith("body.target: String should match")
        r = http.post("/v1/compile", json={"target": 3})
        assert r.status_code == 422 and r.json()["error"]["code"] == "INVALID_ARGUMENT"
        assert r.json()["error"]["message"] == "body.ir: Field required; body.target: Input should be a valid string (got 3)"
        r = http.post("/v1/execute", json={})
        assert r.status_code == 422 and list(r.json()) == ["error"] and "body.kernel: Field required" in r.text
        r = http.post("/v1/compile", content=b"{not json", headers={"content-type": "application/json"})
        assert r.status_code == 422 and "JSON decode error" in r.json()["error"]["message"]
        r = http.get("/v1/kernels", params={"limit": "many"})
        assert r.status_code == 422 and r.json()["error"]["message"].startswith("query.limit: ")
        r = http.get("/v1/nowhere")
        assert r.status_code == 404 and r.json()["error"] == {
            "code": "NOT_FOUND", "message": "no route GET /v1/nowhere; the API is listed at /docs"}
        r = http.put("/v1/compile", json={})
        assert r.status_code == 405 and r.json()["error"]["code"] == "UNIMPLEMENTED"
        r = http.post("/v1/execute", json={"kernel": body(vector_add_ir()), "grid": [0]})
        assert r.status_code == 422 and r.json()["error"]["message"].startswith("body.grid.0: Input should be greater")


def test_token_and_limits(guarded: Daemon) -> None:  # noqa: F811
    with httpx.Client(base_url=guarded.http, timeout=30) as http:
        assert http.get("/healthz").status_code == 200
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic czNjcmV0"}):
            r = http.get("/v1/kernels", headers=headers)
            assert r.status_code == 401 and r.json()["error"]["code"] == "UNAUTHENTICATED"
            # Open for Prometheus and browsers without --protect-docs (test_http_docs.py has the flag).
            assert http.get("/metrics", headers=headers).status_code == 200
        ok = guarded.headers()
        assert http.get("/v1/kernels", headers=ok).status_code == 200
        r = http.post("/v1/compile", headers=ok, json=body(b"\1" * 200_000))
        assert r.status_code == 413 and "at most 65536" in r.json()["error"]["message"]
        r = http.post("/v1/compile", headers=ok, json=body(b"\1" * 2_000_000))
        assert r.status_code == 413 and "--max-request-bytes" in r.json()["error"]["message"]

        def chunks() -> Any:  # no Content-Length: the limit still holds
            for _ in range(40):
                yield b" " * 50_000

        r = http.post("/v1/compile", headers=dict(ok, **{"content-type": "application/json"}), content=chunks())
        assert r.status_code == 413
        r = http.post("/v1/compile", headers=ok, json=body(vector_add_ir(salt=unique())))
        assert r.status_code == 200 and r.json()["tier"] == "compiled"


def test_metrics(daemon: Daemon) -> None:
    httpx.post(daemon.http + "/v1/compile", json=body(vector_add_ir(salt=unique())), timeout=30)
    text = httpx.get(daemon.http + "/metrics").text
    for name in ("despina_requests_total", "despina_cache_answers_total", "despina_compile_seconds_bucket",
                 "despina_compiles_in_flight", "despina_errors_total", "despina_redis_up"):
        assert name in text
    assert daemon.metric("despina_compiles_total", outcome="ok") >= 1


@pytest.mark.filterwarnings("ignore")
def test_openapi_fuzzed(daemon: Daemon) -> None:
    schemathesis = pytest.importorskip("schemathesis")
    from hypothesis import HealthCheck, given, settings
    from schemathesis import checks

    schema = schemathesis.openapi.from_url(daemon.http + "/openapi.json")
    # Schema-valid is not enough for /v1/compile (the IR must also decode and verify), so a
    # 400 for valid-looking data is right here; every other check applies.
    excluded = [checks.positive_data_acceptance]
    for result in schema.get_all_operations():
        op = result.ok()

        @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(case=op.as_strategy())
        def check(case: Any) -> None:
            response = case.call(base_url=daemon.http, timeout=30)
            case.validate_response(response, excluded_checks=excluded)

        check()
    assert httpx.get(daemon.http + "/healthz").status_code == 200


def test_kernel_listing_filters_and_entries(daemon: Daemon) -> None:
    with httpx.Client(base_url=daemon.http, timeout=30) as http:
        name = f"k_{unique()[:12]}"
        key = http.post("/v1/compile", json=body(vector_add_ir(name=name, salt=unique()), target="sm_86")).json()["key"]
        http.post("/v1/compile", json=body(vector_add_ir(name=name, salt=unique()), target="sm_80"))
        (mine,) = http.get("/v1/kernels", params={"name": f"{name[:6]}*", "target": "sm_86", "since": "1h"}).json()
        assert mine["key"] == key and mine["hits"] == 1 and mine["options"] == CompileOptions().as_dict()
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", mine["created"]) and mine["last_used"] >= mine["created"]
        assert set(mine["tiers"]) == {"memory", "disk"}
        assert http.get("/v1/kernels", params={"name": name, "since": "2099-01-01T00:00:00Z"}).json() == []
        r = http.get("/v1/kernels", params={"nmae": name})
        assert r.status_code == 400 and r.json()["error"]["message"] == (
            "GET /v1/kernels takes no 'nmae'; it takes limit, name, since, target")
        r = http.get("/v1/kernels", params={"since": "last tuesday"})
        assert r.status_code == 400 and r.json()["error"]["message"].startswith("since: 'last tuesday' is neither an age")
        for params in ({"limit": 0}, {"limit": 10**30}, {"limit": -1}, {"target": "x" * 100}):
            r = http.get("/v1/kernels", params=params)
            assert r.status_code == 422 and r.json()["error"]["message"].startswith(f"query.{next(iter(params))}: ")
        # A daemon without a token deletes nothing.
        for r in (http.delete(f"/v1/kernels/{key}"), http.delete("/v1/kernels", params={"older_than": "0s"})):
            assert r.status_code == 403 and r.json()["error"]["code"] == "PERMISSION_DENIED"
        assert http.get(f"/v1/kernels/{key}").status_code == 200


def test_delete_needs_the_token(guarded: Daemon) -> None:  # noqa: F811
    ok = guarded.headers()
    with httpx.Client(base_url=guarded.http, timeout=30, headers=ok) as http:
        key = http.post("/v1/compile", json=body(vector_add_ir(salt=unique()))).json()["key"]
        assert httpx.delete(f"{guarded.http}/v1/kernels/{key}").status_code == 401
        r = http.delete(f"/v1/kernels/{key}")
        assert r.status_code == 200 and r.json() == {"key": key, "tiers": ["memory", "disk", "redis"]}
        assert http.get(f"/v1/kernels/{key}").status_code == 404
        assert http.delete(f"/v1/kernels/{key}").json()["error"]["code"] == "NOT_FOUND"
        assert http.delete("/v1/kernels/not-a-key").status_code == 400
        r = http.delete("/v1/kernels")
        assert r.status_code == 422 and r.json()["error"]["message"].startswith("query.older_than: Field required")
        assert http.delete("/v1/kernels", params={"older_than": "-5d"}).status_code == 400
        assert http.delete("/v1/kernels", params={"older_than": "7d", "force": "1"}).status_code == 400
        kept = http.post("/v1/compile", json=body(vector_add_ir(salt=unique()))).json()["key"]
        assert kept not in http.delete("/v1/kernels", params={"older_than": "1h"}).json()["deleted"]
        assert kept in http.delete("/v1/kernels", params={"older_than": "0s"}).json()["deleted"]
        assert http.get(f"/v1/kernels/{kept}").status_code == 200  # Redis still had it: DELETE by age spares Redis


def test_the_schema_is_as_strict_as_the_daemon(daemon: Daemon) -> None:
    with httpx.Client(base_url=daemon.http, timeout=30) as http:
        schema = http.get("/openapi.json").json()["components"]["schemas"]
        assert schema["OptionsBody"]["properties"]["num_warps"]["enum"] == [1, 2, 4, 8, 16, 32]
        assert all(schema[m]["additionalProperties"] is False for m in ("CompileBody", "OptionsBody", "ExecuteBody", "TuneBody"))
        r = http.post("/v1/compile", json={**body(vector_add_ir()), "num_warps": 8})  # belongs in options
        assert r.status_code == 422 and r.json()["error"]["message"] == "body.num_warps: Extra inputs are not permitted (got 8)"
        r = http.post("/v1/compile", json={**body(vector_add_ir()), "options": {"num_warps": 3}})
        assert r.status_code == 422 and r.json()["error"]["message"].startswith("body.options.num_warps: Input should be 1")
        r = http.post("/v1/compile", json={**body(vector_add_ir()), "options": {"num_ctas": 2}})
        assert r.status_code == 422 and r.json()["error"]["message"].startswith("body.options.num_ctas: Input should be 1")
        r = http.post("/v1/compile", json={**body(vector_add_ir()), "options": {"maxnreg": 300}})
        assert r.status_code == 422 and "body.options.maxnreg: Input should be less than or equal to 255" in r.text
        r = http.post("/v1/tune", json={"client_key": "k", "warmup_ms": 0})
        assert r.status_code == 422 and "body.client_key: String should match" in r.json()["error"]["message"]
