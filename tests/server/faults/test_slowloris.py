"""Slow clients against a real daemon's HTTP port: connections that never finish their headers, a body
that never finishes, a JSON body of millions of values. New clients are still served, the slow ones
are closed, and the log stays short."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import httpx

from ..conftest import Daemon

SLOW = 200
LIMIT = 100


def test_slowloris_connections_are_closed_and_new_clients_served(tmp_path: Path) -> None:
    d = Daemon(tmp_path, extra=("--http-max-connections", str(LIMIT), "--http-header-timeout", "1"))
    slow: list[socket.socket] = []
    try:
        for _ in range(SLOW):
            s = socket.create_connection(("127.0.0.1", d.http_port))
            s.sendall(b"POST /v1/compile HTTP/1.1\r\nHost: x\r\n")  # and nothing more
            slow.append(s)
        started = time.monotonic()
        with httpx.Client(base_url=d.http, timeout=5) as http:
            assert http.get("/healthz").status_code == 200  # at the limit: the oldest slow one made room
        assert time.monotonic() - started < 2
        time.sleep(2.5)  # past the header time-out
        closed = 0
        for s in slow:
            s.settimeout(2)
            try:
                closed += s.recv(1) == b""
            except ConnectionResetError:
                closed += 1
        assert closed == SLOW
        with httpx.Client(base_url=d.http, timeout=5) as http:
            assert http.get("/healthz").status_code == 200
        assert len(d.log.read_text().splitlines()) < 20, d.log.read_text()[-2000:]
    finally:
        for s in slow:
            s.close()
        d.stop()


def test_a_body_that_never_finishes_and_a_body_of_millions_of_values(tmp_path: Path) -> None:
    d = Daemon(tmp_path, extra=("--http-body-timeout", "1"))
    try:
        with socket.create_connection(("127.0.0.1", d.http_port)) as s:
            s.sendall(b"POST /v1/compile HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
                      b"content-length: 1000\r\n\r\n{\"ir\": \"")
            s.settimeout(10)
            started = time.monotonic()
            answer = b""
            while b"--http-body-timeout" not in answer and (chunk := s.recv(4096)):
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 504") and b"--http-body-timeout" in answer, answer
            assert 0.9 < time.monotonic() - started < 5
        values = b"[" + b"0," * 3_000_000 + b"0]"  # 6 MB: 4 s of json.loads on the event loop before
        started = time.monotonic()
        r = httpx.post(d.http + "/v1/execute", content=values, headers={"content-type": "application/json"}, timeout=30)
        assert r.status_code == 400 and "more than 100000 JSON values" in r.json()["error"]["message"]
        assert r.headers["connection"] == "close"  # the rest of the body is not received (and parsed by h11)
        assert time.monotonic() - started < 2
    finally:
        d.stop()
