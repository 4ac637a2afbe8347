"""Access lines: one per request, as text by default and as JSON objects with --log-format json."""

from __future__ import annotations

import base64
import json
import logging
import re
import time

import httpx
import pytest

from despina.server import access

from .conftest import Daemon, unique
from .kernels import vector_add_ir


def test_text_line_per_request(daemon: Daemon) -> None:
    ir = base64.b64encode(vector_add_ir(salt=unique())).decode()
    key = httpx.post(daemon.http + "/v1/compile", json={"ir": ir}, timeout=30).json()["key"]
    garbage = base64.b64encode(b"\x01garbage").decode()  # refused by the service (a target is the schema's: 422)
    assert httpx.post(daemon.http + "/v1/compile", json={"ir": garbage}, timeout=30).status_code == 400
    pattern = re.compile(rf"INFO despina\.access: http POST /v1/compile 200 [\d.]+ms key={key} tier=compiled "
                         r"peer=127\.0\.0\.1:\d+$", re.M)
    refusal = re.compile(r"despina\.access: http POST /v1/compile 400 INVALID_ARGUMENT [\d.]+ms key=- tier=- peer=", re.M)
    deadline = time.monotonic() + 10
    while not (pattern.search(daemon.log.read_text()) and refusal.search(daemon.log.read_text())):
        assert time.monotonic() < deadline, daemon.log.read_text()[-2000:]
        time.sleep(0.05)


def test_json_formatter_carries_the_fields(capsys: pytest.CaptureFixture[str]) -> None:
    access.configure("info", "json")
    try:
        access.record("grpc", "Compile", "OK", "OK", time.perf_counter(), "ab" * 32, "memory", "ipv4:127.0.0.1:5")
        logging.getLogger("despina.server").warning("plain %s", "line")
    finally:
        access.configure("warning", "text")
    first, second = (json.loads(line) for line in capsys.readouterr().err.splitlines())
    assert {k: first[k] for k in ("logger", "transport", "method", "status", "code", "key", "tier", "peer")} == {
        "logger": "despina.access", "transport": "grpc", "method": "Compile", "status": "OK", "code": "OK",
        "key": "ab" * 32, "tier": "memory", "peer": "ipv4:127.0.0.1:5"}
    assert isinstance(first["ms"], float) and first["time"].endswith("+00:00") and first["level"] == "INFO"
    assert second["message"] == "plain line" and second["level"] == "WARNING" and "transport" not in second
