"""The daemon's logs: one access line per request (HTTP and gRPC alike), as text or JSON.

    despina serve --log-format json
    {"time": "2026-11-24T23:59:01.123Z", "level": "INFO", "logger": "despina.access", "transport": "http",
     "method": "POST /v1/compile", "status": 200, "code": "OK", "ms": 12.4, "key": "3f0c...", "tier": "compiled",
     "peer": "127.0.0.1:51234", "message": "POST /v1/compile 200 12.4ms ..."}

The transports call `record` once per answer, refusals included; they only pass what they saw.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import datetime, timezone
from typing import Any

log = logging.getLogger("despina.access")
LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# The fields an access line carries, in the order the text form shows them.
FIELDS = ("transport", "method", "status", "code", "ms", "key", "tier", "peer")


def record(transport: str, method: str, status: int | str, code: str, started: float, key: str = "", tier: str = "",
           peer: str = "") -> None:
    """Log one answer: `method` is "POST /v1/compile" or the RPC's name, `status` the HTTP status or the gRPC
    code's name, `code` the status name the error shape carries ("OK" for a success), `started` a
    `time.perf_counter()` reading taken when the request arrived."""
    if not log.isEnabledFor(logging.INFO):  # no line is written: making one costs every request microseconds
        return
    fields: dict[str, Any] = {"transport": transport, "method": method, "status": status, "code": code,
                              "ms": round((time.perf_counter() - started) * 1000, 2), "key": key, "tier": tier,
                              "peer": peer}
    shown = f"{status}" if code in ("OK", status) else f"{status} {code}"
    text = f"{transport} {method} {shown} {fields['ms']}ms key={key or '-'} tier={tier or '-'} peer={peer or '-'}"
    log.info(text, extra={"access": fields})


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (ISO 8601, UTC), level, logger, message, and an access line's fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
        }
        out.update(getattr(record, "access", {}))
        out["message"] = record.getMessage()
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def configure(level: str, fmt: str) -> None:
    """The root logger at `level`, writing `fmt` ("text" or "json") to standard error."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
